"""How the report writes settings: unset ones as the default, long ones shortened."""

from __future__ import annotations

import math
import re

#: a URI whose path is one id (a training run's URI, for one)
_ID_URI = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*:/+)(?P<id>[^/]+)")


def setting_text(value: object, width: int | None = 32) -> str:
    """A setting as shown: unset (empty or absent) params are the framework's default; a URI
    that names an id (a training run's) by the id's first 8 characters; a long path by its
    file name; anything else longer than ``width`` characters shortened; every value in full
    where ``width`` is None."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return "default"
    if width is None:
        return str(value)
    text = short_number(str(value))
    uri = _ID_URI.fullmatch(text)
    if uri and len(uri["id"]) > 8:
        return f"{uri['scheme']}{uri['id'][:8]}…"
    if len(text) > width and "/" in text.rstrip("/"):
        tail = "…/" + text.rstrip("/").rsplit("/", 1)[1]
        if len(tail) <= width:
            return tail
    return text if len(text) <= width else text[: width - 1] + "…"


def short_number(text: str) -> str:
    """A param that is a long decimal in short form: ``0.0012345678901234567`` ->
    ``0.001235``; anything else unchanged."""
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number) or number == int(number) or len(text) <= 8:
        return text
    return f"{number:.4g}"
