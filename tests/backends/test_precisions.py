"""Each runtime declares the precisions it serves, asked before anything starts; its
``prepare()`` no longer finds them out one comparison at a time."""

from __future__ import annotations

import ast

import pytest

from mlflow_dlaas.backends import RUNTIMES, InferenceOptions, get_runtime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.precision import Precision
from tests.conftest import ROOT

SERVED = {"onnxruntime": {"fp32", "int8"}, "openvino": {"fp32", "bf16", "int8"},
          "tensorflow": {"fp32", "bf16"}, "pytorch": {"fp32", "bf16"}, "mxnet": {"fp32"}}


@pytest.mark.parametrize("name", sorted(SERVED))
def test_a_runtime_says_what_it_serves_on_the_cpu_without_loading_it(name: str) -> None:
    runtime = get_runtime(name)
    served = {str(p) for p, devices in runtime.precisions.items() if "cpu" in devices}
    assert served == SERVED[name]
    for precision in set(map(str, Precision)) - served:
        with pytest.raises(ConfigError):
            runtime.refuse_unserved(InferenceOptions(precision=precision,
                                                     quantization="static"))


def test_a_refusal_says_what_to_use_instead() -> None:
    with pytest.raises(ConfigError, match="serve bf16 with openvino or pytorch"):
        get_runtime("onnxruntime").refuse_unserved(InferenceOptions(precision="bf16"))
    with pytest.raises(ConfigError, match="quantization=static"):
        get_runtime("openvino").refuse_unserved(InferenceOptions(precision="int8"))
    with pytest.raises(ConfigError, match="your own model file at fp32"):
        get_runtime("tensorflow").refuse_unserved(InferenceOptions(precision="bf16"),
                                                  user_file=True)
    get_runtime("openvino").refuse_unserved(InferenceOptions(precision="int8",
                                                             quantization="static"))


def test_a_precision_is_one_type_across_processes() -> None:
    options = InferenceOptions(precision="INT8 ")
    assert options.precision is Precision.INT8 and f"{options.precision}" == "int8"
    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16, fp16, int8"):
        InferenceOptions(precision="fp64")


def _precision_tests(function: ast.FunctionDef) -> int:
    """Comparisons in ``function`` that test the precision asked."""
    return sum(1 for node in ast.walk(function) if isinstance(node, ast.Compare)
               and "options.precision" in ast.unparse(node))


@pytest.mark.parametrize("name", sorted(RUNTIMES))
def test_prepare_tests_the_precision_at_most_once(name: str) -> None:
    tree = ast.parse((ROOT / "mlflow_dlaas" / "backends" / name / "serving.py").read_text())
    (prepare,) = [n for n in ast.walk(tree)
                  if isinstance(n, ast.FunctionDef) and n.name == "prepare"]
    assert _precision_tests(prepare) <= 1
