"""The collective check's Ray job: torch.distributed all-reduce between nodes, as verl does.

Runs on the head as a Ray job (working_dir: this directory) with one argument, a JSON
config: {"nodes": [ip, ...], "env": {ip: {NAME: VALUE}}, "timeout": s, "size_mb": n}.
One actor per node inherits that node's Ray environment (NCCL_SOCKET_IFNAME,
GLOO_SOCKET_IFNAME, NCCL_IB_*), plus any override for it. Every pair of nodes (neighbours
in a ring past MAX_PAIRWISE nodes), then all of them together, form a process group: NCCL
when every member has a GPU, Gloo otherwise. Prints one `COLLECTIVE {json}` line.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import sys
import time
from datetime import timedelta
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ENV_NAMES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE")
ITERATIONS = 5
MAX_PAIRWISE = 8


def last_line(error: BaseException) -> str:
    """The line of an error (or a Ray task's traceback) that says what went wrong."""
    lines = str(error).strip().splitlines()
    return lines[-1] if lines else repr(error)


@ray.remote(num_cpus=0, max_restarts=0)
class Rank:
    """One member of a process group, pinned to its node."""

    def describe(self) -> dict[str, Any]:
        import torch

        ip = ray.util.get_node_ip_address()
        with socket.socket() as free:
            free.bind((ip, 0))
            port = free.getsockname()[1]
        return {
            "ip": ip,
            "port": port,
            "gpu": torch.cuda.is_available(),
            "env": {name: os.environ.get(name) for name in ENV_NAMES},
        }

    def all_reduce(
        self, rank: int, world: int, master: str, backend: str, size_mb: int, timeout: float
    ) -> dict[str, Any]:
        # Returned, not raised: on a post_mortem cluster a raised error would pause this actor
        # for a debugger, and the check would hang on exactly the failure it should report.
        try:
            return self._all_reduce(rank, world, master, backend, size_mb, timeout)
        except Exception as error:
            return {"error": last_line(error)}

    def _all_reduce(
        self, rank: int, world: int, master: str, backend: str, size_mb: int, timeout: float
    ) -> dict[str, Any]:
        import torch
        import torch.distributed as dist

        dist.init_process_group(
            backend,
            init_method=f"tcp://{master}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout),
        )
        try:
            device = "cuda" if backend == "nccl" else "cpu"
            tensor = torch.ones(size_mb * 2**20 // 4, dtype=torch.float32, device=device)
            dist.all_reduce(tensor)
            if tensor[0].item() != world:
                raise RuntimeError(f"all-reduce summed to {tensor[0].item()}, expected {world}")
            if device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(ITERATIONS):
                dist.all_reduce(tensor)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = (time.perf_counter() - started) / ITERATIONS
        finally:
            dist.destroy_process_group()
        algbw = tensor.numel() * 4 / seconds / 1e9
        # nccl-tests' bus bandwidth: what each link carried in a ring all-reduce.
        busbw = algbw * 2 * (world - 1) / world
        return {"seconds": seconds, "algbw_gbps": algbw, "busbw_gbps": busbw}


def first_failure_or_slowest(pending: list[Any], timeout: float) -> dict[str, Any]:
    """The slowest member's timing, or the first member's error as soon as one fails.

    A member that fails (a missing interface) leaves the others waiting for it until torch's
    timeout; its error alone says what is wrong, so the check does not wait for theirs.
    """
    timings = []
    # The margin lets torch's own timeout raise first, with its message.
    deadline = time.monotonic() + timeout + 30
    while pending:
        ready, pending = ray.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            return {"error": f"timed out: the group did not form within {timeout:g} s"}
        timing = ray.get(ready[0])
        if "error" in timing:
            return timing
        timings.append(timing)
    return max(timings, key=lambda timing: timing["seconds"])


def groups_to_check(ips: list[str]) -> list[list[str]]:
    if len(ips) < 2:
        return [ips]
    if len(ips) <= MAX_PAIRWISE:
        pairs = [list(pair) for pair in itertools.combinations(ips, 2)]
    else:
        pairs = [[ips[i], ips[(i + 1) % len(ips)]] for i in range(len(ips))]
    return pairs + ([ips] if len(ips) > 2 else [])


def check_group(group: list[str], node_ids: dict[str, str], config: dict[str, Any]) -> dict:
    timeout = float(config["timeout"])
    result: dict[str, Any] = {"nodes": group}
    ranks = [
        Rank.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_ids[ip], soft=False),
            runtime_env={"env_vars": config["env"].get(ip, {})},
        ).remote()
        for ip in group
    ]
    try:
        described = ray.get([rank.describe.remote() for rank in ranks], timeout=timeout)
        result["env"] = {info["ip"]: info["env"] for info in described}
        result["backend"] = "nccl" if all(info["gpu"] for info in described) else "gloo"
        master = f"{described[0]['ip']}:{described[0]['port']}"
        pending = [
            rank.all_reduce.remote(
                index, len(group), master, result["backend"], config["size_mb"], timeout
            )
            for index, rank in enumerate(ranks)
        ]
        result.update(first_failure_or_slowest(pending, timeout))
    # Every failure is reported with its group, none is raised: the other groups still run.
    except Exception as error:
        result["error"] = last_line(error)
    finally:
        for rank in ranks:
            ray.kill(rank)
    return result


def main() -> None:
    config = json.loads(sys.argv[1])
    ray.init()
    node_ids = {node["NodeManagerAddress"]: node["NodeID"] for node in ray.nodes() if node["Alive"]}
    missing = [ip for ip in config["nodes"] if ip not in node_ids]
    results = [{"nodes": [ip], "error": "no alive Ray node with this address"} for ip in missing]
    present = [ip for ip in config["nodes"] if ip in node_ids]
    results += [check_group(group, node_ids, config) for group in groups_to_check(present)]
    print("COLLECTIVE " + json.dumps({"results": results}), flush=True)


if __name__ == "__main__":
    main()
