"""``mlflow-dlaas reproduce``: the two papers' findings re-measured here, claim by claim."""
