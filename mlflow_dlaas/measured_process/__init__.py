"""The measured process (the worker) and its two sides: the process that holds only what is
measured, and the entry that starts, watches and speaks with it. Each workload's worker code
is ``workloads/<entry>_worker.py``; this package is what every worker and entry share.

The entry point that MLflow Projects starts owns the MLflow run and the monitor; it starts
the worker with the parallel settings in its environment and logs what the worker reports
over a pipe (:mod:`channel`). The worker imports numpy, the framework and the light parts of
mlflow_dlaas, never MLflow (until its save phase, after everything measured).
"""
