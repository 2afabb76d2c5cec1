"""A fleet: one study per host class, the same points in each, one storage and one tracking
server for all. ``study SPEC --fleet`` on a host runs ``<name>@<host class>`` in the spec's
experiment (by default the spec's name), so that every host measures the whole grid (or the
same queued points) and the report sets the hosts side by side, never pooled."""

from __future__ import annotations

from dataclasses import replace

from mlflow_dlaas.environment import HOST_CLASS_NAME, fingerprint, host_class
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.tuning.spec import StudySpec

#: between a fleet study's name and its host class
CLASS_SEPARATOR = "@"


def this_host_class(named: str | None = None) -> str:
    """The class the user named (checked), else this host's from its fingerprint."""
    if named is None:
        return host_class(fingerprint())
    if not HOST_CLASS_NAME.fullmatch(named):
        raise ConfigError(f"--host-class {named!r}: a host class is 1-63 letters, digits, "
                          "'.', '_' or '-', starting with a letter or digit (e.g. c7i.large)")
    return named


def fleet_spec(spec: StudySpec, host_class_name: str) -> StudySpec:
    """The spec as this host's study of the fleet: ``<name>@<class>``, in the experiment
    every host shares, its runs tagged with the class."""
    if CLASS_SEPARATOR in spec.name:
        raise ConfigError(f"study name {spec.name!r} holds {CLASS_SEPARATOR!r}, which --fleet "
                          "adds before the host class; rename the study")
    return replace(spec, name=f"{spec.name}{CLASS_SEPARATOR}{host_class_name}",
                   experiment=spec.experiment or spec.name, host_class=host_class_name)


def base_name(study: str) -> str:
    """A fleet study's name without its host class (any other name as it is)."""
    return study.split(CLASS_SEPARATOR, 1)[0]
