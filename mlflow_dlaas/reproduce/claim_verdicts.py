"""Verdicts on measured runs: does a claim hold here?

A claim is split into parts; each part is decided by the report's comparisons
(:mod:`mlflow_dlaas.report.effect`: the ratio of two settings' runs with its 95 % interval,
matched over the other settings by :mod:`mlflow_dlaas.report.comparable`):

- a part **holds** when the comparisons it needs separate the settings in the claimed
  direction (the interval excludes 1, the ratio beyond ``MIN_EFFECT``);
- it **does not hold** when a comparison separates them in the opposite direction (or, for
  a ranking, another runtime or setting is separated ahead);
- it is **no meaningful difference** when the intervals lie within the minimum effect;
- it is **not separable** otherwise: too few runs, or an interval that spans the minimum
  effect.

A claim holds when every part holds, does not hold when any part does not, is no meaningful
difference when its open parts all are, and is not separable otherwise. The judges below
take the finished, valid runs of one host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import combinations

import pandas as pd
from scipy.stats import spearmanr

from mlflow_dlaas.report.effect import ALPHA, MIN_REPLICATES, compare_runs
from mlflow_dlaas.report.report import Workloads
from mlflow_dlaas.reproduce.claim_parts import (
    ACCURACY,
    COPIES_MEMORY,
    COPIES_THROUGHPUT,
    CPU_PERCENT,
    DEFAULTS,
    DOES_NOT_HOLD,
    ENERGY_1000,
    HOLDS,
    HYPER_PARAMETERS,
    LIBRARY_SETTINGS,
    MEMORY,
    NOT_SEPARABLE,
    P50,
    RUNTIME_SETTINGS,
    SATURATION_GAIN,
    SHORT,
    THROUGHPUT,
    TRAIN_TIME,
    ClaimVerdict,
    Comparison,
    Part,
    by_system,
    combine,
    compare,
    extremes,
    fold,
    levels_of,
    part_all,
    part_any,
)


def judge_presets(work: Workloads) -> ClaimVerdict:
    """Claim 1: one preset applied to every framework gives different accuracy and time (for
    every preset, some pair of frameworks separated on each)."""
    train = work.train
    if "params.preset" not in train or train.empty:
        return combine([])
    per_metric: dict[str, dict[str, list[Comparison]]] = {ACCURACY: {}, TRAIN_TIME: {}}
    for preset, rows in train.groupby("params.preset", sort=True):
        for (x, a), (y, b) in combinations(by_system(rows).items(), 2):
            for metric, groups in per_metric.items():
                groups.setdefault(str(preset), []).append(compare(
                    f"preset {preset}, {SHORT[metric]}: {x} vs {y}", metric, a, b))
    return combine([part_all("the same preset gives different accuracy across frameworks",
                              per_metric[ACCURACY]),
                    part_all("the same preset gives different training time across "
                              "frameworks", per_metric[TRAIN_TIME])])


def judge_hyperparameters(work: Workloads) -> ClaimVerdict:
    """Claim 2: batch size and learning rate change training time and accuracy, by different
    amounts per framework."""
    parts = []
    for metric in (TRAIN_TIME, ACCURACY):
        groups = {system: [c for column in HYPER_PARAMETERS
                           if (c := extremes(rows, column, metric, system)) is not None]
                  for system, rows in by_system(work.train).items()}
        parts.append(part_all(f"hyper-parameters change {SHORT[metric]}",
                               {k: v for k, v in groups.items() if v}))
    parts.append(_effect_differs(work.train))
    return combine(parts)


def _effect_differs(train: pd.DataFrame) -> Part:
    """The frameworks' train-time ratios (largest over smallest level of the first varied
    hyper-parameter, paired by seed) told apart by the rank test."""
    text = "the effect on train time differs per framework"
    column = next((c for c in HYPER_PARAMETERS if len(levels_of(train, c)) > 1), None)
    systems = by_system(train)
    if column is None or len(systems) < 2:
        return Part(text, NOT_SEPARABLE, "needs one hyper-parameter varied in two frameworks")
    ratios = {name: _paired_ratios(rows, column) for name, rows in systems.items()}
    comparisons = []
    for (x, (a, ids_a)), (y, (b, ids_b)) in combinations(ratios.items(), 2):
        comparisons.append(Comparison(
            f"train-time ratio of {column.removeprefix('params.')} "
            f"{levels_of(train, column)[-1]} vs {levels_of(train, column)[0]}: {x} vs {y}",
            "ratio", tuple(a), tuple(b), (*ids_a, *ids_b),
            compare_runs(a, b, lower_is_better=True)))
    return part_any(text, comparisons)


def _paired_ratios(rows: pd.DataFrame, column: str) -> tuple[list[float], list[str]]:
    """Per seed: train time at the largest level over the smallest (replicate pairs)."""
    levels = levels_of(rows, column)
    if len(levels) < 2 or "params.seed" not in rows:
        return [], []
    values = rows[column].astype(str)
    top = rows[values == levels[-1]].groupby("params.seed")
    low = rows[values == levels[0]].groupby("params.seed")
    tops = {s: g for s, g in top}
    ratios, ids = [], []
    for seed, group in low:
        if seed not in tops:
            continue
        a, b = tops[seed], group
        below = pd.to_numeric(b[TRAIN_TIME], errors="coerce").median()
        above = pd.to_numeric(a[TRAIN_TIME], errors="coerce").median()
        if below and not math.isnan(below) and not math.isnan(above):
            ratios.append(float(above / below))
            ids += [*map(str, a["run_id"]), *map(str, b["run_id"])]
    return ratios, ids


def judge_libraries(work: Workloads) -> ClaimVerdict:
    """Claim 3: configuring the parallel libraries improves training time, and the best
    setting differs per framework."""
    per_system: dict[str, list[Comparison]] = {}
    for system, rows in by_system(work.train).items():
        for column in (c for c in LIBRARY_SETTINGS if c in rows):
            values = rows[column].fillna("").astype(str)
            base = rows[values.isin(DEFAULTS)]
            for value in sorted(set(values) - set(DEFAULTS)):
                per_system.setdefault(system, []).append(compare(
                    f"{system}, train time: {column.removeprefix('params.')}={value} vs "
                    "default", TRAIN_TIME, rows[values == value], base))
    every = [c for found in per_system.values() for c in found]
    improves = part_any("a library setting improves training time", every, want=-1)
    return combine([improves, _best_differs(per_system)])


def _best_differs(per_system: dict[str, list[Comparison]]) -> Part:
    """Holds when frameworks' best settings (separated from the default, lowest ratio) differ,
    or one's best is separated as hurting another; does not hold when all share one best."""
    text = "the best library setting differs per framework"
    every = tuple(c for found in per_system.values() for c in found)
    if len(per_system) < 2:
        return Part(text, NOT_SEPARABLE, "needs library settings measured in two frameworks",
                    every)
    best = {}
    for system, found in per_system.items():
        helped = [c for c in found if c.direction == -1]
        if helped:
            best[system] = _setting(min(helped, key=lambda c: c.ratio))
    listed = "; ".join(f"{s}: {w}" for s, w in best.items())
    if len(set(best.values())) > 1:
        return Part(text, HOLDS, f"best: {listed}", every)
    for system, setting in best.items():
        hurt = [c for other, found in per_system.items() if other != system
                for c in found if _setting(c) == setting and c.direction == 1]
        if hurt:
            return Part(text, HOLDS, f"best in {system}: {setting}; {hurt[0].what}, "
                        f"{fold(hurt[0])}", every)
    if best and len(best) == len(per_system):
        return Part(text, DOES_NOT_HOLD, f"the same best everywhere: {listed}", every)
    return Part(text, NOT_SEPARABLE, "no framework's best setting is told apart from the "
                f"others' ({listed or 'no setting was separated from the default'})", every)


