"""A Ray version change rolls through the cluster without two versions ever running together.

Runs in the faults scenario (marker `faults`), last (file order), because it replaces Ray on
every node: the runbook's command with another ray_version and batches of one worker.
Systemd's monotonic timestamps are comparable across the containers (one kernel), so the
order of stops and starts is read back from the nodes themselves.
"""

from __future__ import annotations

import pytest
from conftest import Cluster, alive_nodes, record
from nodes import GPU_WORKER, HEAD, NODES, WORKER
from test_mode_switch import converge, documented

pytestmark = pytest.mark.faults
OTHER_RAY = "2.59.0"


def service_times(host) -> tuple[int, int]:
    """(last stop, last start) of the Ray unit, in microseconds of the shared monotonic clock."""
    shown = host.check_output(
        "systemctl show ray -p InactiveEnterTimestampMonotonic -p ActiveEnterTimestampMonotonic"
    )
    values = dict(line.split("=", 1) for line in shown.splitlines())
    return int(values["InactiveEnterTimestampMonotonic"]), int(
        values["ActiveEnterTimestampMonotonic"]
    )


def test_version_change_stops_everything_then_starts_batch_by_batch_the_head_in_the_first(
    cluster: Cluster, host_of
) -> None:
    runbook_up = documented(
        "RUNBOOK.md", r"ansible-playbook -i \S+ cluster-up.yml", cluster.mode, cluster
    )
    report, elapsed = converge(
        runbook_up, "-e", f"ray_version={OTHER_RAY}", "-e", "ray_worker_batch=1"
    )
    record(cluster, f"version change to Ray {OTHER_RAY}, batches of 1 worker", elapsed)

    # One play per batch: the head with one worker, then the other worker.
    batches = [
        list(play["tasks"][0]["hosts"])
        for play in report["plays"]
        if play["play"]["name"] == "Start Ray"
    ]
    assert [len(batch) for batch in batches] == [2, 1] and HEAD in batches[0], batches
    (first,) = set(batches[0]) - {HEAD}
    (second,) = batches[1]
    assert {first, second} == {WORKER, GPU_WORKER}

    times = {node: service_times(host_of(node)) for node in NODES}
    # Every old Ray was down before any new one came up: no old worker ever met the new head.
    assert max(stop for stop, _ in times.values()) < min(start for _, start in times.values())
    # The second batch starts once the first (the head among them) is alive.
    assert max(times[HEAD][1], times[first][1]) < times[second][1]

    for node in NODES:
        version = host_of(node).check_output("/opt/ray-cluster/venv/bin/ray --version")
        assert OTHER_RAY in version, (node, version)
    assert set(alive_nodes(cluster)) == {cluster.head_ip, *cluster.worker_ips.values()}
