"""mlflow-dlaas: comparative measurement studies of deep-learning frameworks in MLflow.

Importing this package imports no deep-learning framework and no NVML binding.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
