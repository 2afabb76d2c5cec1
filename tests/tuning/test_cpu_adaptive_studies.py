"""A study adapts to the CPU it runs on: points this machine would only emulate (bf16 without
native bf16 units) are skipped with the reason, in ``--dry-run``, the console, the parent run
and the report; a single run that asks for one is refused. Each CPU kind's branch runs here
with its detection assumed (``DLAAS_ASSUME_CPU_FLAGS``), whatever CPU the suite is on."""

from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner

from mlflow_dlaas.cli import cli
from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.errors import NotMeasurableHereError
from mlflow_dlaas.hardware import ASSUMED_FLAGS_VARIABLE, decision_flags
from mlflow_dlaas.inference.config import InferConfig
from tests.conftest import ROOT
from tests.tuning.studies import (
    needs_torch,  # noqa: F401 - the fixture, used by name
    study_cli,
    study_name,
    study_runs,
    write_spec,
)

AVX2 = "avx,avx2,fma,f16c"
AVX512_BF16 = AVX2 + ",avx512f,avx512_bf16"
AMX = AVX512_BF16 + ",amx_tile,amx_bf16,amx_int8"
PRECISION_EXAMPLE = ROOT / "examples/precision_study.yaml"


def _dry_run(spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: str):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ASSUMED_FLAGS_VARIABLE, flags)
    for name in [k for k in os.environ if k.startswith("MLFLOW_")]:
        monkeypatch.delenv(name)
    return CliRunner().invoke(cli, ["study", "--dry-run", str(spec)])


@pytest.mark.parametrize(("flags", "runs", "skipped"),
                         [(AVX2, 8, True), (AVX512_BF16, 12, False), (AMX, 12, False)],
                         ids=["avx2", "avx512_bf16", "amx"])
def test_the_precision_example_plans_what_each_cpu_can_measure(
        flags: str, runs: int, skipped: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    done = _dry_run(PRECISION_EXAMPLE, tmp_path, monkeypatch, flags)
    assert done.exit_code == 0, done.output
    assert f"= {runs} runs" in done.output
    lines = [line for line in done.output.splitlines() if line.startswith("skipped here: ")]
    if skipped:
        (line,) = lines
        assert line.startswith("skipped here: precision=bf16 (1 of 3 points): ")
        assert "no native bf16 (avx512_bf16 or amx_bf16)" in line
        assert "(the grid has 3 points, 1 skipped here)" in done.output
    else:
        assert not lines
    assert not list(tmp_path.iterdir())


def test_a_study_with_nothing_this_cpu_can_measure_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    only_bf16 = write_spec(tmp_path, name="only-bf16", sampler="grid",
                           search_space={"precision": ["bf16"]})
    fixed_bf16 = write_spec(tmp_path, name="fixed-bf16",
                            fixed={"model": "mlp", "precision": "bf16"})
    for spec, message in ((only_bf16, "every point holds precision=bf16"),
                          (fixed_bf16, "fixed: precision bf16: this CPU has no native bf16")):
        done = _dry_run(spec, tmp_path, monkeypatch, AVX2)
        assert done.exit_code == 2, done.output
        assert message in done.output
    for spec in (only_bf16, fixed_bf16):  # the same specs where bf16 is native
        assert _dry_run(spec, tmp_path, monkeypatch, AMX).exit_code == 0


@pytest.mark.parametrize("flags", [AVX2, AVX512_BF16, AMX], ids=["avx2", "avx512_bf16", "amx"])
def test_one_run_at_bf16_is_refused_only_where_it_would_be_emulated(
        flags: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ASSUMED_FLAGS_VARIABLE, flags)
    assert "avx2" in decision_flags()
    native = "bf16" in flags
    for make in (lambda: TrainConfig("pytorch", precision="bf16"),
                 lambda: InferConfig("openvino", precision="bf16")):
        if native:
            make()
        else:
            with pytest.raises(NotMeasurableHereError, match="no native bf16") as refused:
                make()
            assert refused.value.exit_code == 2
    TrainConfig("pytorch", precision="bf16", device="cuda")  # a GPU's bf16 is its own


@pytest.mark.slow
@pytest.mark.usefixtures("needs_torch")
def test_a_study_skips_the_points_this_cpu_cannot_measure_and_measures_the_rest(
        cli_path: str, tracking: str, tmp_path: Path) -> None:
    name = study_name()
    spec = write_spec(tmp_path, name=name, sampler="grid",
                      search_space={"precision": ["bf16", "fp32"]})
    out = study_cli(cli_path, spec, env={**os.environ, ASSUMED_FLAGS_VARIABLE: AVX2})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "trial 0 skipped, nothing run: precision bf16: this CPU has no native bf16" \
        in out.stderr
    assert "study done: 1 complete, 1 pruned, 0 failed; grid: 1 of 2 points measured" \
        in out.stderr
    assert "skipped on this machine, nothing run: trial 0 [precision=bf16]: " in out.stderr
    (parent,), children = study_runs(name)
    assert [c.data.params["precision"] for c in children] == ["fp32"]
    assert parent.data.tags["dlaas.skipped_here"].startswith("trial 0 [precision=bf16]: ")
    assert parent.data.tags["mlflow.note.content"].startswith(  # the description in the UI
        "Skipped unmeasured on the machine that ran this study: trial 0 [precision=bf16]: ")
    assert parent.data.metrics["trials_skipped_here"] == 1
    assert parent.data.metrics["grid_points_measured"] == 1
    assert parent.info.status == "FINISHED"
    study = optuna.load_study(study_name=name,
                              storage=f"sqlite:///{Path.cwd() / 'optuna.db'}")
    skipped = study.trials[0]
    assert skipped.state == optuna.trial.TrialState.PRUNED
    assert "no native bf16" in skipped.user_attrs["dlaas_skipped_here"]
    # a second run of the same study measures nothing again and skips nothing anew
    again = study_cli(cli_path, spec, env={**os.environ, ASSUMED_FLAGS_VARIABLE: AVX2})
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(study_runs(name)[1]) == 1
    # the report says what was skipped, and why
    report = CliRunner().invoke(cli, ["compare", "--study", name, "--include-disturbed", "--output",
                                      str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert f"Skipped unmeasured on the machine that ran study '{name}'" in text
    assert "trial 0 [precision=bf16]: precision bf16: this CPU has no native bf16" in text
