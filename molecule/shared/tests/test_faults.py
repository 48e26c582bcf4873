"""Faults a GPU fleet sees, survived without an operator. Rejoin times are recorded next to
the runbook (timings.jsonl), never asserted; each wait is bounded so a fault that is not
survived fails instead of hanging. Only the `faults` scenario runs these (marker `faults`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import (
    PROJECT,
    Cluster,
    alive_node_ids,
    alive_nodes,
    record,
    run_playbook,
    trusts,
    wait_for_job,
)
from nodes import FABRIC, GPU_WORKER, HEAD, NETWORK, WORKER
from ray.job_submission import JobStatus, JobSubmissionClient
from test_mode_switch import changed_tasks, converge, documented, runs_in, summary_of
from test_runbook import derived, printed_command, run_printed

pytestmark = pytest.mark.faults
REJOIN_TIMEOUT = 300


def wait_until(condition: Callable[[], bool], what: str, poll: float = 1) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < REJOIN_TIMEOUT, f"{what} after {REJOIN_TIMEOUT} s"
        time.sleep(poll)
    return time.monotonic() - started


def all_ips(cluster: Cluster) -> set[str]:
    return {cluster.head_ip, *cluster.worker_ips.values()}


def rejoined(cluster: Cluster, before: dict[str, str], ips: set[str]) -> Callable[[], bool]:
    """Every node alive, and the nodes in `ips` under a new node id (the old one may still
    count as alive beside it)."""

    def check() -> bool:
        now = alive_node_ids(cluster)
        return set(now) >= all_ips(cluster) and all(now[ip] - {before.get(ip)} for ip in ips)

    return check


def runs_a_task(submit: Callable[..., str], jobs: JobSubmissionClient, ip: str) -> bool:
    try:
        return wait_for_job(jobs, submit("environment.py", ip), timeout=60) == JobStatus.SUCCEEDED
    except TimeoutError:
        return False


@pytest.fixture
def whole(cluster: Cluster) -> dict[str, str]:
    """The cluster before a fault: every node alive."""
    wait_until(lambda: set(alive_nodes(cluster)) >= all_ips(cluster), "cluster not whole")
    return alive_nodes(cluster)


def test_worker_raylet_killed_rejoins(cluster: Cluster, host_of, whole) -> None:
    ip = cluster.worker_ips[WORKER]
    # The bracket keeps pkill from matching the shell that runs this very command.
    host_of(WORKER).check_output("pkill -KILL -f '[r]ay/core/src/ray/raylet/raylet'")
    # Polled closely: the new node joins seconds before the head marks the old one dead.
    seconds = wait_until(rejoined(cluster, whole, {ip}), "worker did not rejoin", poll=0.2)
    record(cluster, "fault: worker raylet killed -> rejoined", seconds)
    # The node's configuration is intact, so nothing changes; but the Ray there is not the
    # one the last run proved, so the runbook's re-run proves again rather than reuse it.
    # Run at once, it finds the old node still alive beside the new one, and waits that out
    # before the proof pins a task to each node (tests/unit/test_filters.py).
    again = documented(
        "RUNBOOK.md", r"ansible-playbook -i \S+ cluster-up.yml -e", cluster.mode, cluster
    )
    report, _ = converge(again)
    assert changed_tasks(report) == set()
    assert "Proof: run now" in summary_of(report)


def test_head_killed_every_worker_rejoins(cluster: Cluster, host_of, whole) -> None:
    host_of(HEAD).check_output("systemctl kill --signal=KILL ray")
    seconds = wait_until(rejoined(cluster, whole, all_ips(cluster)), "cluster did not re-form")
    record(cluster, "fault: head Ray killed -> all rejoined", seconds)


def test_worker_down_is_named_in_the_evidence_then_comes_back(
    cluster: Cluster, host_of, whole
) -> None:
    """A worker that is down: the runbook's evidence line (the whole session, no job) still
    gathers the others and names it; booted again, it rejoins in the same mode."""
    ip = cluster.worker_ips[GPU_WORKER]
    subprocess.run(["docker", "stop", GPU_WORKER], check=True, capture_output=True, timeout=120)
    try:
        index = session_evidence(cluster)
    finally:
        started = time.monotonic()
        subprocess.run(
            ["docker", "start", GPU_WORKER], check=True, capture_output=True, timeout=120
        )
    assert index["nodes"][GPU_WORKER]["status"] == "unreachable", index["nodes"][GPU_WORKER]
    for node in (HEAD, WORKER):
        parts = index["nodes"][node]["index"]["parts"]
        assert parts["ray-logs"]["files"] and parts["journal"]["files"], (node, parts)
    wait_until(rejoined(cluster, whole, {ip}), "rebooted worker did not rejoin")
    record(cluster, "fault: worker rebooted -> rejoined", time.monotonic() - started)
    assert runs_in(host_of(GPU_WORKER), cluster.mode)
    assert "table inet ray_cluster" in host_of(GPU_WORKER).check_output("nft list tables")


def session_evidence(cluster: Cluster) -> dict:
    """The runbook's evidence line without a job (every log of the session): its index."""
    line = printed_command(cluster, r"ansible-playbook -i \S+ playbooks/evidence\.yml")
    text = derived(line, line.split(" -e ray_evidence_job=")[0])
    run = run_printed(cluster, text, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    path = re.search(r"Evidence: (\S+\.tar\.gz)", run.stdout)
    assert path, run.stdout[-4000:]
    with tarfile.open(path.group(1)) as archive:
        index = archive.extractfile("index.json")
        assert index is not None
        return json.load(index)


def test_worker_cut_off_for_a_minute_during_cluster_up(
    cluster: Cluster, whole, host_of, submit, jobs
) -> None:
    """A worker cut off the network for a minute, while cluster-up runs: the run names it
    unreachable and only it, the others' firewalls keep trusting it (its addresses come from
    nodes.json), and it runs tasks again when the network returns."""
    ip = cluster.worker_ips[GPU_WORKER]
    subprocess.run(["docker", "network", "disconnect", NETWORK, GPU_WORKER], check=True, timeout=60)
    cut = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(
                run_playbook,
                "ansible-playbook",
                "-i",
                os.environ["MOLECULE_INVENTORY_FILE"],
                str(PROJECT / "molecule/shared/converge.yml"),
                cwd=None,
                ANSIBLE_FORCE_COLOR="0",
                ANSIBLE_NOCOLOR="1",
            )
            # Whether the head declares the node dead within the minute depends on Ray's
            # health check settings; it is recorded, not required.
            while ip in alive_nodes(cluster) and time.monotonic() - cut < 60:
                time.sleep(1)
            noticed = time.monotonic() - cut
            run = running.result()
        time.sleep(max(0.0, 60 - (time.monotonic() - cut)))
    finally:
        subprocess.run(
            ["docker", "network", "connect", "--ip", ip, NETWORK, GPU_WORKER], check=True
        )
    back = time.monotonic()
    record(cluster, "fault: worker cut off -> head noticed (60 = not within the minute)", noticed)
    output = run.stdout
    assert run.returncode != 0
    # The controller reaches the nodes over SSH, as on real nodes: the cut-off one must be
    # named UNREACHABLE, and only it.
    recap_lines = output.split("PLAY RECAP", 1)[1].splitlines()
    recap = {
        name.strip(): counts
        for name, counts in (line.split(":", 1) for line in recap_lines if ":" in line)
    }
    assert "unreachable=1" in recap[GPU_WORKER], recap
    for node in (HEAD, WORKER):
        assert "failed=0" in recap[node] and "unreachable=0" in recap[node], recap
    assert f"Not reached during this run: {GPU_WORKER}" in output, output[-3000:]
    for node in (HEAD, WORKER):
        for address in (ip, FABRIC[GPU_WORKER]):
            assert trusts(host_of(node), address), (node, address)
    # Alive in the state API is not enough (a stale record can say so): a task must run there.
    wait_until(lambda: runs_a_task(submit, jobs, ip), "cut-off worker runs no task")
    record(cluster, "fault: worker cut off 60 s -> runs tasks again", time.monotonic() - back)
