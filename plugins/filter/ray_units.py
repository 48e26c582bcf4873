"""Whether a systemd unit on a node (Ray's, the firewall's) is up as written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# What systemd says of a unit that runs, starts at boot and runs the unit file on disk.
UNIT_UP = {"ActiveState": "active", "UnitFileState": "enabled", "NeedDaemonReload": "no"}


def unit_up(properties: Mapping[str, str] | Iterable[str]) -> bool:
    """Whether `systemctl show` says the unit is up as written: {property: value}, or its
    PROPERTY=VALUE lines (other lines are ignored). Nothing read says no."""
    if not isinstance(properties, Mapping):
        properties = dict(line.split("=", 1) for line in properties if "=" in line)
    return all(properties.get(name) == value for name, value in UNIT_UP.items())


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_unit_up": unit_up,
        }
