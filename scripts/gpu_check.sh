#!/usr/bin/env bash
# The GPU checks, as one prepared command for a machine with an NVIDIA GPU.
# Exercises the NVML paths of the monitor and the fingerprint on real hardware; on a machine
# without an NVIDIA driver it says so and exits 0 (nothing to check there).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: SKIP: no NVIDIA GPU or driver on this machine"
  exit 0
fi
nvidia-smi -L
PY=${PY:-python3}
if [ ! -x .venv/bin/python ]; then
  $PY -m venv .venv
  .venv/bin/pip install -q -e '.[nvidia,dev]'
fi
export MLFLOW_TRACKING_URI="sqlite:///$(mktemp -d)/mlflow.db"
.venv/bin/python - <<'PY'
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
print("gpu_check: monitor NVML OK")
PY
