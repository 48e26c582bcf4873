"""The GPU proof: CUDA itself must use every GPU Ray offers, or cluster-up fails naming why.

Reports are built from roles/ray_verify/files/cluster_proof.py's own structures, the shape
its GPU task prints; the CUDA probe also runs for real on this machine. Every test
here passes with and without a CUDA driver: where one needs libcuda.so.1 absent, it points the
probe at a file that does not exist, since a driver cannot be uninstalled for a test. The probe
against a driver runs on any machine in test_gpu_proof_with_a_driver.py.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cluster_proof as proof
import pytest
import ray_gpu_proof as filters

H100 = "NVIDIA H100 80GB HBM3"
HEALTHY_BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
NODES = {
    "10.0.0.10": {"host": "head", "gpus": 0, "stand_in": False},
    "10.0.0.11": {"host": "gpu1", "gpus": 8, "stand_in": False},
}


def smi_output(buses: list[str], name: str = H100) -> str:
    """What nvidia-smi 550 prints for cluster_proof.NVIDIA_SMI_QUERY."""
    return "".join(
        f"{index}, {name}, 00000000:{bus}:00.0, 81559, 550.54.15\n"
        for index, bus in enumerate(buses)
    )


def device(ordinal: int, bus: str) -> proof.CudaDevice:
    """A healthy device; cuDeviceGetPCIBusId writes a 4-digit domain, nvidia-smi an 8-digit."""
    return proof.CudaDevice(
        ordinal=ordinal, name=H100, bus_id=f"0000:{bus}:00.0", memory_mib=81078, compute="9.0"
    )


def gpu_report(
    devices: list[proof.CudaDevice] | None = None,
    cuda: proof.CudaReport | None = None,
    smi: str = smi_output(HEALTHY_BUSES),
    torch: proof.TorchReport | None = None,
) -> proof.GpuReport:
    if devices is None:
        devices = [device(ordinal, bus) for ordinal, bus in enumerate(HEALTHY_BUSES)]
    report = proof.GpuReport(
        cuda_visible_devices="0,1,2,3,4,5,6,7",
        cuda=cuda or proof.CudaReport(driver_version="12.4", devices=devices),
        nvidia_smi=proof.SmiReport(fields=proof.NVIDIA_SMI_FIELDS, csv=smi),
        torch=torch
        or proof.TorchReport(version="2.6.0+cu121", cuda="12.1", available=True, device_count=8),
    )
    # The play reads the script's printed JSON: judge exactly that.
    return json.loads(json.dumps(report))


def judge(report: Mapping[str, Any] | None, nodes: dict = NODES) -> dict[str, Any]:
    return filters.gpu_proof({} if report is None else {"10.0.0.11": report}, nodes)


def test_a_healthy_eight_gpu_node_passes() -> None:
    judged = judge(gpu_report())
    line = "gpu1: 8 x NVIDIA H100 80GB HBM3, CUDA driver 12.4, torch CUDA 12.1, compute 9.0"
    assert judged == {
        "problems": [],
        "stand_in": [],
        "busy": [],
        "checked": [line],
        "summary": line,
    }


def test_a_node_without_torch_passes_on_cuda_alone() -> None:
    report = gpu_report()
    report["torch"] = None
    assert judge(report)["checked"] == [
        "gpu1: 8 x NVIDIA H100 80GB HBM3, CUDA driver 12.4, no torch, compute 9.0"
    ]


def test_a_gpu_node_without_a_report_fails() -> None:
    judged = judge(None)
    assert judged["problems"] == ["gpu1 (10.0.0.11): no GPU proof came back from this node"]
    assert judged["summary"] == "failed: gpu1"


@pytest.fixture
def without_libcuda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The probe loading a libcuda.so.1 that is not there: dlopen's real failure, on a machine
    with a driver too (a name with a slash is opened as that file, never searched for)."""
    absent = str(tmp_path / "libcuda.so.1")
    monkeypatch.setattr(proof, "CUDA_LIBRARY", absent)
    return absent


def test_libcuda_missing_names_what_nvidia_smi_lists(without_libcuda: str) -> None:
    judged = judge(gpu_report(cuda=proof.probe_cuda()))
    [problem] = judged["problems"]
    assert problem.startswith(
        "gpu1 (10.0.0.11): nvidia-smi lists 8 GPUs but CUDA cannot use them: "
        f"{without_libcuda} cannot be loaded"
    )
    assert problem.endswith("a driver/runtime mismatch, or the driver not loaded")
    assert judged["checked"] == []


