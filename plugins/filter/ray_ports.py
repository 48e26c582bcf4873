"""Ports and port ranges as the variables write them (6379, "52000-52099"): the grammar's
messages for validation, overlaps in the port table, nftables set elements, and the ports of
a kernel list such as ip_local_reserved_ports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.verl_debug.cluster.plugins.module_utils import ray_port_range

PortSpec = int | str


def port_span(value: PortSpec) -> tuple[int, int]:
    """Parse a port (6379) or range ("52000-52099") into (low, high)."""
    try:
        return ray_port_range.port_span(value)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None


def port_range_error(value: PortSpec) -> str:
    """Why `value` is neither a port nor a range (an entry of ray_ports), or ''."""
    return _grammar_error(ray_port_range.port_span, value)


def debugger_port_range_error(value: PortSpec) -> str:
    """Why `value` cannot be ray_debugger_port_range (LOW-HIGH, even for one port), or ''."""
    return _grammar_error(ray_port_range.port_range, value)


def _grammar_error(parse: Callable[[PortSpec], object], value: PortSpec) -> str:
    try:
        parse(value)
    except ValueError as error:
        return str(error)
    return ""


def ports_overlapping(value: PortSpec, ports: Mapping[str, PortSpec]) -> list[str]:
    """Return the names in the port table whose port or range overlaps `value`."""
    low, high = port_span(value)
    return sorted(
        name
        for name, spec in ports.items()
        if (span := port_span(spec))[0] <= high and low <= span[1]
    )


def nft_ports(specs: Iterable[PortSpec]) -> str:
    """Render ports and ranges as nftables set elements, e.g. '6379, 10002-19999'."""
    spans = sorted(port_span(spec) for spec in specs)
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in spans)


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_port_span": lambda value: list(port_span(value)),
            "ray_port_range_error": port_range_error,
            "ray_debugger_port_range_error": debugger_port_range_error,
            "ray_ports_overlapping": ports_overlapping,
            "ray_nft_ports": nft_ports,
        }
