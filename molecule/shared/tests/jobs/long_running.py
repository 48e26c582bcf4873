"""Keep a task busy on the given node until the job is stopped."""

from __future__ import annotations

import sys
import time

import ray
from on_node import on_node


def busy() -> None:
    while True:
        time.sleep(1)


if __name__ == "__main__":
    ray.init()
    task = on_node(sys.argv[1], busy).remote()
    print("RUNNING", flush=True)
    ray.get(task)
