"""A step that hangs as multi-node verl steps do: RANKS_PER_NODE ranks on each of two nodes
form one Gloo process group, and all but one enter an all-reduce the odd rank never joins: it
sleeps instead. Nothing pauses and nothing raises; the job runs until it is stopped.

Usage: hung_allreduce.py NODE_IP NODE_IP RANKS_PER_NODE. The odd rank is the last one, on
the second node; it prints ODD_RANK so the test can find its pid in the job's log."""

from __future__ import annotations

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


def rank_step(init_method: str, rank: int, world: int) -> None:
    import torch
    import torch.distributed as dist

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
