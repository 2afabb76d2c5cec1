"""Objectives and constraints as a user types them."""

from __future__ import annotations

import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.runs.goals import parse_bound, parse_goal


@pytest.mark.parametrize(("text", "metric", "direction"), [
    ("accuracy", "Headline/test_accuracy", "maximize"),
    ("p99_latency", "single_stream/latency_p99_ms", "minimize"),
    ("time_to_accuracy@0.98", "time_to_0.98_accuracy_seconds", "minimize"),
    ("max:offline/batch_8/throughput_samples_per_second",
     "offline/batch_8/throughput_samples_per_second", "maximize"),
    ("min:peak_memory", "Headline/peak_memory_megabytes", "minimize"),  # measured, else the tree's
    ("peak_rss", "Headline/peak_memory_megabytes", "minimize"),
])
def test_objectives(text: str, metric: str, direction: str) -> None:
    goal = parse_goal(text)
    assert (goal.metric, goal.direction) == (metric, direction)


@pytest.mark.parametrize(("text", "metric", "op", "value"), [
    ("accuracy>=0.98", "Headline/test_accuracy", ">=", 0.98),
    ("accuracy >= 98%", "Headline/test_accuracy", ">=", 0.98),
    ("peak_memory<=2GiB", "Headline/peak_memory_megabytes", "<=", 2 * 2**30 / 1e6),
    ("peak_memory<=500MB", "Headline/peak_memory_megabytes", "<=", 500.0),
    ("peak_memory<=500", "Headline/peak_memory_megabytes", "<=", 500.0),
    ("p99_latency<5", "single_stream/latency_p99_ms", "<", 5.0),
    ("p99_latency<=0.01s", "single_stream/latency_p99_ms", "<=", 10.0),
    ("train_time<=1500ms", "Headline/train_time_seconds", "<=", 1.5),
    ("run/proc_cpu_seconds<=3e2", "run/proc_cpu_seconds", "<=", 300.0),
])
def test_constraints(text: str, metric: str, op: str, value: float) -> None:
    bound = parse_bound(text)
    assert (bound.metric, bound.op) == (metric, op)
    assert bound.value == pytest.approx(value)


@pytest.mark.parametrize(("text", "says"), [
    ("fastest", "not understood"),
    ("time_to_accuracy@2", "not understood"),
])
def test_bad_objectives_name_the_valid_forms(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as error:
        parse_goal(text)
    assert "p99_latency" in str(error.value) and "min:METRIC" in str(error.value)


def test_an_alias_means_one_figure_everywhere() -> None:
    """``throughput`` once meant training samples/s in a study and offline inference in
    ``recommend``: it is refused with the two names that replace it."""
    for text in ("throughput", "min:throughput", "throughput>=5"):
        with pytest.raises(ConfigError, match="train_throughput .* inference_throughput"):
            (parse_bound if ">" in text else parse_goal)(text)
    assert parse_goal("train_throughput").metric == "Headline/train_samples_per_second"
    assert parse_goal("inference_throughput").direction == "maximize"


@pytest.mark.parametrize(("text", "says"), [
    ("accuracy=0.9", "NAME OP VALUE"),
    ("peak_memory<=2parsecs", "unit"),
    ("p99_latency<=2GiB", "unit"),
])
def test_bad_constraints_say_how_to_write_them(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_bound(text)


@pytest.mark.parametrize(("uri", "shown"), [
    ("http://alice:s3cret@host:5000", "http://alice:***@host:5000"),
    ("https://tok3n@host/mlflow", "https://***@host/mlflow"),
    ("https://host/mlflow?token=tok3n", "https://host/mlflow"),
    ("postgresql://bob:pw@db/mlflow", "postgresql://bob:***@db/mlflow"),
    ("sqlite:////tmp/mlflow.db", "sqlite:////tmp/mlflow.db"),
])
def test_uris_in_reports_and_logs_carry_no_credentials(uri: str, shown: str) -> None:
    from mlflow_dlaas.redaction import redact_uri

    assert redact_uri(uri) == shown


def test_recommend_help_lists_only_objectives_it_accepts() -> None:
    """`recommend --help` listed `throughput`, which it then refused ("names two figures")."""
    import re

    from click.testing import CliRunner

    from mlflow_dlaas.cli import cli
    from mlflow_dlaas.runs.goals import parse_goal

    shown = " ".join(CliRunner().invoke(cli, ["recommend", "--help"]).output.split())
    listed = re.search(r"an alias \(([^)]*)\)", shown).group(1).split(", ")
    assert "throughput" not in listed and len(listed) > 5
    for name in [*listed, "time_to_accuracy@0.98", "min:some/metric_ms"]:
        parse_goal(name)  # raises for a name it refuses
