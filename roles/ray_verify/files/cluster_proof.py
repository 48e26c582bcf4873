"""Prove on every alive node that a debugger opens as Ray opens it in MODE, and that CUDA can
use every GPU Ray offers there.

Run by cluster-up on the head with the cluster's Python:
`cluster_proof.py MODE DASHBOARD NAME...`, NAME being every variable a debug mode sets and
DASHBOARD the head's dashboard URL where it serves workers' stacks ("-" where it does not).
One driver runs, concurrently, a debugger task on every alive node and, on every node whose
Ray resources have GPUs, a GPU task that holds all of them. Each debugger task also asks the
dashboard for its own stack, which the node's dashboard agent reads with py-spy. Prints one
JSON object, which the play judges:

    {"debuggers": {node ip: {"ray", "debug_env", "port", "paused", "reserved", "stack",
                             "error"}},
     "gpus": {node ip: GpuReport}}

A GPU report says what the CUDA driver (libcuda.so.1, no torch needed), nvidia-smi and, where
it is installed, torch see inside the task; a task that failed or never finished is
{"error": why} in either map. `debug_env` holds the NAMEs as the task inherited them from
the node's running Ray (null where unset): a Ray that did not restart on its new mode shows.
Each task runs in a worker of its own that exits after it (max_calls=1): the debugger's port
and the GPU contexts go with it, nothing is left behind.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import threading
import traceback
import urllib.error
import urllib.parse
import urllib.request
from typing import TypedDict

import ray
from ray._private.authentication.http_token_authentication import (
    get_auth_headers_if_auth_enabled,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

RESERVED_PORTS = "/proc/sys/net/ipv4/ip_local_reserved_ports"
TIMEOUT_S = 120
# The report's line starts with this (ray_verify's vars read it).
REPORT_MARKER = "PROOF "
# The GPU task waits for every GPU of its node: a job holding one keeps it from starting.
GPU_TIMEOUT_HINT = "; a job holding some of the node's GPUs keeps the GPU task from starting"

CUDA_LIBRARY = "libcuda.so.1"
# CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR in cuda.h.
COMPUTE_MAJOR, COMPUTE_MINOR = 75, 76
PROBE_BYTES = 1 << 20
NVIDIA_SMI_FIELDS = ["index", "name", "pci.bus_id", "memory.total", "driver_version"]
NVIDIA_SMI_QUERY = [
    "nvidia-smi",
    f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}",
    "--format=csv,noheader,nounits",
]


class CudaDevice(TypedDict, total=False):
    """One device as the CUDA driver sees it; `error` is the first call that failed."""

    ordinal: int
    name: str
    bus_id: str
    memory_mib: int
    compute: str
    error: str


class CudaReport(TypedDict, total=False):
    """The driver's view; `error` alone when libcuda cannot be loaded or cuInit fails."""

    driver_version: str
    devices: list[CudaDevice]
    error: str


class SmiReport(TypedDict, total=False):
    """What nvidia-smi printed for NVIDIA_SMI_QUERY and the fields it asked for; `error` alone
    when it did not run or failed. The play reads the rows, with the reader every nvidia-smi
    query shares (plugins/module_utils/nvidia_smi.py), so this script stays one file."""

    fields: list[str]
    csv: str
    error: str


class TorchReport(TypedDict, total=False):
    """torch's view of CUDA, which is verl's; `error` alone when torch fails to import."""

    version: str
    cuda: str | None
    available: bool
    device_count: int
    error: str


class GpuReport(TypedDict):
    """What the GPU task saw."""

    cuda_visible_devices: str | None
    cuda: CudaReport
    nvidia_smi: SmiReport
    torch: TorchReport | None


def read_own_stack(dashboard: str) -> str:
    """ "ok" when the dashboard returns this process's stack, else what it answered."""
    query = urllib.parse.urlencode({"ip": ray.util.get_node_ip_address(), "pid": os.getpid()})
    # The token as Ray's own clients send it, from the task's RAY_AUTH_* environment.
    request = urllib.request.Request(
        f"{dashboard}/worker/traceback?{query}", headers=get_auth_headers_if_auth_enabled({})
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            stack = response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}: {error.read().decode(errors='replace').strip()[-300:]}"
    except OSError as error:
        return f"no answer: {error}"
    if read_own_stack.__name__ not in stack:
        return f"a stack without this task's frame: {stack.strip()[-300:]}"
    return "ok"


