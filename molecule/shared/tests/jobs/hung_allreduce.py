"""A step that hangs as multi-node verl steps do: RANKS_PER_NODE ranks on each of two nodes
form one Gloo process group, and all but one enter an all-reduce the odd rank never joins: it
sleeps instead. Nothing pauses and nothing raises; the job runs until it is stopped.

Usage: hung_allreduce.py NODE_IP NODE_IP RANKS_PER_NODE. The odd rank is the last one, on
the second node; it prints ODD_RANK so the test can find its pid in the job's log.

Under the runbook's NCCL debug profile each rank also writes a stand-in for PyTorch's NCCL
flight recorder dump where the profile points it: Gloo has no flight recorder, and on GPUs
PyTorch writes that file only at NCCL's timeout."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from datetime import timedelta

import ray
from on_node import on_node

HANG_S = 900


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((ray.util.get_node_ip_address(), 0))
        return probe.getsockname()[1]


def odd_rank_sleeps() -> None:
    time.sleep(HANG_S)


# What the NCCL debug profile sets, recorded in each rank's stand-in dump.
PROFILE = (
    "NCCL_DEBUG",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_DEBUG_FILE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_DISTRIBUTED_DEBUG",
)


def write_stand_in_dump(rank: int) -> None:
    prefix = os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if prefix:
        with open(f"{prefix}{rank}", "w") as dump:
            json.dump({name: os.environ.get(name) for name in PROFILE}, dump)


def rank_step(init_method: str, rank: int, world: int) -> None:
    import torch
    import torch.distributed as dist

    write_stand_in_dump(rank)

    dist.init_process_group(
        "gloo", init_method=init_method, rank=rank, world_size=world,
        timeout=timedelta(seconds=HANG_S),
    )  # fmt: skip
    if rank == world - 1:
        print("ODD_RANK", flush=True)
        odd_rank_sleeps()
    else:
        dist.all_reduce(torch.ones(4))


if __name__ == "__main__":
    first, second, per_node = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ray.init()
    port = ray.get(on_node(first, free_port, num_cpus=0).remote())
    init_method = f"tcp://{first}:{port}"
    world = 2 * per_node
    refs = [
        on_node(ip, rank_step, num_cpus=0).remote(init_method, rank, world)
        for rank, ip in enumerate([first] * per_node + [second] * per_node)
    ]
    ray.get(refs)