def _setting(c: Comparison) -> str:
    """``allocator=jemalloc`` from a library comparison's description."""
    return c.what.split(": ", 1)[1].removesuffix(" vs default")


def judge_resources(work: Workloads) -> ClaimVerdict:
    """Claim 4: resource use differs per framework and grows with the batch size."""
    differ = []
    train = work.train
    column = "params.batch_size"
    for level in levels_of(train, column) or [None]:
        rows = train if level is None else train[train[column].astype(str) == level]
        where = "" if level is None else f" at batch_size {level}"
        for (x, a), (y, b) in combinations(by_system(rows).items(), 2):
            for metric in (MEMORY, CPU_PERCENT):
                differ.append(compare(f"{SHORT[metric]}{where}: {x} vs {y}", metric, a, b))
    grows = {system: [c] for system, rows in by_system(train).items()
             if (c := extremes(rows, column, MEMORY, system)) is not None}
    return combine([part_any("resource use differs per framework", differ),
                    part_all("peak memory grows with the batch size", grows, want=1)])


# --- inference claims ----------------------------------------------------------------------

def judge_runtime_settings(work: Workloads) -> ClaimVerdict:
    """Claim 5: runtime settings change latency, throughput and memory."""
    rows = work.inference
    parts = []
    for setting in RUNTIME_SETTINGS:
        if len(levels_of(rows, setting)) < 2:
            continue
        groups = {}
        for system, found in by_system(rows).items():
            held = _others_at_first(found, setting)
            # peak memory is the run's: the same on each batch size's row of one run
            metrics = (P50, THROUGHPUT) if setting == "batch_size" else (P50, THROUGHPUT, MEMORY)
            groups[system] = [c for metric in metrics
                              if (c := extremes(held, setting, metric, system)) is not None]
        name = setting.removeprefix("params.")
        parts.append(part_all(f"{name} changes latency, throughput or memory", groups))
    return combine(parts)