def open_debugger(mode: str, mode_names: list[str], dashboard: str | None) -> dict[str, object]:
    report: dict[str, object] = {
        "ray": ray.__version__,
        "debug_env": {name: os.environ.get(name) for name in mode_names},
        "port": None,
        "paused": False,
    }
    if dashboard:
        report["stack"] = read_own_stack(dashboard)
    try:
        with open(RESERVED_PORTS) as reserved:
            report["reserved"] = reserved.read().strip()
        if mode == "post_mortem":
            # Where Ray's debugpy debugger opens its port, before it waits for a client.
            ray.util.debugpy._ensure_debugger_port_open_thread_safe()
            report["port"] = ray._private.worker.global_worker.debugger_port
        elif mode == "legacy":
            # What ray.util.rpdb._connect_ray_pdb builds for --ray-debugger-external.
            from ray._common.network_utils import get_all_interfaces_ip
            from ray.util.rpdb import _RemotePdb

            pdb = _RemotePdb(
                breakpoint_uuid="cluster-up-proof",
                host=get_all_interfaces_ip(),
                port=0,
                ip_address=ray.util.get_node_ip_address(),
            )
            report["port"] = pdb._listen_socket.getsockname()[1]
            pdb._listen_socket.close()
        else:
            # In mode off a forgotten breakpoint() must not wait for a debugger.
            done = threading.Event()
            threading.Thread(target=lambda: (breakpoint(), done.set()), daemon=True).start()
            report["paused"] = not done.wait(10)
    except Exception:  # the play reports it, naming the node and Ray version
        report["error"] = traceback.format_exc(limit=-2).strip().replace("\n", " | ")
    return report


class CudaError(Exception):
    """A driver API call that failed, as 'what: CUDA_ERROR_NAME'."""


def _call(cuda: ctypes.CDLL, function: str, *args: object, what: str = "") -> None:
    code = getattr(cuda, function)(*args)
    if code != 0:
        # cuGetErrorName leaves the name NULL for a code it does not know.
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(code, ctypes.byref(name))
        error = name.value.decode() if name.value else f"CUDA error {code}"
        raise CudaError(f"{what or function}: {error}")


def probe_cuda() -> CudaReport:
    """What the CUDA driver sees, and whether every device takes a 1 MiB allocation."""
    try:
        cuda = ctypes.CDLL(CUDA_LIBRARY)
    except OSError as error:
        return {"error": f"{CUDA_LIBRARY} cannot be loaded: {error}"}
    version, count = ctypes.c_int(), ctypes.c_int()
    try:
        _call(cuda, "cuInit", 0)
        _call(cuda, "cuDriverGetVersion", ctypes.byref(version))
        _call(cuda, "cuDeviceGetCount", ctypes.byref(count))
    except CudaError as error:
        return {"error": str(error)}
    return {
        "driver_version": f"{version.value // 1000}.{version.value % 1000 // 10}",
        "devices": [_probe_device(cuda, ordinal) for ordinal in range(count.value)],
    }


def _probe_device(cuda: ctypes.CDLL, ordinal: int) -> CudaDevice:
    device: CudaDevice = {"ordinal": ordinal}
    handle, memory = ctypes.c_int(), ctypes.c_size_t()
    major, minor = ctypes.c_int(), ctypes.c_int()
    name, bus_id = ctypes.create_string_buffer(256), ctypes.create_string_buffer(32)
    try:
        _call(cuda, "cuDeviceGet", ctypes.byref(handle), ordinal)
        _call(cuda, "cuDeviceGetName", name, len(name), handle)
        device["name"] = name.value.decode(errors="replace")
        _call(cuda, "cuDeviceGetPCIBusId", bus_id, len(bus_id), handle)
        device["bus_id"] = bus_id.value.decode()
        _call(cuda, "cuDeviceTotalMem_v2", ctypes.byref(memory), handle)
        device["memory_mib"] = memory.value >> 20
        _call(cuda, "cuDeviceGetAttribute", ctypes.byref(major), COMPUTE_MAJOR, handle)
        _call(cuda, "cuDeviceGetAttribute", ctypes.byref(minor), COMPUTE_MINOR, handle)
        device["compute"] = f"{major.value}.{minor.value}"
        _prove_usable(cuda, handle)
    except CudaError as error:
        device["error"] = str(error)
    return device


