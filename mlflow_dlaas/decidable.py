"""How many runs a side an exact permutation test needs before any outcome can decide.

An unpaired comparison of ``n`` against ``n`` runs has ``C(2n, n)`` equally likely
arrangements under the null; the smallest two-sided p it can reach is ``2 / C(2n, n)``. At
3 a side that is 2 / 20 = 0.1: no outcome can reach p < 0.05; 4 a side (2 / 70 = 0.029) is
the fewest that can.
"""

from __future__ import annotations

import math

#: the level every comparison is tested at: a 95 % interval
ALPHA = 0.05
#: the smallest ratio away from 1 that counts as an effect (5 %)
MIN_EFFECT = 0.05


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p an unpaired exact test of ``n`` against ``m`` runs reaches."""
    return 2 / math.comb(n + m, n)


def fewest_runs_per_side(alpha: float = ALPHA) -> int:
    """The fewest runs a side (equal sides) whose exact test can reach p < ``alpha``."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n
