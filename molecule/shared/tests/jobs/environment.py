"""Print, as JSON, what a task on each given node sees: its environment, verl, whether it can
read and write a home directory (the test puts HOME_FILE there first), and which modules it
loaded from the venv without current bytecode."""

from __future__ import annotations

import errno
import json
import os
import sys
import sysconfig

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


def current_bytecode(source: str, cached: str) -> bool:
    """Whether `cached` holds the bytecode of `source` as it is now (a timestamp pyc, PEP 552)."""
    try:
        with open(cached, "rb") as pyc:
            header = pyc.read(16)
    except OSError:
        return False
    stat = os.stat(source)
    return (
        int.from_bytes(header[4:8], "little") == 0
        and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )


def uncompiled() -> list[str]:
    """Modules this worker loaded from the venv's packages without current bytecode where it
    reads it: one it could not write is compiled again at every start, by every worker."""
    packages = sysconfig.get_paths()["purelib"]
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if (spec := getattr(module, "__spec__", None))
        and spec.origin
        and spec.origin.startswith(packages)
        and spec.origin.endswith(".py")
        and not current_bytecode(spec.origin, spec.cached or "")
    )


def inspect() -> dict[str, object]:
    return {
        "env": {name: os.environ.get(name) for name in NAMES},
        # Imports verl (and torch) first: the bytecode check covers a verl worker's start.
        "verl": verl_version(),
        "python": sys.executable,
        "pycache_prefix": sys.pycache_prefix,
        "home": home_access(),
        "uncompiled": uncompiled(),
    }


if __name__ == "__main__":
    ray.init()
    seen = {ip: ray.get(on_node(ip, inspect).remote()) for ip in sys.argv[1:]}
    print("RESULT " + json.dumps(seen))
