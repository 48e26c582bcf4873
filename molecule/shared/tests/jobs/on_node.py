"""Helpers for job scripts: run a function as a task pinned to the node with a given IP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def on_node(ip: str, function: Callable[..., Any], **options: Any) -> Any:
    """The remote version of `function`, scheduled only on the node whose address is `ip`."""
    node_ids = [
        node["NodeID"] for node in ray.nodes() if node["Alive"] and node["NodeManagerAddress"] == ip
    ]
    if not node_ids:
        raise LookupError(f"no alive Ray node at {ip}")
    strategy = NodeAffinitySchedulingStrategy(node_id=node_ids[0], soft=False)
    return ray.remote(function).options(scheduling_strategy=strategy, max_retries=0, **options)
