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


def test_version_change_stops_everything_then_starts_head_then_workers_one_by_one(
    cluster: Cluster, host_of
) -> None:
    runbook_up = documented(
        "RUNBOOK.md", r"ansible-playbook -i \S+ cluster-up.yml", cluster.mode, cluster
    )
    report, elapsed = converge(
        runbook_up, "-e", f"ray_version={OTHER_RAY}", "-e", "ray_worker_batch=1"
    )
    record(cluster, f"version change to Ray {OTHER_RAY}, batches of 1 worker", elapsed)

    # One play per batch: each batch held exactly one worker.
    batches = [
        sorted(play["tasks"][0]["hosts"])
        for play in report["plays"]
        if play["play"]["name"] == "Start the workers"
    ]
    assert sorted(batches) == [[WORKER], [GPU_WORKER]]

    times = {node: service_times(host_of(node)) for node in NODES}
    head_start = times[HEAD][1]
    # Every old Ray was down before the new head came up: no old worker ever met it.
    assert max(stop for stop, _ in times.values()) < head_start
    first, second = (times[batch[0]][1] for batch in batches)
    assert head_start < first < second

    for node in NODES:
        version = host_of(node).check_output("/opt/ray-cluster/venv/bin/ray --version")
        assert OTHER_RAY in version, (node, version)
    assert set(alive_nodes(cluster)) == {cluster.head_ip, *cluster.worker_ips.values()}
