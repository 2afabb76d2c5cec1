"""Optuna as this project reaches it: a study's storage from its URL, the pruners, and the
few calls Optuna offers no public API for, each in one place so that a new Optuna release
breaks one module, not the studies. Below the workloads: a trial's entry process opens its
trial here to report epochs to the pruner."""
