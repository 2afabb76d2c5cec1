"""The sequential rule's false-decision rate and power, by simulation (docs/report.md).

Each synthetic study measures two configurations in interleaved rounds: log-normal noise at
a coefficient of variation (CV), a shared drift per round, and a look after every round up
to the budget. Prints, per case, the share decided "different" (and decided correctly),
"no meaningful difference", still open, and the mean round a decision came at.

    python benchmarks/sequential_rule.py [--studies 2000] [--max-rounds 12]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from mlflow_dlaas.sequential import Decision, SequentialRule

CASES = ((1.0, 0.01), (1.0, 0.05), (1.0, 0.20), (0.9, 0.05), (0.9, 0.01), (0.9, 0.20))


def simulate(rule: SequentialRule, ratio: float, cv: float, studies: int, seed: int
             ) -> dict[str, float]:
    """Shares of outcomes over ``studies`` synthetic studies of ``a`` (true ratio a / b =
    ``ratio``) against ``b``, at coefficient of variation ``cv``."""
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log1p(cv ** 2))
    shape = (studies, rule.max_rounds)
    drift = rng.normal(0, 0.05, shape)  # each round's shared drift: cancels in the pairs
    log_a = math.log(ratio) + drift + rng.normal(0, sigma, shape)
    log_b = drift + rng.normal(0, sigma, shape)
    judged = rule.judge(log_a, log_b)
    decisions = [j.decision for j in judged]
    decided = [j.rounds for j in judged if j.decision is not Decision.OPEN]
    right = Decision.A_LOWER if ratio < 1 else None
    return {"different": sum(d in (Decision.A_LOWER, Decision.A_HIGHER)
                             for d in decisions) / studies,
            "correct": sum(d is right for d in decisions) / studies if right else math.nan,
            "same": decisions.count(Decision.SAME) / studies,
            "open": decisions.count(Decision.OPEN) / studies,
            "mean_round": float(np.mean(decided)) if decided else math.nan}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--max-rounds", type=int, default=SequentialRule().max_rounds)
    args = parser.parse_args()
    rule = SequentialRule(max_rounds=args.max_rounds)
    print(f"rule: {rule.describe()}; {args.studies} studies per case")
    print("true ratio | CV   | different | correct | same  | open  | mean round decided")
    for i, (ratio, cv) in enumerate(CASES):
        found = simulate(rule, ratio, cv, args.studies, seed=i)
        correct = "   —   " if math.isnan(found["correct"]) else f"{found['correct']:7.3f}"
        print(f"{ratio:10.2f} | {cv:4.0%} | {found['different']:9.3f} | {correct} | "
              f"{found['same']:5.3f} | {found['open']:5.3f} | {found['mean_round']:.1f}")


if __name__ == "__main__":
    main()
