"""cluster-down as README.md and the runbook print it: without ray_purge it stops and disables
Ray and leaves it installed; with ray_purge it removes what cluster-up installed and nothing
else; and cluster-up right after a purge brings the cluster back. Runs last: it takes the
cluster down."""

from __future__ import annotations

import re

import pytest
from conftest import Cluster, alive_nodes, run_playbook
from nodes import NODES
from test_mode_switch import documented

STOP = r"ansible-playbook -i \S+ cluster-down.yml$"
PURGE = r"ansible-playbook -i \S+ cluster-down.yml -e ray_purge=true$"
RESERVED_PORTS = "/proc/sys/net/ipv4/ip_local_reserved_ports"
pytestmark = pytest.mark.once


def run_documented(text: str) -> str:
    run = run_playbook(text, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run.stdout


def command(source: str, pattern: str, cluster: Cluster) -> str:
    return documented(source, pattern, cluster.mode, cluster)


@pytest.fixture(scope="module")
def downed(cluster: Cluster, host_of) -> dict:
    """Each document's stop, the nodes as they were left, then each document's purge."""
    for source in ("README.md", "RUNBOOK.md"):
        run_documented(command(source, STOP, cluster))
    stopped = {
        node: (
            host_of(node).service("ray").is_running,
            host_of(node).service("ray").is_enabled,
            host_of(node).file("/opt/ray-cluster/venv/bin/ray").exists,
            host_of(node).file(RESERVED_PORTS).content_string.strip(),
        )
        for node in NODES
    }
    purged = [
        run_documented(command(source, PURGE, cluster)) for source in ("README.md", "RUNBOOK.md")
    ]
    return {"stopped": stopped, "purged": purged}


@pytest.mark.parametrize("node", NODES)
def test_stop_leaves_ray_installed_but_stopped(downed, node) -> None:
    running, enabled, installed, reserved = downed["stopped"][node]
    assert (running, enabled, installed) == (False, False, True)
    # The debugger range goes back to the kernel; the operator's own reservation stays.
    assert reserved == "40000"


@pytest.mark.parametrize("node", NODES)
def test_purge_removes_ours_and_keeps_the_hosts(downed, host_of, node) -> None:
    host = host_of(node)
    assert not host.service("ray").is_running
    assert not host.file("/etc/systemd/system/ray.service").exists
    # The head's wheelhouse server (roles/wheelhouse): its unit and its cache.
    assert not host.file("/etc/systemd/system/ray-wheelhouse.service").exists
    assert not host.file("/var/cache/ray-cluster").exists
    assert not host.file("/opt/ray-cluster").exists
    assert not host.file("/usr/local/bin/ray").exists
    assert not host.file("/etc/ray-cluster").exists
    assert not host.file("/etc/tmpfiles.d/ray-cluster.conf").exists
    assert not host.user("ray").exists
    tables = host.check_output("nft list tables")
    assert "ray_cluster" not in tables
    assert "table inet site_rules" in tables
    assert host.user("operator").exists


def test_second_purge_changes_nothing(downed) -> None:
    """Every node's recap, and the controller's (the validate play), says changed=0."""
    recap = downed["purged"][1].split("PLAY RECAP", 1)[1]
    changed = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", recap, re.MULTILINE))
    assert set(NODES) <= set(changed) and set(changed.values()) == {"0"}, recap


@pytest.mark.faults
def test_purge_then_up_in_one_run(cluster: Cluster) -> None:
    """Starting fresh: the runbook's purge, then README's cluster-up, each run once."""
    run_documented(command("RUNBOOK.md", PURGE, cluster))
    run_documented(command("README.md", r"ansible-playbook -i \S+ cluster-up.yml$", cluster))
    assert set(alive_nodes(cluster)) == {cluster.head_ip, *cluster.worker_ips.values()}
