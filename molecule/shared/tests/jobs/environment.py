"""Print, as JSON, what a task on each given node sees: its environment and verl."""

from __future__ import annotations

import json
import os
import sys

import ray
from on_node import on_node

NAMES = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "RAY_DEBUG",
    "RAY_DEBUG_POST_MORTEM",
    "RAY_DEBUGGER_PORT_RANGE",
)


def verl_version() -> str | None:
    try:
        import verl
    except ImportError:
        return None
    return verl.__version__


def inspect() -> dict[str, object]:
    return {
        "env": {name: os.environ.get(name) for name in NAMES},
        "verl": verl_version(),
        "python": sys.executable,
    }


if __name__ == "__main__":
    ray.init()
    seen = {ip: ray.get(on_node(ip, inspect).remote()) for ip in sys.argv[1:]}
    print("RESULT " + json.dumps(seen))
