"""What a run says, whatever keeps it: the run schema (every metric key, tag and alias),
the goals a user asks of runs, a run's validity verdict, which figures become metrics, and
links to a run in MLflow's UI. A leaf: it imports nothing of ours but ``errors``. How runs
are kept (the store, journal, ownership, lifecycle) is :mod:`mlflow_dlaas.store`."""
