"""Inference plots: throughput and p99 against batch size and threads, latency CDFs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from mlflow_dlaas.report.aggregate import configuration_ids
from mlflow_dlaas.report.plots import Plot, colours, draw, log_scale, missing, whole_number_ticks
from mlflow_dlaas.runs.schema import (
    INFERENCE_THROUGHPUT,
    P50_LATENCY,
    P99_LATENCY,
    QUERY_COUNT,
    SERVER_LOAD_P99,
    SERVER_LOAD_VALID,
    SERVER_TARGET_QPS,
)

THROUGHPUT = f"metrics.{INFERENCE_THROUGHPUT}"
P99 = f"metrics.{P99_LATENCY}"
P50 = f"metrics.{P50_LATENCY}"
THREADS = ("params.in_force_intra_op_threads", "params.intra_op_threads")
MAX_LINES = 8
STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))
CDF_ARTIFACT = "latency/cdf.csv"
SERVER_QPS = f"metrics.{SERVER_TARGET_QPS}"
LOAD_CURVE = SERVER_LOAD_P99


def versus_batch_size(rows: pd.DataFrame) -> Plot:
    """Offline throughput and single-stream p99 per configuration, against batch size."""
    name, title = "inference_vs_batch_size", "Throughput and p99 latency vs batch size"
    if rows.empty or (THROUGHPUT not in rows and P99 not in rows):
        return missing(name, title, "no finished inference run logged per-batch-size "
                       "throughput or latency")
    configs = _config_labels(rows)
    rows = rows.assign(config=configs)
    medians = rows.groupby(["config", "system", "batch_size"]).median(numeric_only=True)
    medians = medians.reset_index()
    by_throughput = THROUGHPUT in medians
    ranking = (medians.groupby("config")[THROUGHPUT].max() if by_throughput
               else medians.groupby("config")[P99].min())
    keep = ranking.sort_values(ascending=not by_throughput).index[:MAX_LINES]
    palette = colours(medians["system"])

    def paint(figure: Figure) -> None:
        for i, (metric, label) in enumerate(((THROUGHPUT, "throughput (samples/s)"),
                                             (P99, "single-stream p99 (ms)"))):
            ax = figure.add_subplot(1, 2, i + 1)
            if metric in medians:
                seen: dict[str, int] = {}
                for config in keep:  # one colour per system, one line style per setting
                    line = medians[medians["config"] == config].sort_values("batch_size")
                    system = line["system"].iloc[0]
                    style = STYLES[seen.setdefault(system, 0) % len(STYLES)]
                    seen[system] += 1
                    ax.plot(line["batch_size"], line[metric], marker=style[1],
                            linestyle=style[0], label=config, color=palette[system])
            if metric in medians and spans_decades(medians[metric]):
                log_scale(ax, "y")
                label += ", log scale"
            ax.set_xscale("log", base=2)
            batches = sorted(medians["batch_size"].unique())
            ax.set_xticks(batches, [str(b) for b in batches])
            ax.set_xlabel("batch size")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        figure.axes[0].legend(fontsize=7)

    best = "highest throughput" if by_throughput else "lowest single-stream p99"
    return draw(name, title, f"Median over replicates; the {min(len(ranking), MAX_LINES)} "
                f"configurations with the {best}.", paint, size=(10, 4.2))


def versus_threads(rows: pd.DataFrame) -> Plot:
    """Throughput (largest batch) and p99 (smallest batch) against intra-op threads."""
    name, title = "inference_vs_threads", "Throughput and p99 latency vs threads"
    threads = next((c for c in THREADS if c in rows
                    and (rows.groupby("system")[c].nunique() > 1).any()), None)
    if rows.empty or threads is None:
        return missing(name, title, "no runtime was measured at more than one "
                       "intra_op_threads setting")
    data = rows.assign(threads=pd.to_numeric(rows[threads], errors="coerce")).dropna(
        subset=["threads"])
    palette = colours(data["system"])

    def paint(figure: Figure) -> None:
        for i, (metric, label, pick) in enumerate((
                (THROUGHPUT, "throughput at the largest batch (samples/s)", "max"),
                (P99, "single-stream p99 at the smallest batch (ms)", "min"))):
            ax = figure.add_subplot(1, 2, i + 1)
            if metric in data:
                for system, group in data.groupby("system"):
                    if group["threads"].nunique() < 2:
                        continue
                    batch = getattr(group["batch_size"], pick)()
                    line = (group[group["batch_size"] == batch].groupby("threads")[metric]
                            .median().dropna())
                    ax.plot(line.index, line.values, marker="o", color=palette[system],
                            label=f"{system} (batch {batch})")
            whole_number_ticks(ax, "x")
            ax.set_xlabel("intra-op threads")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)

    return draw(name, title, "Median over runs at each thread count.", paint, size=(10, 4.2))


def latency_cdfs(client: MlflowClient, rows: pd.DataFrame) -> Plot:
    """Single-stream latency CDF at the smallest batch size, best configuration per runtime."""
    name, title = "latency_cdf", "Latency CDFs"
    if rows.empty or P50 not in rows:
        return missing(name, title, "no finished inference run measured single-stream latency")
    smallest = rows[rows["batch_size"] == rows["batch_size"].min()].dropna(subset=[P50])
    best = smallest.sort_values(P50).groupby("system").head(1)
    curves = {}
    for _, run in best.iterrows():
        cdf = _cdf(client, run["run_id"])
        if cdf is not None:
            part = cdf[(cdf["scenario"] == "single_stream")
                       & (cdf["batch_size"] == run["batch_size"])]
            if len(part):
                curves[run["system"]] = part.sort_values("percentile")
    if not curves:
        return missing(name, title, f"no inference run has the {CDF_ARTIFACT} artifact "
                       "(runs made before it was logged)")
    palette = colours(list(curves))
    batch = int(smallest["batch_size"].iloc[0])

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        for system, part in curves.items():
            queries = (f" ({int(part[QUERY_COUNT].iloc[0]):,} queries)"
                       if QUERY_COUNT in part else "")
            ax.plot(part["latency_ms"], part["percentile"] / 100, color=palette[system],
                    label=system + queries)
        log_scale(ax, "x")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylabel("fraction of queries")
        ax.grid(alpha=0.3, which="both")
        ax.legend()

    return draw(name, title, f"Single-stream, batch {batch}; the lowest-p50 run of each "
                "runtime.", paint)


def spans_decades(values: pd.Series, ratio: float = 10.0) -> bool:
    """Whether positive ``values`` span at least ``ratio`` (then a log axis reads better)."""
    positive = pd.to_numeric(values, errors="coerce")
    positive = positive[positive > 0]
    return len(positive) > 1 and positive.max() / positive.min() >= ratio


def versus_offered_load(client: MlflowClient, rows: pd.DataFrame) -> Plot:
    """Server p99 latency against offered load: every rate a run measured (its target and
    each probe of the rate search, history ``server_load/latency_p99_ms``, step = QPS)."""
    name, title = "server_latency_vs_load", "Server p99 latency vs offered load"
    served = (rows.dropna(subset=[SERVER_QPS]).drop_duplicates("run_id")
              if SERVER_QPS in rows else rows.iloc[:0])
    if served.empty:
        return missing(name, title, "no finished inference run measured the server scenario")
    served = served.assign(config=_config_labels(served))
    curves: dict[str, pd.DataFrame] = {}
    for _, run in served.iterrows():
        try:
            history = client.get_metric_history(run["run_id"], LOAD_CURVE)
        except MlflowException:
            continue
        if history and run["config"] not in curves:
            valid = _valid_by_step(client, run["run_id"])
            curves[run["config"]] = pd.DataFrame(
                [(h.step, h.value, valid.get(h.step, 1.0)) for h in history],
                columns=["qps", "p99", "valid"]
            ).groupby("qps").agg({"p99": "median", "valid": "min"}).reset_index()
        if len(curves) == MAX_LINES:
            break
    if not curves:
        return missing(name, title, f"no server run logged {LOAD_CURVE} (runs made before "
                       "every probe was logged)")
    bounds = pd.to_numeric(served.get("params.server_p99_bound_ms"), errors="coerce")
    bound = float(bounds.max()) if bounds is not None and bounds.max() > 0 else None
    systems = served.drop_duplicates("config").set_index("config")["system"]
    palette = colours(systems)
    every = pd.concat(curves.values())

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        seen: dict[str, int] = {}
        for config, curve in curves.items():
            system = systems[config]
            style = STYLES[seen.setdefault(system, 0) % len(STYLES)]
            seen[system] += 1
            ax.plot(curve["qps"], curve["p99"], marker=style[1], linestyle=style[0],
                    color=palette[system], label=config)
            invalid = curve[curve["valid"] < 1]
            ax.plot(invalid["qps"], invalid["p99"], marker=style[1], linestyle="none",
                    markersize=11, markerfacecolor="white", markeredgecolor=palette[system])
        if (every["valid"] < 1).any():
            ax.plot([], [], marker="o", linestyle="none", markerfacecolor="white",
                    markeredgecolor="grey", label="LoadGen INVALID at that rate")
        if bound is not None:
            ax.axhline(bound, color="grey", linestyle=":", label=f"p99 bound {bound:g} ms")
        log_x, log_y = spans_decades(every["qps"]), spans_decades(every["p99"])
        if log_x:
            log_scale(ax, "x")
        if log_y:
            log_scale(ax, "y")
        ax.set_xlabel("offered load (queries/s" + (", log scale)" if log_x else ")"))
        ax.set_ylabel("p99 latency (ms" + (", log scale)" if log_y else ")"))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)

    return draw(name, title, "Latency from arrival to completion (queueing included) at "
                "each offered Poisson rate a run measured; a hollow marker is a rate LoadGen "
                "judged INVALID (the run's server/rate_search.json says why).", paint)


def _valid_by_step(client: MlflowClient, run_id: str) -> dict[int, float]:
    """LoadGen's verdict (1 VALID, 0 INVALID) at each offered rate; empty for runs made
    before it was logged (their points read VALID)."""
    try:
        return {h.step: h.value for h in client.get_metric_history(run_id, SERVER_LOAD_VALID)}
    except MlflowException:
        return {}


def _cdf(client: MlflowClient, run_id: str) -> pd.DataFrame | None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run_id, CDF_ARTIFACT, tmp)
        except (MlflowException, OSError):
            return None
        return pd.read_csv(Path(path))


def _config_labels(rows: pd.DataFrame) -> pd.Series:
    """``system`` plus the settings that vary among that system's runs."""
    without_batch = rows.drop(columns=["batch_size"])
    ids = configuration_ids(without_batch)
    labels = pd.Series(rows["system"].astype(str), index=rows.index)
    settings = [c for c in rows.columns if c.startswith("params.")
                and not c.startswith("params.in_force_") and c != "params.seed"]
    for system, group in rows.groupby("system"):
        varying = [c for c in settings if group[c].nunique(dropna=False) > 1]
        for index in group.index:
            extra = ", ".join(f"{c.removeprefix('params.')}={group.at[index, c]}"
                              for c in varying[:3])
            labels[index] = f"{system} ({extra})" if extra else str(system)
    clash = ids.groupby(labels).transform("nunique") > 1
    return labels.where(~clash, labels + " " + ids)

