"""Runs grouped by the machine they measured on: a fleet study's host class
(``dlaas.host_class``) where a run has one, else its hardware hash (``dlaas.host``); never
pooled across hosts."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.screening import validity_of
from mlflow_dlaas.runs.validity import VALID

#: the host of runs logged without a ``dlaas.host`` tag
UNKNOWN_HOST = "unknown"


@dataclass(frozen=True)
class Host:
    """One hardware fingerprint's runs."""

    name: str  # the host class, else the 12-hex hash of the fingerprint, or "unknown"
    cpu_model: str
    runs: pd.DataFrame
    valid: int  # runs with a valid verdict

    @property
    def label(self) -> str:
        return f"{self.name} ({self.cpu_model})" if self.cpu_model else self.name


def hosts(runs: pd.DataFrame) -> list[Host]:
    """One entry per host, the most valid runs first (then the most runs, then by name)."""
    if runs.empty:
        return []
    names = host_names(runs)
    valid = validity_of(runs) == VALID
    found = []
    for name, group in runs.groupby(names, sort=True):
        models = group["cpu_model"].dropna() if "cpu_model" in group else pd.Series([])
        models = models[models != ""]
        found.append(Host(str(name), str(models.mode().iloc[0]) if len(models) else "",
                          group, int(valid[group.index].sum())))
    return sorted(found, key=lambda h: (-h.valid, -len(h.runs), h.name))


def host_names(runs: pd.DataFrame) -> pd.Series:
    """Each run's host: its host class where it has one, else its hardware hash, else
    :data:`UNKNOWN_HOST`."""
    names = (runs["host"].fillna(UNKNOWN_HOST).astype(str) if "host" in runs
             else pd.Series(UNKNOWN_HOST, index=runs.index))
    if "host_class" in runs:
        classes = runs["host_class"].fillna("").astype(str)
        names = classes.where(classes != "", names)
    return names


def pick_host(runs: pd.DataFrame, wanted: str | None) -> tuple[Host | None, list[str]]:
    """The host ``recommend`` judges (``wanted``, else the one with the most valid runs), and
    a note saying which and why when there was a choice."""
    found = hosts(runs)
    if wanted is not None:
        chosen = next((h for h in found if h.name == wanted), None)
        if chosen is None:
            raise ConfigError(f"no finished runs on host {wanted!r}; hosts here: "
                              f"{_listed(found) or 'none'}")
        why = "chosen with --host"
    else:
        chosen = found[0] if found else None
        why = f"the host with the most valid runs ({chosen.valid})" if chosen else ""
    if chosen is None or len(found) < 2:
        return chosen, []
    others = _listed([h for h in found if h is not chosen])
    return chosen, [f"Judged on host {chosen.label}, {why}; runs of other hosts are never "
                    f"pooled with it: {others}. Pick one with --host HASH."]


def _listed(found: list[Host]) -> str:
    return ", ".join(f"{h.label}: {h.valid} valid of {len(h.runs)} runs" for h in found)
