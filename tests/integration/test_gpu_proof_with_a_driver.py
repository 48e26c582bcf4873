"""The GPU proof's CUDA probe against a driver, on any machine: a stand-in libcuda.so.1
(fixtures/libcuda_stub.c, built here with gcc) answers the driver API calls the probe makes,
loaded by LD_LIBRARY_PATH ahead of a real driver, so this runs the same on a GPU host. Its
failures (STUB_CUDA_FAIL) are the driver's own codes, named through cuGetErrorName as a real
driver names them. test_gpu_proof.py covers the machine without a driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import ray_gpu_proof as filters
from cluster_proof import NVIDIA_SMI_FIELDS

PROJECT = Path(__file__).resolve().parents[2]
STUB = PROJECT / "tests/fixtures/libcuda_stub.c"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def stub_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the stand-in libcuda.so.1."""
    gcc = shutil.which("gcc")
    if gcc is None:
        # A skip would hide the whole driver path: a machine that runs the unit tests has gcc
        # (make's prerequisites install it).
        pytest.fail("gcc is needed to build the stand-in libcuda.so.1: tools/prerequisites.sh gcc")
    directory = tmp_path_factory.mktemp("libcuda")
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o",
         str(directory / "libcuda.so.1"), str(STUB)],
        check=True,
        timeout=60,
    )  # fmt: skip
    return directory


def probe(stub_driver: Path, **stub: str) -> dict[str, Any]:
    """cluster_proof.probe_cuda()'s report in a fresh interpreter: ld.so reads
    LD_LIBRARY_PATH once, at start."""
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(stub_driver),
        "PYTHONPATH": str(PROJECT / "roles/ray_verify/files"),
        **stub,
    }
    done = subprocess.run(
        [sys.executable, "-c",
         "import json, cluster_proof; print(json.dumps(cluster_proof.probe_cuda()))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )  # fmt: skip
    return json.loads(done.stdout)


def judge(cuda: dict[str, Any], gpus: int) -> dict[str, Any]:
    """The filter's verdict on a node with `gpus` GPUs whose nvidia-smi lists the same buses
    as the stub's devices (0000:18:00.0 onward)."""
    smi = "".join(
        f"{i}, {H100}, 00000000:{0x18 + i:02X}:00.0, 81559, 550.54.15\n" for i in range(gpus)
    )
    report = {
        "cuda_visible_devices": ",".join(map(str, range(gpus))),
        "cuda": cuda,
        "nvidia_smi": {"fields": NVIDIA_SMI_FIELDS, "csv": smi},
        "torch": None,
    }
    nodes = {"10.0.0.11": {"host": "gpu1", "gpus": gpus, "stand_in": False}}
    return filters.gpu_proof({"10.0.0.11": report}, nodes)


def test_the_probe_uses_every_device_the_driver_has(stub_driver: Path) -> None:
    cuda = probe(stub_driver, STUB_CUDA_DEVICES="2")
    assert cuda == {
        "driver_version": "12.4",
        "devices": [
            {"ordinal": i, "name": H100, "bus_id": f"0000:{0x18 + i:02X}:00.0",
             "memory_mib": 81078, "compute": "9.0"}
            for i in range(2)
        ],
    }  # fmt: skip
    assert judge(cuda, 2)["checked"] == [
        "gpu1: 2 x NVIDIA H100 80GB HBM3, CUDA driver 12.4, no torch, compute 9.0"
    ]


def test_cuinit_failing_is_named_by_the_drivers_error_name(stub_driver: Path) -> None:
    cuda = probe(stub_driver, STUB_CUDA_FAIL="cuInit:803")
    assert cuda == {"error": "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"}
    assert judge(cuda, 2)["problems"] == [
        "gpu1 (10.0.0.11): nvidia-smi lists 2 GPUs but CUDA cannot use them: "
        "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH - a driver/runtime mismatch, "
        "or the driver not loaded"
    ]


def test_one_device_failing_its_allocation_fails_the_proof_naming_it(stub_driver: Path) -> None:
    cuda = probe(stub_driver, STUB_CUDA_DEVICES="2", STUB_CUDA_FAIL="cuMemAlloc_v2:214:1")
    assert "error" not in cuda["devices"][0]
    assert cuda["devices"][1]["error"] == "allocating 1 MiB failed: CUDA_ERROR_ECC_UNCORRECTABLE"
    judged = judge(cuda, 2)
    assert judged["problems"] == [
        "gpu1 (10.0.0.11): GPU 1 (NVIDIA H100 80GB HBM3): allocating 1 MiB failed: "
        "CUDA_ERROR_ECC_UNCORRECTABLE"
    ]
    assert judged["checked"] == []


def test_an_error_code_the_driver_cannot_name_is_reported_by_number(stub_driver: Path) -> None:
    cuda = probe(stub_driver, STUB_CUDA_FAIL="cuDeviceGetCount:999")
    assert cuda == {"error": "cuDeviceGetCount: CUDA error 999"}


def test_fewer_devices_than_ray_offers_fails(stub_driver: Path) -> None:
    cuda = probe(stub_driver, STUB_CUDA_DEVICES="1")
    problems = judge(cuda, 2)["problems"]
    assert problems[0] == (
        "gpu1 (10.0.0.11): CUDA sees 1 GPUs where Ray offers 2 (CUDA_VISIBLE_DEVICES=0,1)"
    )
