"""``mlflow-dlaas decide``: measure more, in interleaved rounds, only of the configurations
behind a report's open answers, until each is decided or the budget is spent."""
