"""Verdicts on synthetic run tables: holds, does not hold, not separable, not measurable."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.report import Workloads
from mlflow_dlaas.reproduce.claim_parts import (
    DOES_NOT_HOLD,
    HOLDS,
    NO_MEANINGFUL_DIFFERENCE,
    NOT_MEASURABLE,
    NOT_SEPARABLE,
)
from mlflow_dlaas.reproduce.claim_verdicts import (
    judge_copies,
    judge_energy,
    judge_hyperparameters,
    judge_libraries,
    judge_presets,
    judge_resources,
    judge_runtimes,
)
from mlflow_dlaas.reproduce.claims import CLAIMS, parse_claims
from mlflow_dlaas.reproduce.runner import plan_steps

_ids = itertools.count()


def train_run(system: str, *, time: float, accuracy: float = 0.9, memory: float = 100.0,
              seed: int = 0, **params: object) -> dict[str, object]:
    return {"run_id": f"r{next(_ids)}", "status": "FINISHED", "entry": "train",
            "system": system, "host": "h", "params.seed": str(seed),
            **{f"params.{k}": str(v) for k, v in params.items()},
            "metrics.Headline/train_time_seconds": time, "metrics.Headline/test_accuracy": accuracy,
            "metrics.Headline/peak_memory_megabytes": memory,
            "metrics.train/mean_proc_cpu_percent": 100.0}


def infer_run(system: str, *, p50: dict[int, float], throughput: dict[int, float],
              energy: float | None = None, **params: object) -> dict[str, object]:
    row: dict[str, object] = {"run_id": f"r{next(_ids)}", "status": "FINISHED",
                              "entry": "infer", "system": system, "host": "h",
                              **{f"params.{k}": str(v) for k, v in params.items()}}
    for batch in p50:
        row[f"metrics.single_stream/batch_{batch}/latency_p50_ms"] = p50[batch]
        row[f"metrics.offline/batch_{batch}/throughput_samples_per_second"] = throughput[batch]
    if energy is not None:
        row["metrics.offline/cpu_package0_energy_joules"] = energy
        row["metrics.offline/samples_total"] = 1000.0
    return row


def work(rows: list[dict[str, object]]) -> Workloads:
    return Workloads.of(pd.DataFrame(rows))


def jitter(i: int) -> float:
    return 1 + 0.01 * i


def hyper_runs(effect: dict[str, float], n: int = 4) -> list[dict[str, object]]:
    """Per framework, n replicates at batch 16 and 256; train time at 256 is ``effect`` times
    that at 16, accuracy lower at 256."""
    rows = []
    for system, ratio in effect.items():
        for i in range(n):
            rows.append(train_run(system, time=10 * jitter(i), accuracy=0.9 + 0.001 * i,
                                  memory=1e8 * jitter(i), seed=i, batch_size=16))
            rows.append(train_run(system, time=10 * ratio * jitter(i), accuracy=0.7 + 0.001 * i,
                                  memory=3e8 * jitter(i), seed=i, batch_size=256))
    return rows


def test_hyperparameters_hold_when_every_framework_is_separated_and_effects_differ() -> None:
    verdict = judge_hyperparameters(work(hyper_runs({"pytorch": 0.5, "tensorflow": 0.2})))
    assert verdict.verdict == HOLDS, verdict.reason
    assert len(verdict.parts) == 3 and all(p.outcome == HOLDS for p in verdict.parts)
    assert len(verdict.run_ids) == 16


def test_hyperparameters_not_separable_with_three_runs_each() -> None:
    verdict = judge_hyperparameters(work(hyper_runs({"pytorch": 0.5, "tensorflow": 0.2}, n=3)))
    assert verdict.verdict == NOT_SEPARABLE
    assert "too few runs (3 vs 3: 20 arrangements, so no outcome can reach p < " \
        "0.05" in verdict.reason


def test_hyperparameters_no_meaningful_difference_when_the_effect_is_the_same() -> None:
    verdict = judge_hyperparameters(work(hyper_runs({"pytorch": 0.5, "tensorflow": 0.5})))
    assert verdict.verdict == NO_MEANINGFUL_DIFFERENCE
    effect = verdict.parts[2]
    assert effect.outcome == NO_MEANINGFUL_DIFFERENCE and "within ±5%" in effect.why


def test_resources_do_not_hold_when_memory_falls_with_the_batch_size() -> None:
    rows = []
    for i in range(4):
        for system, base in (("pytorch", 1e8), ("tensorflow", 4e8)):
            rows.append(train_run(system, time=1, memory=base * 2 * jitter(i), batch_size=16))
            rows.append(train_run(system, time=1, memory=base * jitter(i), batch_size=256))
    verdict = judge_resources(work(rows))
    assert verdict.verdict == DOES_NOT_HOLD
    assert verdict.parts[0].outcome == HOLDS  # the frameworks differ
    assert "the other way" in verdict.parts[1].why


def test_presets_hold_when_frameworks_differ_under_each_preset() -> None:
    rows = [train_run(system, time=t * jitter(i), accuracy=a + 0.001 * i, preset=preset)
            for i in range(4)
            for preset in ("caffe_lenet", "tensorflow_mnist")
            for system, t, a in (("pytorch", 5, 0.9), ("tensorflow", 9, 0.6))]
    assert judge_presets(work(rows)).verdict == HOLDS


def test_libraries_hold_when_the_best_setting_differs() -> None:
    rows = []
    for i in range(4):
        rows += [train_run("pytorch", time=10 * jitter(i), allocator="default"),
                 train_run("pytorch", time=7 * jitter(i), allocator="jemalloc"),
                 train_run("tensorflow", time=10 * jitter(i), allocator="default"),
                 train_run("tensorflow", time=14 * jitter(i), allocator="jemalloc")]
    verdict = judge_libraries(work(rows))
    assert verdict.verdict == HOLDS, verdict.reason
    assert "hurt" not in verdict.reason and "tensorflow" in verdict.parts[1].why


def test_libraries_do_not_hold_when_every_setting_slows_training() -> None:
    rows = [train_run(system, time=t * jitter(i), allocator=allocator)
            for i in range(4) for system in ("pytorch", "tensorflow")
            for allocator, t in (("default", 10), ("jemalloc", 13))]
    verdict = judge_libraries(work(rows))
    assert verdict.verdict == DOES_NOT_HOLD
    assert "the other way" in verdict.reason


def runtimes(ort_p50: float, n: int = 4, energy: bool = False) -> list[dict[str, object]]:
    """ORT, OpenVINO and PyTorch at batch 1 to 128; OpenVINO the highest throughput."""
    rows = []
    for i in range(n):
        for system, p50, scale in (("onnxruntime", ort_p50, 1.0), ("openvino", 0.5, 1.5),
                                   ("pytorch", 2.0, 0.5)):
            throughput = {1: 100 * scale, 8: 500 * scale, 32: 900 * scale, 64: 1000 * scale,
                          128: 1050 * scale}
            rows.append(infer_run(
                system, p50={b: p50 * jitter(i) for b in throughput},
                throughput={b: v * jitter(i) for b, v in throughput.items()},
                energy=(10 / scale) * jitter(i) if energy else None))
    return rows


def test_runtimes_do_not_hold_when_another_runtime_beats_onnx_runtime_at_batch_1() -> None:
    verdict = judge_runtimes(work(runtimes(ort_p50=1.0)))
    assert verdict.verdict == DOES_NOT_HOLD
    first, saturation, openvino = verdict.parts
    assert first.outcome == DOES_NOT_HOLD and "onnxruntime vs openvino" in first.why
    assert saturation.outcome == HOLDS and openvino.outcome == HOLDS


def test_runtimes_hold_when_onnx_runtime_is_fastest() -> None:
    assert judge_runtimes(work(runtimes(ort_p50=0.2))).verdict == HOLDS


def copies_run(size: int, throughput: float, memory: float) -> dict[str, object]:
    return {"run_id": f"r{next(_ids)}", "status": "FINISHED", "entry": "infer",
            "system": "onnxruntime", "host": "h", "params.ensemble_size": str(size),
            "params.ensemble_mode": "processes",
            "metrics.ensemble/throughput_samples_per_second": throughput,
            "metrics.ensemble/peak_proc_rss_megabytes": memory}


@pytest.mark.parametrize(("two_copies", "expected"), [(1.8, HOLDS), (0.6, DOES_NOT_HOLD),
                                                      (1.0, NO_MEANINGFUL_DIFFERENCE)])
def test_copies_trade_throughput_against_memory(two_copies: float, expected: str) -> None:
    rows = []
    for i in range(4):
        rows.append(copies_run(1, 1000 * jitter(i), 1e8 * jitter(i)))
        rows.append(copies_run(2, 1000 * two_copies * jitter(3 - i if two_copies == 1.0 else i),
                               2e8 * jitter(i)))
    verdict = judge_copies(work(rows))
    assert verdict.verdict == expected, verdict.reason
    assert verdict.parts[1].outcome == HOLDS  # two processes take more memory


def test_energy_holds_when_it_falls_with_throughput() -> None:
    verdict = judge_energy(work(runtimes(ort_p50=0.2, energy=True)))
    assert verdict.verdict == HOLDS and "Spearman rho" in verdict.reason


def test_energy_not_separable_without_a_counter() -> None:
    assert judge_energy(work(runtimes(ort_p50=0.2))).verdict == NOT_SEPARABLE


def test_claims_not_measurable_are_known_before_measuring(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow_dlaas.reproduce import runner

    monkeypatch.setattr(runner, "energy_counter_missing", lambda: "no energy counter: test")
    monkeypatch.setattr(runner.importlib.util, "find_spec",
                        lambda name: None if name == "openvino" else object())
    steps, known = plan_steps(parse_claims("2,4,6,8"), "quick", "dlaas-reproduce")
    assert [s.spec.name for s in steps] == ["reproduce-claim2-quick"]
    assert [c.number for c in steps[0].claims] == [2, 4]
    assert known[6].verdict == NOT_MEASURABLE and "openvino" in known[6].reason
    assert known[8].verdict == NOT_MEASURABLE and "openvino" in known[8].reason
    monkeypatch.setattr(runner.importlib.util, "find_spec", lambda name: object())
    steps, known = plan_steps(parse_claims("6,8"), "quick", "dlaas-reproduce")
    assert [c.number for c in steps[0].claims] == [6]
    assert known[8].verdict == NOT_MEASURABLE and known[8].reason == "no energy counter: test"


def test_another_experiment_gets_studies_of_its_own() -> None:
    steps, _ = plan_steps(parse_claims("5"), "quick", "mine")
    assert steps[0].spec.name == "mine-reproduce-claim5-quick"
    assert steps[0].spec.experiment == "mine"


@pytest.mark.parametrize("text", ["9", "0", "a", "1,,2"])
def test_unknown_claims_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="unknown claim"):
        parse_claims(text)


def test_every_claim_is_registered_once() -> None:
    assert [c.number for c in CLAIMS] == list(range(1, 9))
    assert [c.number for c in parse_claims("6,1,6")] == [1, 6]


def test_plans_say_their_time_before_they_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow_dlaas.reproduce import runner

    monkeypatch.setattr(runner, "energy_counter_missing", lambda: "no energy counter: test")
    said: list[str] = []
    for plan in ("quick", "full"):
        steps, _ = plan_steps(parse_claims(None), plan, "dlaas-reproduce")
        runner.announce(plan, steps, said.append)
    assert said[0].startswith("reproduce --quick: 6 studies, 76 runs; fits in 20 minutes on 2 "
                              "cores")
    assert said[1].startswith("reproduce --full: 6 studies, 250 runs; estimated 287 min (4.8 h)")


def test_a_separated_but_tiny_difference_is_no_meaningful_difference() -> None:
    """Peak memory 95.81 vs 95.71 MB separates with enough runs; it is no finding."""
    from mlflow_dlaas.reproduce.claim_parts import (
        MEMORY,
        NO_MEANINGFUL_DIFFERENCE,
        compare,
        in_words,
    )

    a = pd.DataFrame({"run_id": ["a1", "a2", "a3", "a4"], MEMORY: [95.81, 95.82, 95.83, 95.84]})
    b = pd.DataFrame({"run_id": ["b1", "b2", "b3", "b4"], MEMORY: [95.71, 95.70, 95.72, 95.73]})
    tiny = compare("peak memory: pytorch vs tensorflow", MEMORY, a, b)
    assert tiny.small_effect and tiny.direction == 0
    assert tiny.outcome() == ("no meaningful difference (ratio 1.00, 95 % CI 1.00–1.00, "
                              "within ±5%); permutation test, unpaired, p = 0.029, 4 vs 4 runs")
    from mlflow_dlaas.reproduce.claim_parts import part_any

    assert part_any("memory differs", [tiny]).outcome == NO_MEANINGFUL_DIFFERENCE
    assert in_words(1.2, "metrics.Headline/train_time_seconds") == "1.20x slower"
    assert in_words(0.8, "metrics.Headline/train_time_seconds") == "1.25x faster"
    assert in_words(1.001, MEMORY) == "1.00x, equal"
