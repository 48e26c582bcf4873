"""The head's node list (Ray's state API, ray_defaults' read_nodes): which nodes are alive,
with their GPUs, and which have joined again since Ray restarted on them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.verl_debug.cluster.plugins.module_utils.ray_nodes_api import (
    alive_node_ids,
    node_rows,
    nodes_not_ready,
)


def ids_before(hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str]) -> dict:
    """{address: node ids alive there before Ray stopped} for each host, what the join wait
    sends the node_list module: a host whose Ray did not run had none."""
    return {
        hostvars[host]["ray_node_address"]: list(hostvars[host].get("__ray_service_ids_before", []))
        for host in hosts
    }


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_node_rows": node_rows,
            "ray_nodes_not_ready": nodes_not_ready,
            "ray_alive_node_ids": alive_node_ids,
            "ray_ids_before": ids_before,
        }
