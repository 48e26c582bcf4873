"""The job `verl-debug rank` submits: from a task on the worker's node, it asks the worker to
open its debugger (ray_debug_on_demand.request, installed with the node's debug hooks) and
prints the answer as `DEBUG_RANK {json}`, with the cluster's GCS address.

Usage: debug_rank_job.py '{"node_ip": IP, "pid": PID}'"""

from __future__ import annotations

import json
import sys
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def ask(node_ip: str, pid: int) -> dict[str, Any]:
    nodes = [node for node in ray.nodes() if node["Alive"]]
    node_id = next((n["NodeID"] for n in nodes if n["NodeManagerAddress"] == node_ip), None)
    if node_id is None:
        known = ", ".join(sorted(node["NodeManagerAddress"] for node in nodes))
        return {"error": f"no live Ray node at {node_ip} (live nodes: {known})"}

    @ray.remote(num_cpus=0, max_retries=0)
    def on_node(pid: int) -> dict[str, Any]:
        import ray_debug_on_demand

        return ray_debug_on_demand.request(pid)

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return ray.get(on_node.options(scheduling_strategy=strategy).remote(pid))


if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    ray.init()
    # Where legacy's breakpoints are listed, as the cluster names its GCS.
    reply = {**ask(config["node_ip"], config["pid"]), "gcs": ray.get_runtime_context().gcs_address}
    print("DEBUG_RANK " + json.dumps(reply), flush=True)
