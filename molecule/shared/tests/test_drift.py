"""Each managed thing changed behind the tool's back, and the runbook's cluster-up repairs
exactly that: a file, Ray's unit, the cluster token (which the probe cannot digest: the
controller's witness must not vouch for it), the firewall's live table, a package of the venv
and a stopped Ray, on the nodes that drifted, restarting Ray only where its unit or packages
changed. What the run would change is read from the nodes (the facts play's probe, the
files' content), not from what an earlier run did.
"""

from __future__ import annotations

import pytest
from conftest import Cluster, alive_nodes
from nodes import GPU_WORKER, HEAD, WORKER
from test_mode_switch import (
    ASK_THE_HEAD,
    PROOF_PLAY,
    WRITE_RAY_FILES,
    converge,
    documented,
    ran_on,
    written_by,
)
from test_nodes import ray_main_pid

pytestmark = pytest.mark.once

RUNTIME_ENV = "/etc/ray-cluster/runtime_env.yaml"
UNIT = "/etc/systemd/system/ray.service"
TOKEN = "/etc/ray-cluster/auth_token"
INSTALL_TOKEN = "Install the cluster token, or remove it where token auth is off"
WRITE_RUNTIME_ENV = "Write runtime_env.yaml and its NCCL debug profile on the head"
TABLE = "inet ray_cluster"
STRANGER = "192.0.2.7"
VENV = "/opt/ray-cluster/venv"
RELOAD_RULES = "Start the firewall, or load its rules or unit again where they or its table changed"
# The head serves the wheelhouse while the worker's package is put back.
WHEELHOUSE_SERVED = {
    "Install the wheelhouse server, its unit and its directory",
    "Send the wheelhouse archive to the head",
    "Start the wheelhouse server",
    "Stop the wheelhouse server",
    "Remove the wheelhouse and its server from the head",
}
# A pure-Python leaf of Ray's own dependencies (virtualenv's), in every lock.
PACKAGE = "distlib"


def changed_on(report: dict) -> set[tuple[str, str]]:
    """(task, host) for every task that changed something, handlers included."""
    return {
        (task["task"]["name"].split(" : ", 1)[-1], host)
        for play in report["plays"]
        for task in play["tasks"]
        for host, result in task["hosts"].items()
        if result.get("changed")
    }


def package_version(host) -> str:
    shown = host.run(f"{VENV}/bin/uv pip show --python {VENV}/bin/python {PACKAGE}")
    return next(
        (line.split()[-1] for line in shown.stdout.splitlines() if line.startswith("Version:")),
        "none",
    )


def test_drift_behind_the_tools_back_is_repaired_and_nothing_else(
    cluster: Cluster, host_of
) -> None:
    head, worker, gpu_worker = host_of(HEAD), host_of(WORKER), host_of(GPU_WORKER)
    kept = {
        "runtime_env": head.file(RUNTIME_ENV).content_string,
        "unit": worker.file(UNIT).content_string,
        "token": worker.file(TOKEN).content_string,
        "table": head.check_output(f"nft --stateless list table {TABLE}"),
        "package": package_version(worker),
    }
    assert kept["package"] != "none"
    head_pid, worker_pid = ray_main_pid(head), ray_main_pid(worker)
    head_id = alive_nodes(cluster)[cluster.head_ip]

    head.run_expect([0], f"echo '# drift' >> {RUNTIME_ENV}")
    head.run_expect([0], f"nft add element {TABLE} trusted_v4 '{{ {STRANGER} }}'")
    worker.run_expect([0], f"echo '# drift' >> {UNIT}")
    worker.run_expect([0], f"printf drift > {TOKEN}")
    worker.run_expect(
        [0], f"{VENV}/bin/uv pip uninstall --quiet --python {VENV}/bin/python {PACKAGE}"
    )
    gpu_worker.run_expect([0], "systemctl stop ray")

    again = documented(
        "RUNBOOK.md", r"ansible-playbook -i \S+ cluster-up.yml -e", cluster.mode, cluster
    )
    report, _ = converge(again)

    assert head.file(RUNTIME_ENV).content_string == kept["runtime_env"]
    assert head.check_output(f"nft --stateless list table {TABLE}") == kept["table"]
    assert worker.file(UNIT).content_string == kept["unit"]
    assert worker.file(TOKEN).content_string == kept["token"] != "drift"
    assert package_version(worker) == kept["package"]
    assert gpu_worker.service("ray").is_running
    # Of Ray's and the head's files, only those that drifted were written.
    assert written_by(report, WRITE_RUNTIME_ENV) == {RUNTIME_ENV}
    assert written_by(report, WRITE_RAY_FILES) == {UNIT}
    changed = changed_on(report)
    assert {host for _, host in changed} <= {HEAD, WORKER, GPU_WORKER, "localhost"}, changed
    assert (WRITE_RUNTIME_ENV, HEAD) in changed
    assert (RELOAD_RULES, HEAD) in changed
    assert ("Sync the venv with the lock", WORKER) in changed
    assert (INSTALL_TOKEN, WORKER) in changed
    assert ("Start Ray and enable it at boot", GPU_WORKER) in changed
    # The head's probe read the GPU worker's Ray stopped: the cluster is proven whole again
    # from the head's node list after the start, not from that reading.
    assert ran_on(report, ASK_THE_HEAD, PROOF_PLAY) == {HEAD}
    # Only the worker whose unit and packages changed restarted; the head kept its Ray.
    assert not any(task.startswith("Stop Ray") and host != WORKER for task, host in changed), (
        changed
    )
    assert ray_main_pid(head) == head_pid
    assert alive_nodes(cluster)[cluster.head_ip] == head_id
    assert ray_main_pid(worker) != worker_pid
    assert {task for task, host in changed if host == HEAD} <= {
        WRITE_RUNTIME_ENV,
        RELOAD_RULES,
        *WHEELHOUSE_SERVED,
    }, changed
