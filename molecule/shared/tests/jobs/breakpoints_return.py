"""Mode off: a breakpoint() in the driver and in a task on the given node returns at once."""

from __future__ import annotations

import sys

import ray
from on_node import on_node


def passes_a_breakpoint() -> int:
    answer = 42
    breakpoint()
    return answer + 1


if __name__ == "__main__":
    ray.init()
    breakpoint()
    print(f"RESULT {ray.get(on_node(sys.argv[1], passes_a_breakpoint).remote())}")
