"""Optuna studies over hyper-parameters and parallelism settings; trials as child runs."""
