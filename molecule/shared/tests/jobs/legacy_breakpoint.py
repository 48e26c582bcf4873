"""Pause a task on the given node at a breakpoint; print its result once released."""

from __future__ import annotations

import sys

import ray
from on_node import on_node


def paused() -> int:
    answer = 42
    breakpoint()
    return answer + 1


if __name__ == "__main__":
    ray.init()
    print(f"RESULT {ray.get(on_node(sys.argv[1], paused).remote())}")
