"""`import mlflow_dlaas` must not import a deep-learning framework or NVML."""

import subprocess
import sys

FRAMEWORKS = ["torch", "tensorflow", "keras", "mxnet", "onnxruntime", "openvino", "jax"]


def _imported_after(code: str) -> list[str]:
    watched = FRAMEWORKS + ["pynvml"]
    probe = f"import sys\n{code}\nprint(sorted(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return eval(out.stdout.strip().splitlines()[-1])


def test_importing_the_core_imports_no_framework_and_no_nvml() -> None:
    code = (
        "import mlflow_dlaas, mlflow_dlaas.cli, mlflow_dlaas.environment, mlflow_dlaas.monitor\n"
        "import mlflow_dlaas.own_project.command, mlflow_dlaas.store.tracking"
    )
    assert _imported_after(code) == []


def test_the_run_fingerprint_imports_no_framework() -> None:
    code = "from mlflow_dlaas.environment import fingerprint\nfingerprint()"
    assert [m for m in _imported_after(code) if m != "pynvml"] == []


def test_the_training_entry_starts_its_worker_before_it_imports_mlflow() -> None:
    """The worker's framework import overlaps the entry's MLflow import only if the entry
    module and everything it runs before starting the worker leave MLflow out."""
    probe = ("import sys\nimport mlflow_dlaas.workloads.train\n"
             "print(sorted(m for m in ('mlflow', 'sqlalchemy', 'optuna') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
