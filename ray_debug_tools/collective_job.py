"""The collective check's Ray job: torch.distributed all-reduce between nodes, as verl does.

Runs on the head as a Ray job (working_dir: this directory) with one argument, a JSON
config: {"nodes": [ip, ...], "names": {ip: name}, "env": {ip: {NAME: VALUE}},
"backend": "auto" | "gloo", "stand_ins": [ip, ...], "timeout": s, "size_mb": n}.
One actor per node inherits that node's Ray environment (NCCL_SOCKET_IFNAME,
GLOO_SOCKET_IFNAME, NCCL_IB_*), plus any override for it, and on a node with Ray GPUs asks
for one, as verl's workers do. Every pair of nodes (neighbours in a ring past MAX_PAIRWISE
nodes), then all of them together, form a process group; a single node with two or more GPUs
forms one of two ranks. NCCL when every member sees CUDA; Gloo otherwise, which fails the
group where a GPU node's torch sees no CUDA, unless that node's GPUs are stand-ins. Prints
one `COLLECTIVE {json}` line.
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
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

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
        node_id = ray.get_runtime_context().get_node_id()
        ray_gpus = next(
            node["Resources"].get("GPU", 0) for node in ray.nodes() if node["NodeID"] == node_id
        )
        return {
            "ip": ip,
            "port": port,
            "cuda": torch.cuda.is_available(),
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "ray_gpus": ray_gpus,
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


def groups_to_check(ips: list[str], gpus: dict[str, float], backend: str) -> list[list[str]]:
    """The process groups to run, each a list of its ranks' node addresses.

    A lone node with two or more GPUs gets two ranks, one GPU each, so that NCCL runs between
    GPUs as it does between nodes; with Gloo forced its GPUs are not used, and one rank does.
    """
    if len(ips) < 2:
        if backend == "auto" and ips and gpus.get(ips[0], 0) >= 2:
            return [ips * 2]
        return [ips]
    if len(ips) <= MAX_PAIRWISE:
        pairs = [list(pair) for pair in itertools.combinations(ips, 2)]
    else:
        pairs = [[ips[i], ips[(i + 1) % len(ips)]] for i in range(len(ips))]
    return pairs + ([ips] if len(ips) > 2 else [])


def asks_gpu(ip: str, gpus: dict[str, float], backend: str) -> bool:
    """Whether a rank on `ip` claims a GPU from Ray, as verl's workers do (a whole one)."""
    return backend == "auto" and gpus.get(ip, 0) >= 1


def choose_backend(
    members: list[dict[str, Any]], backend: str, stand_ins: list[str], names: dict[str, str]
) -> dict[str, str]:
    """The group's backend and a note on why, or the error that fails it without running.

    `members` are the ranks' describe() answers. A GPU node whose torch sees no CUDA is what
    turns verl's NCCL into Gloo unnoticed: it fails the group unless its GPUs are stand-ins.
    """
    if backend == "gloo":
        return {"backend": "gloo", "note": "asked for Gloo"}
    if all(member["cuda"] for member in members):
        return {"backend": "nccl", "note": ""}
    # One entry per node, its first rank's: a lone node's two ranks would say it all twice.
    first: dict[str, dict[str, Any]] = {}
    for member in members:
        first.setdefault(member["ip"], member)
    nodes = list(first.values())
    blind = [node for node in nodes if node["ray_gpus"] > 0 and not node["cuda"]]
    unmarked = [node for node in blind if node["ip"] not in stand_ins]
    if unmarked:
        return {"backend": "gloo", "error": "; ".join(falls_back(node, names) for node in unmarked)}
    notes = []
    if blind:
        stand_in = ", ".join(names.get(node["ip"], node["ip"]) for node in blind)
        notes.append(f"stand-in GPUs on {stand_in}: no CUDA, NCCL not checked")
    gpu_less = [names.get(node["ip"], node["ip"]) for node in nodes if node["ray_gpus"] == 0]
    if gpu_less and len(gpu_less) < len(nodes):
        notes.append(f"no GPU on {', '.join(gpu_less)}")
    return {"backend": "gloo", "note": "; ".join(notes)}


