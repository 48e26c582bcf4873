"""The verl check's Ray job: a DataProto round trip through Ray across the given nodes.

Runs on the head as a Ray job (working_dir: this directory) with one argument, a JSON
config: {"nodes": [ip, ...]}. The driver builds a small DataProto (tensors, non-tensor rows,
meta info), chunks it, sends one chunk to a task on each node, which imports verl there,
changes the chunk and sends it back; the driver concatenates and checks every field. No
model, no GPU. Prints one `VERL {json}` line: per node, verl's version or the error.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ROWS_PER_NODE = 4


def transform(chunk: Any) -> dict[str, Any]:
    """On a node: double the token ids, mark each row with this node's address.

    Errors are returned, not raised: on a post_mortem cluster a raised error would pause the
    task for a debugger instead of reaching the report.
    """
    ip = ray.util.get_node_ip_address()
    try:
        import numpy as np
        import verl

        chunk.batch["input_ids"] = chunk.batch["input_ids"] * 2
        chunk.non_tensor_batch["node"] = np.array([ip] * len(chunk), dtype=object)
    except Exception as error:
        lines = str(error).strip().splitlines()
        return {"ran_on": ip, "error": lines[-1] if lines else repr(error)}
    return {"ran_on": ip, "verl": verl.__version__, "chunk": chunk}


def differences(sent: Any, back: Any, nodes: list[str]) -> list[str]:
    """What came back other than `transform` should have made it."""
    import torch

    expected_nodes = [ip for ip in nodes for _ in range(ROWS_PER_NODE)]
    checks = {
        "token ids": torch.equal(back.batch["input_ids"], sent.batch["input_ids"] * 2),
        "row ids": list(back.non_tensor_batch["uid"]) == list(sent.non_tensor_batch["uid"]),
        "nodes": list(back.non_tensor_batch["node"]) == expected_nodes,
        "meta info": back.meta_info == {"step": 7},
    }
    return [what for what, ok in checks.items() if not ok]


def round_trip(nodes: list[str], node_ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    import numpy as np
    import torch
    from verl import DataProto

    if not nodes:
        return {}
    rows = ROWS_PER_NODE * len(nodes)
    data = DataProto.from_dict(
        tensors={"input_ids": torch.arange(rows * 8).reshape(rows, 8)},
        non_tensors={"uid": np.array([f"row-{i}" for i in range(rows)], dtype=object)},
        meta_info={"step": 7},
    )
    remote = ray.remote(transform)
    refs = [
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_ids[ip], soft=False),
            max_retries=0,
        ).remote(chunk)
        for ip, chunk in zip(nodes, data.chunk(len(nodes)), strict=True)
    ]
    report: dict[str, dict[str, Any]] = {}
    returned = []
    for ip, ref in zip(nodes, refs, strict=True):
        try:
            answer = ray.get(ref, timeout=300)
        except Exception as error:  # the task never ran: reported for its node
            lines = str(error).strip().splitlines()
            answer = {"error": lines[-1] if lines else repr(error)}
        chunk = answer.pop("chunk", None)
        report[ip] = answer
        if chunk is not None:
            returned.append(chunk)
    if len(returned) == len(nodes):
        problems = differences(data, DataProto.concat(returned), nodes)
        for ip in nodes:
            if problems:
                report[ip]["error"] = "round trip changed " + ", ".join(problems)
    return report


def main() -> None:
    config = json.loads(sys.argv[1])
    ray.init()
    node_ids = {node["NodeManagerAddress"]: node["NodeID"] for node in ray.nodes() if node["Alive"]}
    missing = {ip: {"error": "no alive Ray node with this address"} for ip in config["nodes"]
               if ip not in node_ids}  # fmt: skip
    present = [ip for ip in config["nodes"] if ip in node_ids]
    report = {**missing, **round_trip(present, node_ids)}
    print("VERL " + json.dumps({"nodes": report}), flush=True)


if __name__ == "__main__":
    main()
