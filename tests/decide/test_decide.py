"""``mlflow-dlaas decide`` on an experiment of plain ``mlflow run`` runs: it measures more of
only the configurations behind the open answer, in interleaved rounds in a recorded order,
and the next report judges that answer on those rounds."""

from __future__ import annotations

import mlflow
import pytest

from tests.conftest import run_as_user, user_folder

pytestmark = pytest.mark.slow
TRAIN = ("mlflow run projects/pytorch -e train --env-manager local --experiment-name open "
         "-P epochs=1 -P max_steps=8 -P warmup_steps=1")


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """Two runs of each of two thread settings (too few to decide), then one minute of
    decide: what a user would type, in their own folder."""
    folder = user_folder(tmp_path_factory, "decide")
    for threads in (1, 2):
        for seed in (0, 1):
            done = run_as_user(f"{TRAIN} -P intra_op_threads={threads} -P seed={seed}", folder)
            assert done.returncode == 0, done.stderr[-3000:]
    # runs on this shared machine may be disturbed: the test's point is the rounds, not them
    dry = run_as_user("mlflow-dlaas decide --experiment open --dry-run --include-disturbed",
                      folder)
    result = run_as_user("mlflow-dlaas decide --experiment open --budget 1m --seed 7 "
                         "--include-disturbed", folder)
    return folder, dry, result


def test_decide_measures_only_the_open_answers_configurations_in_ordered_rounds(
        decided: tuple) -> None:
    folder, dry, result = decided
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "decide: 1 open of" in dry.stderr and "lowest train_time" in dry.stdout
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    client = mlflow.MlflowClient(tracking_uri=result.store)
    runs = client.search_runs([client.get_experiment_by_name("open").experiment_id])
    assert not [r for r in runs if r.info.status == "RUNNING"]
    (session,) = [r for r in runs if r.data.tags.get("dlaas.role") == "decide"]
    assert session.info.status == "FINISHED" and session.data.params["seed"] == "7"
    measured = [r for r in runs if r.data.tags.get("dlaas.decide_session") == session.info.run_id]
    rounds: dict[str, list] = {}
    for run in measured:
        rounds.setdefault(run.data.tags["dlaas.decide_round"], []).append(run)
    assert rounds, result.stderr[-3000:]
    for number, pair in rounds.items():  # each round runs both configurations once
        assert sorted(r.data.params["intra_op_threads"] for r in pair) == ["1", "2"]
        assert {r.data.params["seed"] for r in pair} == {str(10_000 + int(number))}
        assert sorted(r.data.tags["dlaas.decide_order"].split(" of")[0] for r in pair) == \
            ["1", "2"]
    ordered = sorted(rounds, key=int)
    for earlier, later in zip(ordered, ordered[1:], strict=False):  # one after another
        assert min(r.info.start_time for r in rounds[later]) >= \
            max(r.info.end_time for r in rounds[earlier])
    assert f"decide run: {session.info.run_id} ({len(rounds)} rounds)" in result.stdout
    answer = next(line for line in result.stdout.splitlines() if "lowest train_time" in line)
    assert ("about" in answer and "more rounds" in answer) or "ahead of" in answer or \
        "no meaningful difference" in answer


def test_the_next_report_judges_the_answer_on_decides_rounds(decided: tuple) -> None:
    folder, _, _ = decided
    done = run_as_user("mlflow-dlaas recommend --experiment open --objective train_time "
                       "--include-disturbed", folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rounds of decide (a look after each, level" in done.stdout or \
        "rounds of decide; its rule's first look is at round 8" in done.stdout


def test_a_budget_that_can_never_decide_is_refused(decided: tuple) -> None:
    folder, _, _ = decided
    done = run_as_user("mlflow-dlaas decide --experiment open --budget 3", folder)
    assert done.returncode == 2
    assert "3 rounds can never decide" in done.stderr and "at least 6" in done.stderr
