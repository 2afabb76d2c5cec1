"""The tracking store's address: the variable that names it, the embedded default, the URI
with its credentials hidden, and whether an error means the store did not answer."""

from __future__ import annotations

import re
from pathlib import Path

TRACKING_ENV = "MLFLOW_TRACKING_URI"
ACTIVE_ENV = "MLFLOW_DLAAS_ACTIVE"
EMBEDDED_DB = "mlflow.db"


def embedded_uri(directory: Path | None = None) -> str:
    """The SQLite URI of the embedded store in ``directory`` (default: the working directory).

    Artifacts go where MLflow puts them for such a store: ``./mlruns`` beside it.
    """
    return f"sqlite:///{(directory or Path.cwd()).resolve() / EMBEDDED_DB}"


def redact_uri(uri: str) -> str:
    """Hide credentials in a URI: ``user:secret@`` keeps the user, a bare ``token@`` is masked
    whole, and a query string (``?password=``, ``?token=``) is dropped."""
    if "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    rest = rest.split("?", 1)[0]
    if "@" not in rest:
        return f"{scheme}://{rest}"
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://***@{host}"


_URI = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_text(text: str) -> str:
    """``text`` with every URI in it redacted by :func:`redact_uri` (error messages, values)."""
    return _URI.sub(lambda found: redact_uri(found.group(0)), text)


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the server did not answer (refused, timed out, reset, 5xx after
    retries) rather than refused the request itself."""
    import requests

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (requests.exceptions.RequestException, ConnectionError,
                                TimeoutError)):
            return True
        current = current.__cause__ or current.__context__
    return False
