"""Contract suites a plug-in reuses in its own tests, as Optuna ships ``optuna.testing``:
:mod:`mlflow_dlaas.testing.runtime_contract` for inference runtimes."""
