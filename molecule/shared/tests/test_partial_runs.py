"""Runs that do not reach every node, and a firewall that others flush, never split or open
the cluster. Faults scenario only (marker `faults`): these restart Ray and reload firewalls."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
from conftest import Cluster, alive_nodes, fetched_ray_from_head, record, run_playbook, trusts
from nodes import FABRIC, HEAD, NODES, WORKER
from test_faults import rejoined, runs_a_task, wait_until
from test_mode_switch import converge, documented

pytestmark = pytest.mark.faults
RUNBOOK_UP = r"ansible-playbook -i \S+ cluster-up.yml"


def reaches(host, ip: str, port: int) -> bool:
    """Whether `host` completes a TCP handshake with ip:port within 5 s."""
    return host.run(f"timeout 5 bash -c '</dev/tcp/{ip}/{port}'").rc == 0


def test_limit_run_on_one_worker_keeps_the_cluster_whole(
    cluster: Cluster, host_of, submit, jobs
) -> None:
    """An operator re-applies one worker whose firewall guard someone stopped; the guard runs
    again, every node's firewall still trusts every node, and after Ray restarts on that
    worker, jobs reach every worker."""
    host_of(WORKER).check_output("systemctl stop ray-firewall")
    runbook_up = documented("RUNBOOK.md", RUNBOOK_UP, cluster.mode, cluster)
    converge(runbook_up, "--limit", WORKER)
    assert host_of(WORKER).service("ray-firewall").is_running
    for node in NODES:
        for ip in (cluster.head_ip, *cluster.worker_ips.values(), *FABRIC.values()):
            assert trusts(host_of(node), ip), (node, ip)

    before = alive_nodes(cluster)
    host_of(WORKER).check_output("systemctl restart ray")
    wait_until(rejoined(cluster, before, {cluster.worker_ips[WORKER]}), "worker not back")
    for ip in cluster.worker_ips.values():
        assert runs_a_task(submit, jobs, ip), f"no task ran on {ip}"


def failed_tasks(report: dict) -> set[str]:
    """Names (without the role) of the tasks that failed on any host."""
    return {
        task["task"]["name"].split(" : ", 1)[-1]
        for play in report["plays"]
        for task in play["tasks"]
        if any(result.get("failed") for result in task["hosts"].values())
    }


def test_a_worker_the_head_does_not_trust_yet_installs_from_it(cluster: Cluster, host_of) -> None:
    """A worker that joins in this run is in the head's new rules but not yet in its live
    table (here: a drop rule for it, which loading the rules removes, and a rules file the run
    rewrites). Its venv installs from the head's wheelhouse in the same run: the head loads
    its new rules before it serves. The worker is made bare as a new one would be: no Ray
    running, no venv, no download caches.

    First, the same install on a head that has never served and whose units cannot be written
    (its /etc/systemd/system read-only): serving fails before its unit exists, and that
    failure is the one the run reports, not a second one from stopping a server that never
    was."""
    head, worker = host_of(HEAD), host_of(WORKER)
    address = cluster.worker_ips[WORKER]
    port = cluster.ports["wheelhouse"]
    runbook_up = documented("RUNBOOK.md", RUNBOOK_UP, cluster.mode, cluster)
    since = head.check_output("date '+%Y-%m-%d %H:%M:%S'")
    head.check_output(
        f"nft insert rule inet ray_cluster input ip saddr {address} tcp dport {port} drop"
    )
    head.check_output("echo '# not what cluster-up wrote' >> /etc/ray-cluster/firewall.nft")
    worker.check_output("systemctl stop ray")
    worker.check_output("rm -rf /opt/ray-cluster/venv /var/cache/ray-cluster/uv /root/.cache/pip")

    units = "/etc/systemd/system"
    head.check_output(f"rm {units}/ray-wheelhouse.service && systemctl daemon-reload")
    head.check_output(f"mount --bind {units} {units} && mount -o remount,bind,ro {units}")
    try:
        failed = run_playbook(runbook_up, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    finally:
        head.check_output(f"umount {units}")
    assert failed.returncode != 0, failed.stdout[-3000:]
    assert failed_tasks(json.loads(failed.stdout)) == {
        "Install the wheelhouse server, its unit and its directory"
    }, failed.stdout[-3000:]

    converge(runbook_up)
    assert fetched_ray_from_head(head, address, since=since)


def test_a_failed_batch_stops_the_roll(cluster: Cluster, host_of) -> None:
    """Batches of one worker, and Ray cannot start on any worker: the first batch (the head
    and one worker) fails and the second never starts. The workers' Ray is stopped, so the run
    must start them; the head keeps running."""
    workers = [host_of(name) for name in cluster.worker_ips]
    broken = "/etc/systemd/system/ray.service.d/zz-test-broken.conf"
    for worker in workers:
        worker.check_output(f"mkdir -p {os.path.dirname(broken)}")
        worker.check_output(f"printf '[Service]\\nExecStartPre=/bin/false\\n' > {broken}")
        worker.check_output("systemctl daemon-reload && systemctl stop ray")
    runbook_up = documented("RUNBOOK.md", RUNBOOK_UP, cluster.mode, cluster)
    try:
        run = run_playbook(
            runbook_up, "-e", "ray_worker_batch=1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"
        )
        assert run.returncode != 0, run.stdout[-3000:]
        batches = [
            sorted(set(play["tasks"][0]["hosts"]) - {HEAD})
            for play in json.loads(run.stdout)["plays"]
            if play["play"]["name"] == "Start Ray"
        ]
        assert len(batches) == 1 and len(batches[0]) == 1, batches
        (started,) = batches[0]
        never = next(name for name in cluster.worker_ips if name != started)
        assert not host_of(never).service("ray").is_running
    finally:
        for worker in workers:
            worker.check_output(f"rm -f {broken} && systemctl daemon-reload")
        converge(documented("RUNBOOK.md", RUNBOOK_UP, cluster.mode, cluster))
    assert set(alive_nodes(cluster)) == {cluster.head_ip, *cluster.worker_ips.values()}


@pytest.mark.parametrize("removal", ["systemctl restart nftables", "nft flush ruleset"])
def test_firewall_comes_back_by_itself(cluster: Cluster, host_of, outsider, removal) -> None:
    """Someone else's reload deletes our table: within seconds Ray's ports are filtered again."""
    worker = host_of(WORKER)
    ip, port = cluster.worker_ips[WORKER], int(cluster.ports["node_manager"])
    site_rules = worker.check_output("nft list table inet site_rules")
    try:
        worker.check_output(removal)
        removed = time.monotonic()
        wait_until(
            lambda: worker.run("nft list table inet ray_cluster").rc == 0, "table not restored"
        )
        record(cluster, f"firewall restored after `{removal}`", time.monotonic() - removed)
        assert not reaches(outsider, ip, port)
        socket.create_connection((ip, port), timeout=5).close()
    finally:
        if worker.run("nft list table inet site_rules").rc != 0:
            worker.run_expect([0], f"nft -f - <<'EOF'\n{site_rules}\nEOF")
