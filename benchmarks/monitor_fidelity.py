"""Our peak RSS and CPU seconds against the kernel's own accounting.

A child allocates a known amount and burns a known amount of CPU (in itself and in a
grandchild it reaps). The same command runs under `mlflow-dlaas monitor` (our sampled figures
and, from wait4, the kernel's) and under `/usr/bin/time -v`. Prints each figure and the
relative difference.

    .venv/bin/python benchmarks/monitor_fidelity.py [--megabytes 400] [--cpu-seconds 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

CHILD = r'''
import subprocess, sys, time
mb, cpu = int(sys.argv[1]), float(sys.argv[2])
burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<%f: pass" % (cpu / 2)
subprocess.run([sys.executable, "-c", burn], check=True)
block = bytearray(mb * 2**20)
for i in range(0, len(block), 4096):
    block[i] = 1
t = time.process_time()
while time.process_time() - t < cpu / 2:
    pass
time.sleep(0.5)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=400)
    parser.add_argument("--cpu-seconds", type=float, default=2.0)
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()
    cmd = [sys.executable, "-c", CHILD, str(args.megabytes), str(args.cpu_seconds)]

    timed = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True,
                           check=True)
    time_rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr)
                   .group(1)) * 1024
    time_cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)",
                                                timed.stderr))

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlflow.db"
        import mlflow

        from mlflow_dlaas.own_project.command import run_monitored
        from mlflow_dlaas.runs import schema

        outcome = run_monitored(cmd, interval_s=args.interval, experiment="fidelity")
        metrics = mlflow.MlflowClient().get_run(outcome.run_id).data.metrics

    ours_rss = metrics["run/peak_proc_rss_megabytes"] * schema.BYTES_PER_MEGABYTE
    ours_cpu = metrics["run/proc_cpu_seconds"]
    print(f"interval {args.interval}s, child allocates {args.megabytes} MiB, "
          f"burns {args.cpu_seconds} s CPU (half in a reaped grandchild)")
    rows = [
        ("peak RSS MiB", ours_rss / 2**20, outcome.kernel_max_rss_bytes / 2**20, time_rss / 2**20),
        ("CPU seconds", ours_cpu, outcome.kernel_cpu_seconds, time_cpu),
    ]
    print(f"{'figure':14s} {'ours':>10s} {'wait4':>10s} {'time -v':>10s} "
          f"{'ours/wait4':>11s} {'ours/time':>10s}")
    for name, ours, kernel, gnu in rows:
        print(f"{name:14s} {ours:10.2f} {kernel:10.2f} {gnu:10.2f} "
              f"{100 * (ours / kernel - 1):+10.2f}% {100 * (ours / gnu - 1):+9.2f}%")


if __name__ == "__main__":
    main()