def falls_back(node: dict[str, Any], names: dict[str, str]) -> str:
    visible = node["cuda_visible_devices"]
    return (
        f"{names.get(node['ip'], node['ip'])} offers {node['ray_gpus']:g} GPUs to Ray but torch "
        f"{node['torch']} there sees no CUDA (built for CUDA {node['torch_cuda'] or 'none'}, "
        f"CUDA_VISIBLE_DEVICES={'unset' if visible is None else visible}): "
        "verl's ranks would fall back to Gloo"
    )


def no_free_gpu(name: str, timeout: float) -> str:
    return f"no free GPU on {name} within {timeout:g} s: another job holds its GPUs"


def not_ready(refs: dict[Any, str], timeout: float) -> list[str]:
    """The values of those `refs` (object refs as keys) not ready within `timeout`."""
    if not refs:
        return []
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
    return [value for ref, value in refs.items() if ref not in ready]


def start_rank(reservation: PlacementGroup | None, node_id: str, env: dict[str, str]) -> Any:
    """A rank on its node: in its GPU reservation if it has one, else pinned by node id."""
    if reservation is None:
        strategy: Any = NodeAffinitySchedulingStrategy(node_id, soft=False)
    else:
        strategy = PlacementGroupSchedulingStrategy(reservation)
    return Rank.options(
        num_gpus=0 if reservation is None else 1,
        scheduling_strategy=strategy,
        runtime_env={"env_vars": env},
    ).remote()


def check_group(
    group: list[str], node_ids: dict[str, str], gpus: dict[str, float], config: dict[str, Any]
) -> dict:
    timeout = float(config["timeout"])
    backend, names = config["backend"], config["names"]
    result: dict[str, Any] = {"nodes": group}
    # GPUs are reserved per node before any rank starts, so that GPUs held by another job are
    # told apart from a rank that is only slow to start (a new worker importing torch).
    reservations = {
        ip: placement_group([{"GPU": 1, f"node:{ip}": 0.001}] * group.count(ip))
        for ip in dict.fromkeys(group)
        if asks_gpu(ip, gpus, backend)
    }
    ranks: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        held = not_ready({pg.ready(): ip for ip, pg in reservations.items()}, timeout)
        if held:
            result["error"] = "; ".join(no_free_gpu(names.get(ip, ip), timeout) for ip in held)
            return result
        ranks = [
            start_rank(reservations.get(ip), node_ids[ip], config["env"].get(ip, {}))
            for ip in group
        ]
        answers = [rank.describe.remote() for rank in ranks]
        late = not_ready(
            {answer: names.get(ip, ip) for ip, answer in zip(group, answers, strict=True)},
            max(0.0, deadline - time.monotonic()),
        )
        if late:
            result["error"] = (
                f"the rank on {', '.join(dict.fromkeys(late))} did not start within {timeout:g} s"
            )
            return result
        described = ray.get(answers)
        result["env"] = {info["ip"]: info["env"] for info in described}
        result.update(choose_backend(described, backend, config["stand_ins"], names))
        if "error" in result:
            return result
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
        for reservation in reservations.values():
            remove_placement_group(reservation)
    return result


def main() -> None:
    config = json.loads(sys.argv[1])
    ray.init()
    alive = [node for node in ray.nodes() if node["Alive"]]
    node_ids = {node["NodeManagerAddress"]: node["NodeID"] for node in alive}
    gpus = {node["NodeManagerAddress"]: node["Resources"].get("GPU", 0) for node in alive}
    missing = [ip for ip in config["nodes"] if ip not in node_ids]
    results = [{"nodes": [ip], "error": "no alive Ray node with this address"} for ip in missing]
    present = [ip for ip in config["nodes"] if ip in node_ids]
    results += [
        check_group(group, node_ids, gpus, config)
        for group in groups_to_check(present, gpus, config["backend"])
    ]
    print("COLLECTIVE " + json.dumps({"results": results}), flush=True)


if __name__ == "__main__":
    main()
