"""Judge the debugger half of roles/ray_verify/files/cluster_proof.py's report: every node's
running Ray in the debug mode asked for, its debuggers inside ray_debugger_port_range, the range
reserved from the kernel. The debug variables the proof reads are every mode's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.verl_debug.cluster.plugins.filter.ray_ports import PortSpec, port_span
from ansible_collections.verl_debug.cluster.plugins.module_utils.ray_port_range import (
    parse_port_list,
)


def debugger_proof_problems(
    report: Mapping[str, Mapping[str, Any]],
    wanted: Mapping[str, str],
    mode: str,
    port_range: PortSpec,
    debug_modes: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[str]]:
    """Judge the debugger proof's report, {node ip: what a debugger did there}.

    `wanted` maps every node's address to its host name; `debug_modes` is ray_debug_modes,
    whose variables the node's running Ray must carry as `mode` sets them. Returns `problems`
    (the run fails) and `unreserved` (nodes whose kernel may give a debugger port to a
    connection).
    """
    low, high = port_span(port_range)
    names = debug_variable_names(debug_modes)
    expected = {name: debug_modes[mode]["env"].get(name) for name in names}
    problems, unreserved = [], []
    for address, host in sorted(wanted.items()):
        node = report.get(address)
        if node is None:
            problems.append(f"{host} ({address}): no debugger proof came back from this node")
            continue
        where = f"{host} ({address}), Ray {node.get('ray', '?')}"
        # A proof task that failed or never finished reported its error alone.
        if "debug_env" not in node:
            problems.append(f"{where}: {node.get('error')}")
            continue
        running = {name: node["debug_env"].get(name) for name in names}
        if running != expected:
            problems.append(
                f"{where}: Ray runs with {_settings(running)}, not {mode}'s "
                f"{_settings(expected)}: it did not restart on its configuration; re-run "
                "cluster-up, which restarts a Ray older than its configuration"
            )
        if node.get("error"):
            problems.append(f"{where}: {node['error']}")
        elif mode == "off":
            if node.get("paused"):
                problems.append(f"{where}: breakpoint() waited for a debugger in mode off")
        elif not low <= int(node.get("port") or 0) <= high:
            problems.append(
                f"{where}: a {mode} debugger listened on port {node.get('port')}, outside "
                f"ray_debugger_port_range {low}-{high}; the port hook does not work on this Ray"
            )
        if node.get("stack", "ok") != "ok":
            problems.append(
                f"{where}: the dashboard could not read a worker's stack here (py-spy, run by the"
                f" node's dashboard agent): {node['stack']}"
            )
        reserved = parse_port_list(node.get("reserved", ""))
        if mode != "off" and not set(range(low, high + 1)) <= reserved:
            unreserved.append(host)
    return {"problems": problems, "unreserved": unreserved}


def debug_variable_names(debug_modes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every variable some debug mode sets (ray_debug_modes): what the proof reads on a node."""
    return sorted({name for settings in debug_modes.values() for name in settings["env"]})


def _settings(env: Mapping[str, str | None]) -> str:
    return ", ".join(
        f"{name}={value}" if value is not None else f"{name} unset" for name, value in env.items()
    )


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_debugger_proof_problems": debugger_proof_problems,
            "ray_debug_variable_names": debug_variable_names,
        }