def test_cuinit_failure_names_the_cuda_error() -> None:
    cuda = proof.CudaReport(error="cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH")
    assert judge(gpu_report(cuda=cuda))["problems"] == [
        "gpu1 (10.0.0.11): nvidia-smi lists 8 GPUs but CUDA cannot use them: "
        "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH - a driver/runtime mismatch, "
        "or the driver not loaded"
    ]


def test_a_gpu_cuda_cannot_see_is_named_by_its_nvidia_smi_index() -> None:
    devices = [device(o, bus) for o, bus in enumerate(HEALTHY_BUSES) if bus != "5D"]
    assert judge(gpu_report(devices))["problems"] == [
        "gpu1 (10.0.0.11): CUDA sees 7 GPUs where Ray offers 8 "
        "(CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7)",
        "gpu1 (10.0.0.11): GPU 3 (NVIDIA H100 80GB HBM3, bus 00000000:5D:00.0) is listed by "
        "nvidia-smi but CUDA cannot see it: MIG mode, or fallen off the bus",
    ]


def test_a_failed_allocation_names_the_nvidia_smi_index_not_the_cuda_ordinal() -> None:
    # CUDA orders devices fastest first: its ordinal 5 is nvidia-smi's GPU 2 (bus 3A).
    buses = ["18", "2A", "5D", "9A", "AB", "3A", "BA", "DB"]
    devices = [device(ordinal, bus.lower()) for ordinal, bus in enumerate(buses)]
    devices[5]["error"] = "allocating 1 MiB failed: CUDA_ERROR_ECC_UNCORRECTABLE"
    judged = judge(gpu_report(devices))
    assert judged["problems"] == [
        "gpu1 (10.0.0.11): GPU 2 (NVIDIA H100 80GB HBM3): allocating 1 MiB failed: "
        "CUDA_ERROR_ECC_UNCORRECTABLE"
    ]
    assert judged["checked"] == []


def test_without_nvidia_smi_a_device_is_named_by_its_cuda_ordinal() -> None:
    devices = [device(ordinal, bus) for ordinal, bus in enumerate(HEALTHY_BUSES)]
    devices[2]["error"] = "cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY"
    report = gpu_report(devices)
    report["nvidia_smi"] = {"error": "nvidia-smi did not run: [Errno 2] No such file or directory"}
    assert judge(report)["problems"] == [
        "gpu1 (10.0.0.11): CUDA device 2 (NVIDIA H100 80GB HBM3): "
        "cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY"
    ]


def test_nvidia_smi_and_cuda_naming_one_bus_differently_fails() -> None:
    devices = [device(ordinal, bus) for ordinal, bus in enumerate(HEALTHY_BUSES)]
    devices[6]["name"] = "NVIDIA A100-SXM4-80GB"
    assert judge(gpu_report(devices))["problems"] == [
        "gpu1 (10.0.0.11): GPU 6 (bus 00000000:BA:00.0): nvidia-smi names it "
        "'NVIDIA H100 80GB HBM3' but CUDA 'NVIDIA A100-SXM4-80GB': nvidia-smi and "
        "libcuda.so.1 come from different drivers"
    ]


def test_torch_without_cuda_fails_naming_both_versions() -> None:
    torch = proof.TorchReport(version="2.6.0+cu126", cuda="12.6", available=False, device_count=0)
    assert judge(gpu_report(torch=torch))["problems"] == [
        "gpu1 (10.0.0.11): torch 2.6.0+cu126 built for CUDA 12.6 sees no CUDA while the driver "
        "supports 12.4: verl cannot use these GPUs"
    ]


def test_a_task_that_never_ran_reports_why() -> None:
    report = {"error": f"the proof task did not finish within 120 s{proof.GPU_TIMEOUT_HINT}"}
    assert judge(report)["problems"] == [
        "gpu1 (10.0.0.11): the proof task did not finish within 120 s; a job holding some of "
        "the node's GPUs keeps the GPU task from starting"
    ]


