"""Lazy imports of optional packages, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from mlflow_dlaas.errors import MissingDependencyError


def import_optional(module: str, *, extra: str, purpose: str, hint: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``extra`` (or ``hint``)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(module, extra, purpose, hint) from e
