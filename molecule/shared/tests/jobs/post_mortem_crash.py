"""Crash a task on the given node; in post_mortem mode it pauses for a debugger first."""

from __future__ import annotations

import sys

import ray
from on_node import on_node


def crashes() -> None:
    answer = 42
    raise ValueError(f"probe crash with answer={answer}")


if __name__ == "__main__":
    ray.init()
    ray.get(on_node(sys.argv[1], crashes).remote())
