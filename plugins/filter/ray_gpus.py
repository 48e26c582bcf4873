"""GPUs of the nodes as nvidia-smi lists them: the inventory the node_probe action records, its
lines in the runbook and the play's summary, and what differs between nodes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.verl_debug.cluster.plugins.module_utils.nvidia_smi import query_rows

# What the probe script (roles/ray_facts/files/node_probe.py) asks nvidia-smi for, in its order.
INVENTORY_FIELDS = ("index", "name", "memory.total", "driver_version")


def gpu_inventory(query_csv: str, banner: str) -> dict[str, Any]:
    """GPUs of a node from nvidia-smi.

    `query_csv` is what nvidia-smi printed for INVENTORY_FIELDS (--format=csv,noheader,
    nounits); `banner` what plain `nvidia-smi` printed, whose header carries the CUDA version
    the driver supports. Both empty: a node without GPUs.
    """
    try:
        rows = query_rows(query_csv, INVENTORY_FIELDS)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None
    gpus = [
        {
            "name": gpu["name"],
            "memory_mib": int(gpu["memory.total"]),
            "driver": gpu["driver_version"],
        }
        for gpu in rows
    ]
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", banner)
    return {
        "count": len(gpus),
        "models": sorted({gpu["name"] for gpu in gpus}),
        "memory_mib": min((gpu["memory_mib"] for gpu in gpus), default=0),
        "drivers": sorted({gpu["driver"] for gpu in gpus}),
        "cuda": cuda.group(1) if cuda else "",
    }


def gpu_summary(gpus: Mapping[str, Any], stand_in: object = False) -> str:
    """One line for the runbook and the play's summary, e.g. '2 x NVIDIA H100 (80 GiB) ...'.

    A host with ray_stand_in_gpus (tests) starts with 'stand-in: ': what its nvidia-smi
    answered is no GPU, and read alone the line would pass for one.
    """
    if not gpus.get("count"):
        return "no GPUs"
    line = (
        f"{gpus['count']} x {' + '.join(gpus['models'])} ({gpus['memory_mib'] // 1024} GiB), "
        f"driver {', '.join(gpus['drivers'])}, CUDA {gpus['cuda'] or '?'}"
    )
    return f"stand-in: {line}" if boolean(stand_in) else line


def _stand_in(node: Mapping[str, Any]) -> bool:
    """Whether a host's GPUs are stand-ins, from its hostvars (set only in the inventory)."""
    return boolean(node.get("ray_stand_in_gpus", False))


def gpu_node_lines(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """'host: gpu_summary' for each node with GPUs, from the nodes' hostvars."""
    return [
        f"{node['inventory_hostname']}: {gpu_summary(node['ray_node_gpus'], _stand_in(node))}"
        for node in nodes
        if node["ray_node_gpus"].get("count")
    ]


def gpu_total(nodes: Iterable[Mapping[str, Any]]) -> str:
    """The GPUs Ray offers across the nodes (hostvars), e.g. '8', or '2 (2 stand-in)'."""
    nodes = list(nodes)
    total = sum(int(node["ray_node_gpu_count"]) for node in nodes)
    stand_ins = sum(int(node["ray_node_gpu_count"]) for node in nodes if _stand_in(node))
    return f"{total} ({stand_ins} stand-in)" if stand_ins else str(total)


def gpu_mismatches(nodes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What differs between the GPU nodes of `nodes` ({host: gpu_inventory}): models, drivers."""
    with_gpus = {host: gpus for host, gpus in sorted(nodes.items()) if gpus.get("count")}
    problems = []
    for field, what in (("models", "GPU models"), ("drivers", "driver versions")):
        seen = {host: ", ".join(gpus[field]) for host, gpus in with_gpus.items()}
        if len(set(seen.values())) > 1:
            problems.append(f"{what} differ: " + "; ".join(f"{h}: {v}" for h, v in seen.items()))
    return problems


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_gpu_summary": gpu_summary,
            "ray_gpu_node_lines": gpu_node_lines,
            "ray_gpu_total": gpu_total,
            "ray_gpu_mismatches": gpu_mismatches,
        }
