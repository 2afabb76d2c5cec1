"""Cost per answer: USD per 1,000 predictions and per training run, matched to a hand
calculation to the cent, with the interval from the figure's own and the price's source."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scipy import stats

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.cost import cost_text, geometric_interval, parse_prices


def test_per_1000_predictions_and_per_training_run_match_a_hand_calculation() -> None:
    # USD 36 an hour is USD 0.01 a second; at 2 samples/s, 1,000 predictions take 500 s
    assert cost_text("offline/throughput_samples_per_second", [2.0, 2.0], 36.0) == \
        "USD 5.00 per 1,000 predictions (offline) (95 % CI USD 5.00–5.00) at USD 36/h"
    assert cost_text("Headline/server_max_qps_within_p99_bound", [4.0], 36.0) == \
        "USD 2.50 per 1,000 predictions (at its server capacity) at USD 36/h"
    # 900 s of training at USD 0.40 an hour: USD 0.10
    assert cost_text("Headline/train_time_seconds", [900.0], 0.40) == \
        "USD 0.10 per training run at USD 0.4/h"
    # a c7i.large at USD 0.08925/h serving 11,500 samples/s: USD 0.00000216 per 1,000
    assert cost_text("offline/throughput_samples_per_second", [11_500.0], 0.08925) \
        .startswith("USD 2.16e-06 per 1,000 predictions (offline)")
    assert cost_text("Headline/test_accuracy", [0.9], 1.0) == ""  # no cost to a ratio


def test_the_interval_follows_from_the_throughputs() -> None:
    values = [900.0, 1000.0, 1100.0, 1000.0]
    middle, low, high = geometric_interval(values)
    logs = [math.log(v) for v in values]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = stats.t.ppf(0.975, 3) * sd / 2
    assert (low, high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    text = cost_text("offline/throughput_samples_per_second", values, 3600.0)
    # USD 1 a second: a faster host end is the cheaper cost end
    assert f"CI USD {1000 / high:.2f}–{1000 / low:.2f}" in text, text
    assert text.startswith(f"USD {1000 / middle:.2f} per 1,000 predictions (offline)")


def test_prices_need_their_source_and_date(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="source and date"):
        parse_prices(["c7i.large=0.08925"], None, None)
    with pytest.raises(ConfigError, match="source and date"):
        parse_prices(["c7i.large=0.08925"], "AWS", "December")
    with pytest.raises(ConfigError, match="CLASS=USD_PER_HOUR"):
        parse_prices(["c7i.large=free"], "AWS", "2026-12-01")
    assert parse_prices([], None, None) is None
    prices = parse_prices(["c7i.large=0.08925"], "AWS on-demand, us-east-1", "2026-12-01")
    assert prices is not None and prices.usd_per_hour == {"c7i.large": 0.08925}
    assert prices.cited == "AWS on-demand, us-east-1, 2026-12-01"
    file = tmp_path / "prices.yaml"
    file.write_text("source: GCP list price\ndate: 2026-11-30\n"
                    "usd_per_hour: {n2-standard-2: 0.0971}\n")
    from_file = parse_prices([], None, None, str(file))
    assert from_file is not None and from_file.usd_per_hour == {"n2-standard-2": 0.0971}
    assert from_file.date == "2026-11-30"
