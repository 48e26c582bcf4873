"""Print, as JSON, what a task on each given node sees: its environment, verl, and whether
it can read and write a home directory (the test puts HOME_FILE there first)."""

from __future__ import annotations

import errno
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


HOME_FILE = "/home/models/model.bin"


def home_access() -> dict[str, object]:
    """Whether HOME_FILE reads, and the errno name of writing beside it (None if it works)."""
    try:
        with open(HOME_FILE, "rb"):
            readable = True
    except OSError:
        readable = False
    try:
        with open(os.path.join(os.path.dirname(HOME_FILE), "checkpoint.pt"), "wb"):
            written = None
    except OSError as error:
        written = errno.errorcode.get(error.errno or 0, str(error))
    return {"read": readable, "write": written}


def inspect() -> dict[str, object]:
    return {
        "env": {name: os.environ.get(name) for name in NAMES},
        "verl": verl_version(),
        "python": sys.executable,
        "home": home_access(),
    }


if __name__ == "__main__":
    ray.init()
    seen = {ip: ray.get(on_node(ip, inspect).remote()) for ip in sys.argv[1:]}
    print("RESULT " + json.dumps(seen))
