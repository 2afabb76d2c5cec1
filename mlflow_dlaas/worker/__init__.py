"""The measured worker: the process that holds only what is measured.

The entry point that MLflow Projects starts owns the MLflow run and the monitor; it starts
the worker with the parallel settings in its environment and logs what the worker reports
over a pipe (:mod:`channel`). The worker imports numpy, the framework and the light parts of
mlflow_dlaas, never MLflow (until its save phase, after everything measured).
"""
