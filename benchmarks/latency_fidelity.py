"""Our single-stream median against independent timers, on the same model, input and threads.

- PyTorch runtime vs ``torch.utils.benchmark.Timer`` (blocked autorange);
- ONNX Runtime vs a bare ``session.run`` loop timed with perf_counter_ns.
Both sides alternate in rounds within one process; prints the medians and our deviation.

    .venv/bin/python benchmarks/latency_fidelity.py [--model lenet5] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mlflow_dlaas.inference import scenarios
from mlflow_dlaas.inference.runtimes import InferenceOptions, get_runtime
from mlflow_dlaas.inference.source import fresh_torch_source
from mlflow_dlaas.parallelism import ParallelismSettings

RULE = scenarios.StoppingRule(min_queries=300, min_duration_s=1.0, warmup_queries=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch
    import torch.utils.benchmark as benchmark

    options = InferenceOptions(parallelism=ParallelismSettings(intra_op_threads=args.threads))
    source = fresh_torch_source(args.model, None, 0, Path(tempfile.mkdtemp()))
    x = source.reference_inputs[:1]

    torch_rt = get_runtime("pytorch")
    torch_rt.load()
    ours_torch = torch_rt.prepare(source, options)
    module, tx = source.torch_module, torch.from_numpy(x)

    def bare_torch() -> None:
        with torch.inference_mode():
            module(tx)

    ort_rt = get_runtime("onnxruntime")
    ort_rt.load()
    ours_ort = ort_rt.prepare(source, options)
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    session = ort.InferenceSession(str(source.onnx_path), so,
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def bare_ort_median() -> float:
        for _ in range(RULE.warmup_queries):
            session.run(None, {name: x})
        samples = []
        for _ in range(RULE.min_queries):
            t0 = time.perf_counter_ns()
            session.run(None, {name: x})
            samples.append(time.perf_counter_ns() - t0)
        return statistics.median(samples) / 1e6

    results: dict[str, list[float]] = {k: [] for k in ("ours_torch", "timer", "ours_ort",
                                                       "bare_ort")}
    timer = benchmark.Timer(stmt="bare_torch()", globals={"bare_torch": bare_torch},
                            num_threads=args.threads)
    for _ in range(args.rounds):
        results["ours_torch"].append(scenarios.single_stream(ours_torch, x, RULE).p50_ms)
        results["timer"].append(timer.blocked_autorange(min_run_time=1.0).median * 1e3)
        results["ours_ort"].append(scenarios.single_stream(ours_ort, x, RULE).p50_ms)
        results["bare_ort"].append(bare_ort_median())
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"model {args.model}, batch 1, {args.threads} thread(s), {args.rounds} rounds")
    for label, ours, ref, ref_name in (("pytorch", "ours_torch", "timer", "torch Timer"),
                                       ("onnxruntime", "ours_ort", "bare_ort", "bare run")):
        print(f"{label:12s} ours p50 {med[ours]:.4f} ms  {ref_name} median {med[ref]:.4f} ms  "
              f"ours/reference {100 * (med[ours] / med[ref] - 1):+.2f} %")


if __name__ == "__main__":
    main()
