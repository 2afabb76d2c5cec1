#!/usr/bin/env bash
# The GPU checks, as one prepared command for a machine with an NVIDIA GPU:
#   1. the monitor's NVML paths and the fingerprint on real hardware;
#   2. CUDA training in PyTorch and TensorFlow (issue: training);
#   3. ONNX Runtime's CUDA provider, fp32 and fp16, and PyTorch fp16 (issue: inference).
# Uses .venv/bin/python when present, else $PY (default python3), with this checkout on
# PYTHONPATH; a step whose framework or GPU build is missing says SKIP with the reason.
# On a machine without an NVIDIA driver it says so and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: SKIP: no NVIDIA GPU or driver on this machine"
  exit 0
fi
nvidia-smi -L
PY=${PY:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export MLFLOW_TRACKING_URI="sqlite:///$(mktemp -d)/mlflow.db"
status=0
has() { "$PY" -c "$1" >/dev/null 2>&1; }
step() { echo; echo "== $1"; }

step "NVML monitor and fingerprint"
"$PY" - <<'PY' || status=1
import time

import mlflow

from mlflow_dlaas.environment import gpu_info
from mlflow_dlaas.monitor import ResourceMonitor

info = gpu_info()
print("fingerprint:", info)
assert info["gpu_count"] >= 1, info
with mlflow.start_run() as run, ResourceMonitor(interval_s=0.05) as monitor:
    with monitor.phase("idle"):
        time.sleep(1.0)
metrics = mlflow.MlflowClient().get_run(run.info.run_id).data.metrics
for key in ("run/peak_gpu0_power_watts", "run/peak_gpu0_memory_used_bytes",
            "run/peak_gpu0_temperature_celsius", "run/peak_gpu0_sm_clock_mhz",
            "run/gpu0_energy_joules"):
    print(f"{key} = {metrics.get(key)}")
    assert key in metrics, f"missing {key}"
assert metrics["run/gpu0_energy_joules"] > 0
print("unavailable:", monitor.result.unavailable)
PY

train() {
  "$PY" -m mlflow_dlaas.workloads.train --framework "$1" --device cuda --epochs 1 \
    --log_model false --monitor_interval 0.1 || status=1
}
step "PyTorch CUDA training"
if has "import torch; assert torch.cuda.is_available()"; then train pytorch
else echo "SKIP: torch with CUDA is not installed here"; fi
step "TensorFlow GPU training"
if has "import tensorflow as tf; assert tf.config.list_physical_devices('GPU')"; then
  train tensorflow
else echo "SKIP: TensorFlow with a GPU is not installed here"; fi

infer() {
  "$PY" -m mlflow_dlaas.workloads.infer --runtime "$1" --device cuda --precision "$2" \
    --batch_sizes 1,32 --scenarios single_stream,offline --min_query_count 50 || status=1
}
step "ONNX Runtime CUDA provider, fp32 and fp16"
if has "import onnxruntime as o, torch; assert 'CUDAExecutionProvider' in o.get_available_providers()"; then
  infer onnxruntime fp32; infer onnxruntime fp16
else echo "SKIP: onnxruntime-gpu (CUDAExecutionProvider) is not installed here"; fi
step "PyTorch fp16 inference"
if has "import torch; assert torch.cuda.is_available()"; then infer pytorch fp16
else echo "SKIP: torch with CUDA is not installed here"; fi

echo
[ "$status" -eq 0 ] && echo "gpu_check: OK" || echo "gpu_check: FAILED"
exit "$status"
