"""cluster-down.yml stops Ray everywhere; with ray_purge it removes what cluster-up installed
and nothing else. Runs last: it takes the cluster down."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import PROJECT

NODES = ("rc-head", "rc-worker1", "rc-worker2")


def cluster_down(*extra: str) -> str:
    run = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            os.environ["MOLECULE_INVENTORY_FILE"],
            str(PROJECT / "cluster-down.yml"),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run.stdout


@pytest.fixture(scope="module")
def purged() -> list[str]:
    return [cluster_down("-e", "ray_purge=true"), cluster_down("-e", "ray_purge=true")]


@pytest.mark.parametrize("node", NODES)
def test_purge_removes_ours_and_keeps_the_hosts(purged, host_of, node) -> None:
    host = host_of(node)
    assert not host.service("ray").is_running
    assert not host.file("/etc/systemd/system/ray.service").exists
    assert not host.file("/opt/ray-cluster").exists
    assert not host.file("/usr/local/bin/ray").exists
    assert not host.file("/etc/ray-cluster").exists
    assert not host.user("ray").exists
    tables = host.check_output("nft list tables")
    assert "ray_cluster" not in tables
    assert "table inet site_rules" in tables


def test_second_purge_changes_nothing(purged) -> None:
    recap = purged[1].split("PLAY RECAP", 1)[1]
    assert recap.count("changed=0") == len(NODES), recap
