"""The data path verl uses, proven before a job: GPU facts, NCCL settings, a Gloo all-reduce
across the workers (a CPU node and one with stand-in GPUs, said so), a GPU node without CUDA
and a wrong NIC caught fast, and a verl DataProto round trip."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from conftest import Cluster
from nodes import GPU_WORKER, NODES, WORKER
from test_runbook import printed_command, run_printed

# ray_stand_in_gpus: what its nvidia-smi answers is no GPU, and every line of it says so.
STAND_IN_GPUS = "stand-in: 2 x NVIDIA H100 80GB HBM3 (79 GiB), driver 550.54.15, CUDA 12.4"


def collective_check(cluster: Cluster, *extra: str) -> subprocess.CompletedProcess:
    """The runbook's collective-check command, as printed, with `extra` arguments."""
    printed = printed_command(cluster, r"ansible-playbook -i \S+ playbooks/collective_check.yml")
    # A check that hangs instead of failing is the defect this guards against.
    return run_printed(cluster, " ".join([printed, *map(shlex.quote, extra)]), timeout=600)


def needs_verl(cluster: Cluster) -> None:
    if cluster.verl_version is None:
        pytest.skip("this scenario installs no verl, hence no torch")


def test_gpu_facts_reach_the_runbook(cluster: Cluster) -> None:
    runbook = (cluster.artifacts / "RUNBOOK.md").read_text()
    ip = cluster.worker_ips[GPU_WORKER]
    assert f"| {GPU_WORKER} | worker | {ip} | 2 | {STAND_IN_GPUS} |" in runbook
    assert f"| {WORKER} | worker | {cluster.worker_ips[WORKER]} | 0 | no GPUs |" in runbook


@pytest.mark.parametrize("node", NODES)
def test_nccl_settings_without_infiniband(host_of, node) -> None:
    environment = host_of(node).file("/etc/ray-cluster/ray.env").content_string.splitlines()
    assert "NCCL_IB_DISABLE=1" in environment
    assert "NCCL_DEBUG=WARN" in environment


def test_gloo_all_reduce_and_verl_round_trip_across_workers(cluster: Cluster) -> None:
    needs_verl(cluster)
    run = collective_check(cluster)
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, output[-4000:]
    # The GPU worker's GPUs are stand-ins (ray_stand_in_gpus): Gloo there is said, not hidden.
    assert (
        f"{WORKER} <-> {GPU_WORKER} gloo (stand-in GPUs on {GPU_WORKER}: no CUDA, NCCL not "
        f"checked; no GPU on {WORKER}) ok"
    ) in output, output[-4000:]
    # The checks' reports up to the play's next task: no row may claim NCCL ran.
    table = output[output.index("nodes backend result time bus bandwidth") :].split("TASK [")[0]
    assert "nccl" not in table, table
    assert f"{GPU_WORKER} {cluster.worker_ips[GPU_WORKER]} {cluster.verl_version} ok" in output


def test_unmarked_gpu_node_without_cuda_fails(cluster: Cluster) -> None:
    """The GPU worker offers Ray 2 GPUs but its torch is a CPU build: not marked as a stand-in,
    that is verl's NCCL silently becoming Gloo, and the check must fail, saying so."""
    needs_verl(cluster)
    settings = {"ray_checks_collective_stand_ins": [], "ray_checks_verl": False}
    run = collective_check(cluster, "-e", json.dumps(settings))
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, output[-4000:]
    expected = f"FAILED {WORKER} <-> {GPU_WORKER}: {GPU_WORKER} offers 2 GPUs to Ray but torch"
    assert expected in output, output[-4000:]
    assert "sees no CUDA (built for CUDA none" in output
    # Ansible's YAML doubles the apostrophe of "verl's"; the rest reads the same.
    assert "ranks would fall back to Gloo" in output


def test_wrong_interface_fails_fast_with_the_cause(cluster: Cluster) -> None:
    needs_verl(cluster)
    settings = {
        "ray_checks_collective_env": [f"{GPU_WORKER}:GLOO_SOCKET_IFNAME=eth9"],
        "ray_checks_verl": False,
    }
    run = collective_check(cluster, "-e", json.dumps(settings))
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert f"FAILED {WORKER} <-> {GPU_WORKER}: GLOO_SOCKET_IFNAME names an interface" in output, (
        output[-4000:]
    )
    assert f"{GPU_WORKER}: eth9" in output
    assert "set ray_socket_ifname for that host" in output