def _others_at_first(rows: pd.DataFrame, setting: str) -> pd.DataFrame:
    """The rows whose other runtime settings are at their first level (one thing varies)."""
    for other in RUNTIME_SETTINGS:
        levels = levels_of(rows, other)
        if other != setting and len(levels) > 1:
            rows = rows[rows[other].astype(str) == levels[0]]
    return rows


def judge_runtimes(work: Workloads) -> ClaimVerdict:
    """Claim 6: ONNX Runtime fastest at small batches; throughput saturates around batch
    32-64; OpenVINO best on CPU."""
    rows = _others_at_first(work.inference, "batch_size")
    batches = [int(float(b)) for b in levels_of(rows, "batch_size")]
    parts = []
    if batches:
        small = rows[rows["batch_size"] == batches[0]]
        large = rows[rows["batch_size"] == batches[-1]]
        parts.append(_leader(f"ONNX Runtime has the lowest p50 at batch {batches[0]}",
                             "onnxruntime", small, P50, want=-1))
        parts.append(_saturates(rows, batches))
        parts.append(_leader(f"OpenVINO has the highest throughput on CPU at batch "
                             f"{batches[-1]}", "openvino", large, THROUGHPUT, want=1))
    return combine(parts)


def _leader(text: str, leader: str, rows: pd.DataFrame, metric: str, want: int) -> Part:
    """``leader`` separated ahead of every other runtime on ``metric``."""
    systems = by_system(rows)
    if leader not in systems or len(systems) < 2:
        return Part(text, NOT_SEPARABLE, f"needs {leader} and another runtime measured")
    found = [compare(f"{SHORT[metric]}: {leader} vs {other}", metric, systems[leader], runs)
             for other, runs in systems.items() if other != leader]
    ahead = [c for c in found if c.direction == -want]
    if ahead:
        return Part(text, DOES_NOT_HOLD, f"{ahead[0].what}, behind: {fold(ahead[0])}",
                    tuple(found))
    if all(c.direction == want for c in found):
        return Part(text, HOLDS, "; ".join(f"{c.what} {fold(c)}" for c in found), tuple(found))
    open_ = next(c for c in found if c.direction != want)
    return Part(text, NOT_SEPARABLE, f"{open_.what}: {open_.outcome()}", tuple(found))


