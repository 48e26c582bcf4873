"""Whether a systemd unit on a node (Ray's, the firewall's) is up as written, whether it runs
at all, whether it runs the files it reads at start as they are now, and whether stopping it
failed."""

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


def unit_running(properties: Mapping[str, str]) -> bool:
    """Whether the unit runs or is about to (activating: Restart= waits to start it again),
    as `systemctl show` read it: a unit not read, stopped or failed has nothing to stop."""
    return properties.get("ActiveState", "inactive") not in ("inactive", "failed")


def runs_older_than(
    properties: Mapping[str, str],
    files: Mapping[str, Mapping[str, Any] | None],
    paths: Iterable[str],
) -> bool:
    """Whether the unit runs a process started before one of `paths` was last written:
    `systemctl show --timestamp=unix` of the unit, and the files as the probe observed them
    ({path: {"mtime": seconds, ...} or None}). Files not observed say nothing."""
    if properties.get("ActiveState") != "active":
        return False
    started = properties.get("ExecMainStartTimestamp", "").lstrip("@")
    written = [(files.get(path) or {}).get("mtime") for path in paths]
    newest = max((mtime for mtime in written if mtime is not None), default=None)
    return newest is not None and int(started or 0) < newest


def stop_failed(result: Mapping[str, Any]) -> bool:
    """Whether a stop by ansible.builtin.systemd_service failed, a unit that does not exist
    aside: a unit never written has nothing to stop, and the run reports what kept it from
    being written rather than a second failure."""
    return bool(result.get("failed")) and "Could not find" not in str(result.get("msg", ""))


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_unit_up": unit_up,
            "ray_unit_running": unit_running,
            "ray_runs_older_than": runs_older_than,
            "ray_stop_failed": stop_failed,
        }
