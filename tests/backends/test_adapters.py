"""Every framework adapter importable here passes the shared contract."""

from __future__ import annotations

import importlib.util

import pytest

from mlflow_dlaas.backends import available_frameworks, get_framework
from mlflow_dlaas.data import load_dataset
from mlflow_dlaas.errors import ConfigError, MissingDependencyError
from mlflow_dlaas.testing.trainer_contract import CONTRACT, DATA_CONTRACT


def _adapter(name: str):
    adapter = get_framework(name)
    if importlib.util.find_spec(adapter.module) is None:
        pytest.skip(f"{adapter.module} is not installed in this environment; the "
                    f"{name} adapter is exercised through projects/{name} instead")
    adapter.load()
    return adapter


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.mark.parametrize("framework", sorted(available_frameworks()))
@pytest.mark.parametrize("check", CONTRACT, ids=lambda c: c.__name__)
def test_contract(framework: str, check) -> None:
    check(_adapter(framework))


@pytest.mark.parametrize("framework", sorted(available_frameworks()))
@pytest.mark.parametrize("check", DATA_CONTRACT, ids=lambda c: c.__name__)
def test_data_contract(framework: str, check, digits) -> None:
    check(_adapter(framework), digits)


def test_unknown_framework_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown framework 'caffe'.*pytorch"):
        get_framework("caffe")


def test_missing_framework_names_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "mxnet", None)  # makes `import mxnet` fail
    with pytest.raises(MissingDependencyError, match="projects/mxnet"):
        get_framework("mxnet").load()
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingDependencyError, match=r"mlflow-dlaas\[torch\]"):
        get_framework("pytorch").load()


@pytest.mark.parametrize(("environ", "machine", "expected"), [
    ({}, "x86_64", 1),  # MXNet halves the processors on x86: 2 cores, 1 operator thread
    ({"OMP_NUM_THREADS": "2"}, "x86_64", 2),
    ({"MXNET_OMP_MAX_THREADS": "3", "OMP_NUM_THREADS": "2"}, "x86_64", 3),
    ({}, "aarch64", 2),
])
def test_mxnets_operator_threads_follow_its_engines_rule(
        environ: dict, machine: str, expected: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """What MXNet's operators run on, not what OpenMP's pool says (2 here in every case)."""
    from mlflow_dlaas.backends.mxnet import training as mxnet

    monkeypatch.setattr(mxnet.platform, "machine", lambda: machine)
    assert mxnet.operator_threads(environ, processors=2, openmp_max=2) == expected