def test_a_stand_in_node_is_never_checked_even_when_its_report_passes(
    without_libcuda: str,
) -> None:
    nodes = {**NODES, "10.0.0.11": {"host": "gpu1", "gpus": 8, "stand_in": True}}
    for report in (gpu_report(), gpu_report(cuda=proof.probe_cuda()), None):
        assert judge(report, nodes) == {
            "problems": [],
            "stand_in": ["gpu1"],
            "busy": [],
            "checked": [],
            "summary": "not checked: stand-in: gpu1",
        }


def test_a_node_whose_gpus_jobs_hold_is_not_checked_and_does_not_fail() -> None:
    """A re-run while verl trains: the proof cannot take the GPUs, and says so."""
    judged = judge({"busy": "3 of its 8 GPUs are held by jobs"})
    assert judged["problems"] == [] and judged["checked"] == []
    assert judged["summary"] == "not checked: GPUs in use: gpu1 (3 of its 8 GPUs are held by jobs)"


def test_nodes_without_gpus_are_not_judged() -> None:
    nodes = {"10.0.0.10": {"host": "head", "gpus": 0, "stand_in": False}}
    assert filters.gpu_proof({}, nodes)["summary"] == "no GPU nodes"


def test_proof_nodes_come_from_hostvars_with_stand_in_off_by_default() -> None:
    hosts = [
        {"inventory_hostname": "head", "ray_node_address": "10.0.0.10", "ray_node_gpu_count": 0},
        {
            "inventory_hostname": "w2",
            "ray_node_address": "10.0.0.12",
            "ray_node_gpu_count": "2",
            "ray_stand_in_gpus": "true",
        },
    ]
    assert filters.proof_nodes(hosts) == {
        "10.0.0.10": {"host": "head", "gpus": 0, "stand_in": False},
        "10.0.0.12": {"host": "w2", "gpus": 2, "stand_in": True},
    }


def test_odd_nvidia_smi_output_is_reported_not_raised() -> None:
    cuda = proof.CudaReport(error="cuInit: CUDA_ERROR_NO_DEVICE")
    # The molecule stand-in answers every --query-gpu with ray_facts' four fields.
    four = "0, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
    assert judge(gpu_report(cuda=cuda, smi=four))["problems"] == [
        "gpu1 (10.0.0.11): Ray offers 8 GPUs (unexpected nvidia-smi output: "
        "'0, NVIDIA H100 80GB HBM3, 81559, 550.54.15') but CUDA cannot use them: "
        "cuInit: CUDA_ERROR_NO_DEVICE - a driver/runtime mismatch, or the driver not loaded"
    ]
    assert judge(gpu_report(cuda=cuda, smi=""))["problems"][0].startswith(
        "gpu1 (10.0.0.11): nvidia-smi lists 0 GPUs but CUDA cannot use them"
    )


def test_a_gpu_name_with_a_comma_is_read_whole() -> None:
    """nvidia-smi quotes no value: the name is what lies between the index and the bus id,
    commas and spacing as printed, so it matches the name CUDA gives the same bus."""
    name = "NVIDIA H100,80GB HBM3, vGPU"
    devices = [device(ordinal, bus) for ordinal, bus in enumerate(HEALTHY_BUSES)]
    for gpu in devices:
        gpu["name"] = name
    devices[3]["error"] = "allocating 1 MiB failed: CUDA_ERROR_ECC_UNCORRECTABLE"
    assert judge(gpu_report(devices, smi=smi_output(HEALTHY_BUSES, name)))["problems"] == [
        f"gpu1 (10.0.0.11): GPU 3 ({name}): allocating 1 MiB failed: CUDA_ERROR_ECC_UNCORRECTABLE"
    ]


def _libcuda_loads() -> bool:
    try:
        ctypes.CDLL(proof.CUDA_LIBRARY)
    except OSError:
        return False
    return True


def test_the_real_probe_without_a_driver_says_libcuda_cannot_load(without_libcuda: str) -> None:
    report = proof.report_gpus()
    assert report["cuda"]["error"].startswith(f"{without_libcuda} cannot be loaded: ")
    assert json.loads(json.dumps(report)) == report


@pytest.mark.skipif(not _libcuda_loads(), reason="this machine has no CUDA driver")
def test_the_real_probe_on_a_gpu_uses_every_device() -> None:
    cuda = proof.probe_cuda()
    assert "error" not in cuda, cuda
    assert cuda["devices"], cuda
    for found in cuda["devices"]:
        assert "error" not in found, found
        assert found["name"] and found["bus_id"] and found["compute"], found