def _saturates(rows: pd.DataFrame, batches: list[int]) -> Part:
    """Per runtime: throughput grows up to batch 32 (separated), and by less than 10 % from
    batch 64 to the largest."""
    text = "throughput saturates around batch 32-64"
    if not {32, 64} <= set(batches) or batches[0] >= 32 or batches[-1] <= 64:
        return Part(text, NOT_SEPARABLE, "needs batch sizes below 32, 32, 64 and above 64")
    per, found = [], []
    for system, runs in by_system(rows).items():
        at = {b: runs[runs["batch_size"] == b] for b in (batches[0], 32, 64, batches[-1])}
        grows = compare(f"{system}, {SHORT[THROUGHPUT]}: batch 32 vs {batches[0]}",
                        THROUGHPUT, at[32], at[batches[0]])
        beyond = compare(f"{system}, {SHORT[THROUGHPUT]}: batch {batches[-1]} vs 64",
                         THROUGHPUT, at[batches[-1]], at[64])
        found += [grows, beyond]
        if beyond.direction == 1 and beyond.ratio >= SATURATION_GAIN:
            per.append((DOES_NOT_HOLD, f"{system} still grows past 64: {fold(beyond)}"))
        elif grows.direction == 1 and beyond.ratio < SATURATION_GAIN:
            per.append((HOLDS, f"{system}: up to 32 {fold(grows)}, past 64 "
                               f"{beyond.ratio:.2f}x"))
        else:
            per.append((NOT_SEPARABLE, f"{system}: up to 32 {grows.outcome()}, past 64 "
                                       f"{beyond.ratio:.2f}x"))
    for outcome in (DOES_NOT_HOLD, NOT_SEPARABLE, HOLDS):
        hits = [why for got, why in per if got == outcome]
        if hits:
            return Part(text, outcome, "; ".join(hits), tuple(found))
    return Part(text, NOT_SEPARABLE, "no two settings have counted runs to compare")


def judge_copies(work: Workloads) -> ClaimVerdict:
    """Claim 7: more co-located copies serve more in all and take more memory (per runtime
    and copy mode, the most copies against the fewest)."""
    runs = work.all[work.all["entry"] == "infer"] if len(work.all) else work.all
    throughput, memory = {}, {}
    for system, rows in by_system(runs).items():
        modes = rows.groupby(rows["params.ensemble_mode"].astype(str)) \
            if "params.ensemble_mode" in rows else [("", rows)]
        for mode, group in modes:
            name = f"{system} {mode}".strip()
            for metric, found in ((COPIES_THROUGHPUT, throughput), (COPIES_MEMORY, memory)):
                c = extremes(group, "params.ensemble_size", metric, name)
                if c is not None:
                    found[name] = [c]
    return combine([part_all("more copies serve more samples per second", throughput, want=1),
                    part_all("more copies take more memory", memory, want=1)])


def judge_energy(work: Workloads) -> ClaimVerdict:
    """Claim 8: energy per prediction falls as throughput rises (Spearman's rank correlation
    over every run and batch size, p below ALPHA)."""
    rows = work.inference
    text = "energy per prediction falls as throughput rises"
    if ENERGY_1000 not in rows or THROUGHPUT not in rows:
        return combine([Part(text, NOT_SEPARABLE, "no run logged energy")])
    both = rows.assign(**{k: pd.to_numeric(rows[k], errors="coerce")
                          for k in (ENERGY_1000, THROUGHPUT)})
    both = both.dropna(subset=[ENERGY_1000, THROUGHPUT])
    if len(both) < 2 * MIN_REPLICATES:
        return combine([Part(text, NOT_SEPARABLE, f"{len(both)} (run, batch size) rows with "
                             f"energy; {2 * MIN_REPLICATES} needed")])
    rho, p = spearmanr(both[THROUGHPUT], both[ENERGY_1000])
    rho, p = float(rho), float(p)
    said = f"Spearman rho = {rho:.2f}, p = {p:.2g}, {len(both)} rows"
    comparison = Comparison(f"{SHORT[ENERGY_1000]} against {SHORT[THROUGHPUT]}", ENERGY_1000,
                            tuple(both[ENERGY_1000]), tuple(both[THROUGHPUT]),
                            tuple(map(str, both["run_id"].unique())), said=said,
                            correlated=p < ALPHA)
    outcome = NOT_SEPARABLE if p >= ALPHA else HOLDS if rho < 0 else DOES_NOT_HOLD
    return combine([Part(text, outcome, said, (comparison,))])


#: claim number -> its judge
JUDGES: dict[int, Callable[[Workloads], ClaimVerdict]] = {
    1: judge_presets, 2: judge_hyperparameters, 3: judge_libraries, 4: judge_resources,
    5: judge_runtime_settings, 6: judge_runtimes, 7: judge_copies, 8: judge_energy,
}
