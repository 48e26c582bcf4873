"""Keep a task busy on each given node (an address may repeat) until the job is stopped."""

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
    # No CPU: they only have to be there, beside whatever else the node runs.
    tasks = [on_node(ip, busy, num_cpus=0).remote() for ip in sys.argv[1:]]
    print("RUNNING", flush=True)
    ray.get(tasks)
