"""CPU package energy from Intel/AMD RAPL counters in ``/sys/class/powercap``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlflow_dlaas.errors import SourceUnavailable
from mlflow_dlaas.monitor.base import Sampler
from mlflow_dlaas.runs.schema import CPU_PACKAGE_ENERGY

POWERCAP_ROOT = Path("/sys/class/powercap")


@dataclass
class _Zone:
    index: int
    energy_file: Path
    range_uj: int
    last_uj: int
    total_uj: int = 0


class RaplSampler(Sampler):
    """Energy of each CPU package since :meth:`open`, unwrapping counter overflow."""

    name = "rapl"

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        self.root = root
        self._zones: list[_Zone] = []

    def open(self) -> None:
        zones = []
        candidates = sorted(self.root.glob("intel-rapl:*")) if self.root.is_dir() else []
        for zone_dir in candidates:
            if zone_dir.name.count(":") != 1:  # sub-zones (core, uncore, dram) are not packages
                continue
            name = _read(zone_dir / "name")
            if name is None or not name.startswith("package"):
                continue
            energy = _read(zone_dir / "energy_uj")
            if energy is None:
                raise SourceUnavailable(
                    f"RAPL counter {zone_dir / 'energy_uj'} is not readable (needs root, "
                    "or a kernel that exposes it to this user)"
                )
            index = int(name.rsplit("-", 1)[-1]) if name[-1].isdigit() else len(zones)
            max_range = int(_read(zone_dir / "max_energy_range_uj") or 2**32)
            zones.append(_Zone(index, zone_dir / "energy_uj", max_range, int(energy)))
        if not zones:
            raise SourceUnavailable(f"no RAPL package zone under {self.root}")
        self._zones = zones

    def collect(self) -> dict[str, float]:
        values = {}
        for zone in self._zones:
            now = int(_read(zone.energy_file) or zone.last_uj)
            delta = now - zone.last_uj
            if delta < 0:  # the counter wrapped around
                delta += zone.range_uj + 1
            zone.total_uj += delta
            zone.last_uj = now
            values[CPU_PACKAGE_ENERGY.format(i=zone.index)] = zone.total_uj / 1e6
        return values


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