def _prove_usable(cuda: ctypes.CDLL, handle: ctypes.c_int) -> None:
    """Allocate and free 1 MiB in the device's primary context, as torch would."""
    context, pointer = ctypes.c_void_p(), ctypes.c_uint64()
    _call(cuda, "cuDevicePrimaryCtxRetain", ctypes.byref(context), handle)
    try:
        _call(cuda, "cuCtxSetCurrent", context)
        size = ctypes.c_size_t(PROBE_BYTES)
        _call(cuda, "cuMemAlloc_v2", ctypes.byref(pointer), size, what="allocating 1 MiB failed")
        _call(cuda, "cuMemFree_v2", pointer, what="freeing 1 MiB failed")
    finally:
        # What cuda.h calls cuDevicePrimaryCtxRelease since CUDA 11. Its result is not
        # checked: it must not hide the failure above, and the worker exits after the task.
        cuda.cuDevicePrimaryCtxRelease_v2(handle)


def query_nvidia_smi() -> SmiReport:
    """The node's GPUs as nvidia-smi lists them, or why it could not."""
    try:
        done = subprocess.run(
            NVIDIA_SMI_QUERY, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": f"nvidia-smi did not run: {error}"}
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip()[-300:]
        return {"error": f"nvidia-smi exited {done.returncode}: {why}"}
    return {"fields": NVIDIA_SMI_FIELDS, "csv": done.stdout}


def probe_torch() -> TorchReport | None:
    """torch's view of CUDA; None where torch is not installed."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch

        return {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "available": torch.cuda.is_available(),
            "device_count": torch.cuda.device_count(),
        }
    except Exception as error:  # a broken install is the finding, not a crash of the task
        return {"error": f"{type(error).__name__}: {error}"[:500]}


def report_gpus() -> GpuReport:
    """What CUDA, nvidia-smi and torch see of the GPUs Ray gave this task."""
    return {
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda": probe_cuda(),
        "nvidia_smi": query_nvidia_smi(),
        "torch": probe_torch(),
    }


def _outcome(ref: ray.ObjectRef, finished: set[ray.ObjectRef], hint: str) -> object:
    if ref not in finished:
        return {"error": f"the proof task did not finish within {TIMEOUT_S} s{hint}"}
    try:
        return ray.get(ref)
    except Exception as exc:
        return {"error": f"the proof task failed: {exc!r}"[:500]}


def main(mode: str, dashboard: str | None, mode_names: list[str]) -> None:
    ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
    debugger = ray.remote(num_cpus=0, max_calls=1)(open_debugger)
    gpu_task = ray.remote(num_cpus=0, max_calls=1)(report_gpus)
    debuggers, gpus, busy = {}, {}, {}
    # A re-run while a job trains must not fail, nor wait for GPUs the job holds: such a node
    # is reported busy and not checked.
    available = ray._private.state.available_resources_per_node()
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        pinned = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        address = node["NodeManagerAddress"]
        debuggers[address] = debugger.options(scheduling_strategy=pinned).remote(
            mode, mode_names, dashboard
        )
        count = node["Resources"].get("GPU", 0)
        free = available.get(node["NodeID"], {}).get("GPU", 0)
        if 0 < free == count:
            gpus[address] = gpu_task.options(scheduling_strategy=pinned, num_gpus=count).remote()
        elif count > 0:
            busy[address] = {"busy": f"{count - free:g} of its {count:g} GPUs are held by jobs"}
    refs = [*debuggers.values(), *gpus.values()]
    finished = set(ray.wait(refs, num_returns=len(refs), timeout=TIMEOUT_S)[0])
    report = {
        "debuggers": {ip: _outcome(ref, finished, "") for ip, ref in debuggers.items()},
        "gpus": {
            **busy,
            **{ip: _outcome(ref, finished, GPU_TIMEOUT_HINT) for ip, ref in gpus.items()},
        },
    }
    # Marked: the driver also prints the cluster's errors to stdout, such as a node marked
    # dead while cluster-up could not reach it.
    print(REPORT_MARKER + json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], None if sys.argv[2] == "-" else sys.argv[2], sys.argv[3:])
