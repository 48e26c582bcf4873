"""Every rank of a step stops at once: RANKS tasks pinned to one node wait at a barrier, then
all hit breakpoint() (legacy) or raise (post_mortem) in the same instant."""

from __future__ import annotations

import asyncio
import sys

import ray
from on_node import on_node


@ray.remote(num_cpus=0)
class Barrier:
    def __init__(self, parties: int) -> None:
        self.parties, self.arrived, self.open = parties, 0, asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.parties:
            self.open.set()
        await self.open.wait()


def rank_step(barrier: ray.actor.ActorHandle, rank: int, mode: str) -> int:
    ray.get(barrier.wait.remote())
    if mode == "legacy":
        breakpoint()
        return rank
    raise ValueError(f"crowd rank {rank} crashed")


if __name__ == "__main__":
    mode, node_ip, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ray.init()
    barrier = Barrier.remote(ranks)
    # No CPUs asked: every rank runs at once, as verl's colocated workers do on a GPU node.
    step = on_node(node_ip, rank_step, num_cpus=0)
    refs = [step.remote(barrier, rank, mode) for rank in range(ranks)]
    outcomes = []
    for ref in refs:
        try:
            outcomes.append(f"returned {ray.get(ref)}")
        except ray.exceptions.RayTaskError as error:
            outcomes.append("raised" if "crowd rank" in str(error) else f"failed: {error}")
    print(f"OUTCOMES {outcomes}")
