"""Judge the GPU half of roles/ray_verify/files/cluster_proof.py's report.

Ray's GPU resource is only the count cluster-up passed to `ray start --num-gpus`. The proof's
GPU task holds all of a node's GPUs and reports what the CUDA driver, nvidia-smi and torch
see there; these filters compare that with the count, so a GPU CUDA cannot use fails the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.verl_debug.cluster.plugins.module_utils.nvidia_smi import query_rows

Report = Mapping[str, Any]


def proof_nodes(hosts: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{address: {"host", "gpus", "stand_in"}} from the hostvars of the cluster's nodes."""
    return {
        str(host["ray_node_address"]): {
            "host": str(host["inventory_hostname"]),
            "gpus": int(host["ray_node_gpu_count"]),
            "stand_in": boolean(host.get("ray_stand_in_gpus", False)),
        }
        for host in hosts
    }


def gpu_proof(
    report: Mapping[str, Report], nodes: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Judge the report's "gpus" map, {node ip: GPU report}, against `nodes` (proof_nodes).

    Returns `problems` (the run fails), `stand_in` (hosts whose GPUs are stand-ins, never
    judged), `busy` (hosts whose GPUs jobs held, so the proof could not take them),
    `checked` (one line per GPU node that passed) and `summary` (one line for the play's
    summary). Nodes without GPUs in Ray are not judged.
    """
    problems: list[str] = []
    stand_in: list[str] = []
    busy: list[str] = []
    checked: list[str] = []
    failed: list[str] = []
    for address, node in sorted(nodes.items()):
        host, gpus = str(node["host"]), int(node["gpus"])
        if gpus <= 0:
            continue
        if node.get("stand_in"):
            stand_in.append(host)
            continue
        if (report.get(address) or {}).get("busy"):
            busy.append(f"{host} ({report[address]['busy']})")
            continue
        found = node_problems(report.get(address), gpus)
        problems += [f"{host} ({address}): {problem}" for problem in found]
        if found:
            failed.append(host)
        else:
            checked.append(f"{host}: {checked_line(report[address])}")
    parts = [*checked]
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    if busy:
        parts.append(f"not checked: GPUs in use: {', '.join(busy)}")
    if stand_in:
        parts.append(f"not checked: stand-in: {', '.join(stand_in)}")
    return {
        "problems": problems,
        "stand_in": stand_in,
        "busy": busy,
        "checked": checked,
        "summary": "; ".join(parts) or "no GPU nodes",
    }


def node_problems(gpu_report: Report | None, ray_gpus: int) -> list[str]:
    """Why CUDA on one node cannot use the `ray_gpus` GPUs Ray offers there, if it cannot."""
    if gpu_report is None:
        return ["no GPU proof came back from this node"]
    if gpu_report.get("error"):
        return [str(gpu_report["error"])]
    smi = _nvidia_smi_rows(gpu_report.get("nvidia_smi") or {})
    listed: list[Report] = smi if isinstance(smi, list) else []
    cuda: Report = gpu_report.get("cuda") or {}
    if cuda.get("error"):
        seen = (
            f"nvidia-smi lists {len(listed)} GPUs"
            if isinstance(smi, list)
            else f"Ray offers {ray_gpus} GPUs ({smi})"
        )
        return [
            f"{seen} but CUDA cannot use them: {cuda['error']} - a driver/runtime mismatch, "
            "or the driver not loaded"
        ]
    devices: list[Report] = cuda.get("devices", [])
    by_bus = {_bus_id(gpu["pci.bus_id"]): gpu for gpu in listed}
    problems = []
    if len(devices) != ray_gpus:
        problems.append(
            f"CUDA sees {len(devices)} GPUs where Ray offers {ray_gpus} "
            f"(CUDA_VISIBLE_DEVICES={gpu_report.get('cuda_visible_devices')})"
        )
        seen_buses = {_bus_id(device.get("bus_id", "")) for device in devices}
        problems += [
            f"GPU {gpu['index']} ({gpu['name']}, bus {gpu['pci.bus_id']}) is listed by nvidia-smi "
            "but CUDA cannot see it: MIG mode, or fallen off the bus"
            for gpu in listed
            if _bus_id(gpu["pci.bus_id"]) not in seen_buses
        ]
    for device in devices:
        problems += _device_problems(device, by_bus.get(_bus_id(device.get("bus_id", ""))))
    torch: Report | None = gpu_report.get("torch")
    if torch and torch.get("error"):
        problems.append(f"torch is installed but fails to import: {torch['error']}")
    elif torch and not torch.get("available"):
        problems.append(
            f"torch {torch.get('version')} built for CUDA {torch.get('cuda') or 'none (CPU)'} "
            f"sees no CUDA while the driver supports {cuda.get('driver_version')}: "
            "verl cannot use these GPUs"
        )
    return problems


def _nvidia_smi_rows(smi: Report) -> list[dict[str, str]] | str:
    """The GPUs nvidia-smi listed in the GPU task, {field: value}, or why there are none."""
    if "csv" not in smi:
        return str(smi.get("error"))
    try:
        return query_rows(smi["csv"], smi["fields"])
    except ValueError as error:
        return str(error)


def _device_problems(device: Report, listed: Report | None) -> list[str]:
    """A CUDA device that failed a call, or that nvidia-smi names otherwise at its bus id."""
    # nvidia-smi's index is the one operators see; CUDA's ordinal may order GPUs otherwise.
    label = f"GPU {listed['index']}" if listed else f"CUDA device {device['ordinal']}"
    name = device.get("name") or (listed or {}).get("name", "?")
    problems = []
    if device.get("error"):
        problems.append(f"{label} ({name}): {device['error']}")
    if listed and device.get("name") and listed["name"] != device["name"]:
        problems.append(
            f"{label} (bus {listed['pci.bus_id']}): nvidia-smi names it {listed['name']!r} but "
            f"CUDA {device['name']!r}: nvidia-smi and libcuda.so.1 come from different drivers"
        )
    return problems


def _bus_id(text: str) -> str:
    """One key for nvidia-smi's '00000000:3B:00.0' and CUDA's '0000:3b:00.0'."""
    domain, _, rest = str(text).strip().lower().partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return str(text).strip().lower()


def checked_line(gpu_report: Report) -> str:
    """'8 x NAME, CUDA driver 12.4, torch CUDA 12.1, compute 9.0' for a node that passed."""
    cuda = gpu_report["cuda"]
    devices = cuda["devices"]
    torch = gpu_report.get("torch")
    names = " + ".join(sorted({device["name"] for device in devices}))
    computes = " + ".join(sorted({device["compute"] for device in devices}))
    torch_cuda = f"torch CUDA {torch.get('cuda')}" if torch else "no torch"
    return (
        f"{len(devices)} x {names}, CUDA driver {cuda['driver_version']}, {torch_cuda}, "
        f"compute {computes}"
    )


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_gpu_proof_nodes": proof_nodes,
            "ray_gpu_proof": gpu_proof,
        }
