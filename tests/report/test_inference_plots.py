"""The server load curve and log axes of the inference plots, from real MLflow runs."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest
from matplotlib.figure import Figure

from mlflow_dlaas.report import inference_plots


def _server_run(system: str, points: list[tuple[int, float]]) -> str:
    with mlflow.start_run() as run:
        mlflow.log_param("server_p99_bound_ms", 50)
        mlflow.log_metric("server/target_qps", points[0][0])
        for qps, p99 in points:
            mlflow.log_metric("server_load/latency_p99_ms", p99, step=qps)
    return run.info.run_id


def test_every_probe_is_a_point_and_decades_get_log_axes(tracking: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _server_run("onnxruntime", [(100, 1.0), (200, 1.5), (400, 3.0), (800, 400.0)])
    slow = _server_run("openvino", [(50, 2.0), (100, 80.0)])
    rows = pd.DataFrame({"run_id": [fast, fast, slow], "system": ["onnxruntime",
                                                                   "onnxruntime", "openvino"],
                         "batch_size": [1, 8, 1], "metrics.server/target_qps": [100, 100, 50],
                         "params.server_p99_bound_ms": ["50", "50", "50"]})
    drawn: dict[str, Figure] = {}

    def keep(name, title, caption, paint, size=(7.0, 4.2)):
        drawn[name] = Figure()
        paint(drawn[name])
        return inference_plots.Plot(name, title, caption, png=b"")

    monkeypatch.setattr(inference_plots, "draw", keep)
    plot = inference_plots.versus_offered_load(mlflow.MlflowClient(), rows)
    assert plot.missing is None
    (ax,) = drawn["server_latency_vs_load"].axes
    lines = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert lines["onnxruntime"] == [100, 200, 400, 800] and lines["openvino"] == [50, 100]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"  # 1 ms to 400 ms, 50 to 800
    assert "p99 bound 50 ms" in lines


def test_no_server_run_says_so() -> None:
    plot = inference_plots.versus_offered_load(None, pd.DataFrame({"run_id": [], "system": []}))
    assert plot.missing == "no finished inference run measured the server scenario"


def test_spans_decades() -> None:
    assert inference_plots.spans_decades(pd.Series([0.5, 5.0]))
    assert not inference_plots.spans_decades(pd.Series([1.0, 9.0, 0.0]))


def test_each_latency_cdf_says_how_many_queries_it_rests_on(tracking: str, tmp_path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    cdf = tmp_path / "latency" / "cdf.csv"
    cdf.parent.mkdir()
    pd.DataFrame({"scenario": "single_stream", "batch_size": 1, "percentile": range(101),
                  "latency_ms": [0.1 * (1 + p) for p in range(101)],
                  "query_count": 1234}).to_csv(cdf, index=False)
    with mlflow.start_run() as run:
        mlflow.log_artifacts(str(cdf.parent), "latency")
    rows = pd.DataFrame({"run_id": [run.info.run_id], "system": ["onnxruntime"],
                         "batch_size": [1], "metrics.single_stream/latency_p50_ms": [5.0]})
    drawn: dict[str, Figure] = {}

    def keep(name, title, caption, paint, size=(7.0, 4.2)):
        drawn[name] = Figure()
        paint(drawn[name])
        return inference_plots.Plot(name, title, caption, png=b"")

    monkeypatch.setattr(inference_plots, "draw", keep)
    inference_plots.latency_cdfs(mlflow.MlflowClient(), rows)
    (ax,) = drawn["latency_cdf"].axes
    assert [line.get_label() for line in ax.get_lines()] == ["onnxruntime (1,234 queries)"]
