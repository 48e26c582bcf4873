"""What ray_facts knows of each node: the record a later run reads when it cannot reach the
node, whether the node's CPUs, GPUs and Python fit verl and the debugger port range, and
whether its venv holds the lock."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.verl_debug.cluster.plugins.filter.ray_ports import PortSpec, port_span
from packaging.specifiers import SpecifierSet


def oldest_version(versions: Iterable[str]) -> str:
    """The lowest dotted version, compared numerically ('2.9' < '2.36')."""
    return min(versions, key=lambda version: tuple(int(part) for part in str(version).split(".")))


# The node facts another run needs when it cannot reach the node (--limit, a node down).
RECORDED_FACTS = {
    "address": "ray_node_address",
    "addresses": "ray_node_addresses",
    "python": "ray_node_python",
    "gpus": "ray_node_gpus",
    "gpu_count": "ray_node_gpu_count",
    "ib_hcas": "ray_node_ib_hcas",
    "ifname": "ray_node_ifname",
    "cpus": "ray_node_cpus",
}


def node_record(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{host: recorded facts} from the hostvars of nodes whose facts are known."""
    record = {}
    for node in nodes:
        facts = {key: node[name] for key, name in RECORDED_FACTS.items()}
        facts["gpu_count"], facts["cpus"] = int(facts["gpu_count"]), int(facts["cpus"])
        record[str(node["inventory_hostname"])] = facts
    return record


def _cpus_and_gpus(node: Mapping[str, Any]) -> tuple[int, int]:
    """A node's CPUs and the GPUs Ray offers there, from its hostvars."""
    return int(node.get("ray_node_cpus", 0)), int(node.get("ray_node_gpu_count", 0))


def debugger_port_shortfalls(
    nodes: Iterable[Mapping[str, Any]], port_range: PortSpec, per_gpu: int
) -> list[str]:
    """Nodes whose Ray may run more pausable worker processes than the range has ports.

    Every worker process that opens a debugger holds a port of the range: about one per CPU
    for tasks, plus `per_gpu` colocated workers per GPU (verl's actor, critic, reference...).
    """
    low, high = port_span(port_range)
    size = high - low + 1
    short = []
    for node in nodes:
        cpus, gpus = _cpus_and_gpus(node)
        needed = cpus + gpus * per_gpu
        if needed > size:
            short.append(
                f"{node['inventory_hostname']} may pause {needed} worker processes at once "
                f"({cpus} CPUs + {gpus} GPUs x {per_gpu})"
            )
    return short


def verl_fit_shortfalls(nodes: Iterable[Mapping[str, Any]], per_gpu: int) -> list[str]:
    """GPU nodes whose CPUs cannot hold verl's colocated workers, with the numbers.

    verl's trainer places `per_gpu` workers (its max_colocate_count) on every GPU, each
    bundle reserving a CPU in a STRICT_PACK placement group: with fewer CPUs than that the
    group never becomes ready and the trainer waits, without an error.
    """
    short = []
    for node in nodes:
        cpus, gpus = _cpus_and_gpus(node)
        if gpus and cpus < gpus * per_gpu:
            short.append(
                f"{node['inventory_hostname']} has {gpus} GPUs but {cpus} CPUs; verl reserves "
                f"{gpus} x {per_gpu} = {gpus * per_gpu} CPUs"
            )
    return short


def pythons_outside(nodes: Iterable[Mapping[str, Any]], requires: str) -> list[str]:
    """ "HOST: Python X.Y" for each node whose Python falls outside `requires`, a package's
    Requires-Python ("<3.13,>=3.10")."""
    supported = SpecifierSet(requires)
    return [
        f"{node['inventory_hostname']}: Python {node['ray_node_python']['version']}"
        for node in nodes
        if node["ray_node_python"]["version"] not in supported
    ]


def venvs_to_sync(nodes: Iterable[Mapping[str, Any]], lock_sha256: str) -> list[str]:
    """The nodes whose venv (the probe's ray_node_venv) did not record this lock at its last
    sync, or whose packages differ from the lock it recorded."""
    return [
        str(node["inventory_hostname"])
        for node in nodes
        if node["ray_node_venv"]["lock_sha256"] != lock_sha256 or node["ray_node_venv"]["drift"]
    ]


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_oldest_version": oldest_version,
            "ray_node_record": node_record,
            "ray_debugger_port_shortfalls": debugger_port_shortfalls,
            "ray_verl_fit_shortfalls": verl_fit_shortfalls,
            "ray_pythons_outside": pythons_outside,
            "ray_venvs_to_sync": venvs_to_sync,
        }
