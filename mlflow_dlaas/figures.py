"""How every figure is written for a person: three significant digits, never an exponent."""

from __future__ import annotations

import math


def significant(value: float | None, digits: int = 3) -> str:
    """``value`` at ``digits`` significant digits, never in exponent form: ``0.131``,
    ``3.70``, ``1.39``, ``199``, ``6,830``, ``10,300``."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= digits - 1:
        return f"{round(value, digits - 1 - magnitude):,.0f}"
    return f"{value:,.{digits - 1 - magnitude}f}"


def percent(fraction: float) -> str:
    """``12 %``, ``1.5 %``, ``0.31 %``: two significant digits below 10 %."""
    value = fraction * 100
    if value >= 10:
        return f"{value:.0f} %"
    return f"{value:.2g} %"
