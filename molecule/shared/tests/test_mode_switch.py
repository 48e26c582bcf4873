"""Re-running cluster-up with the other debug mode switches in place: only Ray restarts.

Runs the documented commands (README.md's and the runbook's, by their text) against the
molecule inventory, to the other mode, and checks which tasks changed. Timings are recorded
next to the runbook, never asserted. The switch leaves the cluster in the other mode, so it
runs after every test that needs the scenario's own (conftest.py orders it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from pathlib import Path

import pytest
from bounded import PLAYBOOK_LIMIT_S, run_until_cut
from conftest import PROJECT, Cluster, record, run_playbook, wait_for_log
from nodes import GPU_WORKER, HEAD, NODES
from ray.job_submission import JobStatus
from test_data_path import STAND_IN_GPUS
from test_debugger import ROUND_TRIPS
from test_hang import a_waiting_rank_debugged
from test_nodes import MODE_ENV
from test_runbook import commands, derived, find_and_attach, printed

# The reader's inventory in README.md's commands; the tests put theirs there.
README_INVENTORY = "inventory/mycluster/hosts.yml"

# A task after every node's new unit and environment are written, before any stop.
CUT_AT = "TASK [verl_debug.cluster.ray_service : Install the cluster token"
OTHER_MODE = {"legacy": "post_mortem", "post_mortem": "legacy", "off": "post_mortem"}
# A mode switch may rewrite Ray's environment and unit and restart it on the nodes, and
# rewrite the runbook on the controller; nothing else.
WRITE_RAY_FILES = "Write Ray's environment, unit, temp and dump directories and login profile"
SWITCH_TASKS = {
    WRITE_RAY_FILES,
    "Stop Ray on the workers",
    "Stop Ray on the head",
    "Start Ray and enable it at boot",
    "Write the runbook",
}
# ray_defaults' request for the head's node list (every wait's), and the play where
# ray_verify makes it, where the head's probe's reading does not hold.
ASK_THE_HEAD = "Ask the head for its nodes"
PROOF_PLAY = "Prove the cluster is whole and write the runbook"
# Of Ray's files, the switch changes what carries the mode: its environment, its unit (the
# start flags) and the login shells' environment.
SWITCH_PATHS = {
    "/etc/ray-cluster/ray.env",
    "/etc/systemd/system/ray.service",
    "/etc/profile.d/ray-cluster.sh",
}


def converge(text: str, *extra: str) -> tuple[dict, float]:
    """Run a documented cluster-up command from the checkout, with `extra` arguments.

    Returns the JSON callback's report, which holds every task's full result, and seconds.
    """
    started = time.monotonic()
    run = run_playbook(
        text,
        *extra,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        # The headline command names no inventory: ansible.cfg's, or this one's.
        ANSIBLE_INVENTORY=os.environ["MOLECULE_INVENTORY_FILE"],
    )
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # Every task's full result is in that output: the token must be in none of them.
    if os.environ.get("RAY_AUTH_MODE") == "token":
        token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        assert token not in run.stdout + run.stderr
    return json.loads(run.stdout), elapsed


def documented(source: str, pattern: str, debug_mode: str, cluster: Cluster) -> str:
    """A cluster-up command of README.md or the runbook, for `debug_mode` on this inventory."""
    if source == "README.md":
        texts = commands((PROJECT / "README.md").read_text())
    else:
        texts = printed(cluster)
    found = [text for text in texts if re.match(pattern, text)]
    assert len(found) == 1, f"{source}: commands matching {pattern!r}: {found}"
    text = found[0].replace(README_INVENTORY, os.environ["MOLECULE_INVENTORY_FILE"])
    return derived(found[0], re.sub(r"debug_mode=\S+", f"debug_mode={debug_mode}", text))


def changed_task_names(report: dict) -> set[str]:
    """Full names (ROLE : task) of the tasks that changed something on any host."""
    return {
        task["task"]["name"]
        for play in report["plays"]
        for task in play["tasks"]
        if any(result.get("changed") for result in task["hosts"].values())
    }


def changed_tasks(report: dict) -> set[str]:
    return {name.split(" : ", 1)[-1] for name in changed_task_names(report)}


def summary_of(report: dict) -> list[str]:
    """The lines cluster-up ends with ("Show the cluster summary")."""
    return [
        line
        for play in report["plays"]
        for task in play["tasks"]
        if task["task"]["name"].endswith("Show the cluster summary")
        for result in task["hosts"].values()
        for line in result["msg"]
    ]


def written_by(report: dict, task: str) -> set[str]:
    """The paths a node_files task changed, on any host."""
    return {
        path
        for play in report["plays"]
        for each in play["tasks"]
        if each["task"]["name"].endswith(f" : {task}")
        for result in each["hosts"].values()
        for path in result.get("paths", [])
    }


def ran_on(report: dict, task: str, play: str | None = None) -> set[str]:
    """The hosts a task ran on (not skipped), by its name without the role; in one play, or
    in any."""
    return {
        host
        for each_play in report["plays"]
        if play is None or each_play["play"]["name"] == play
        for each in each_play["tasks"]
        if each["task"]["name"].split(" : ", 1)[-1] == task
        for host, result in each["hosts"].items()
        if not result.get("skipped")
    }


def cluster_up(text: str, *extra: str) -> tuple[set[str], float]:
    """Run a documented cluster-up command; the names of changed tasks and seconds."""
    report, elapsed = converge(text, *extra)
    return changed_tasks(report), elapsed


def cut_off(text: str, marker: str) -> None:
    """Run a documented cluster-up command and kill it where it prints `marker`."""
    run_until_cut(
        ["bash", "-c", text],
        marker,
        PLAYBOOK_LIMIT_S,
        env=dict(
            os.environ,
            ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
            ANSIBLE_INVENTORY=os.environ["MOLECULE_INVENTORY_FILE"],
        ),
        cwd=PROJECT,
    )


def runs_in(host, mode: str) -> bool:
    """Whether the node's running Ray (not its files) carries `mode`'s debugger settings."""
    environment = host.check_output(
        "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value ray)/environ"
    ).splitlines()
    return all(f"{name}={value}" in environment for name, value in MODE_ENV[mode].items())


def drain_messages(host, since: str) -> list[str]:
    """What `ray start --block` logged about draining the node on SIGTERM since `since`."""
    journal = host.check_output(f"journalctl -u ray --no-pager -o cat --since @{since}")
    return [line for line in journal.splitlines() if "drain" in line.lower()]


@pytest.mark.once
def test_check_mode_on_a_converged_cluster_changes_nothing(cluster: Cluster) -> None:
    again = documented(
        "RUNBOOK.md", r"ansible-playbook -i \S+ cluster-up.yml -e", cluster.mode, cluster
    )
    changed, _ = cluster_up(again, "--check", "--diff")
    assert changed == set()


def test_mode_switch_restarts_only_ray_and_debugs_in_the_new_mode(
    cluster: Cluster, submit, jobs, outsider, host_of
) -> None:
    other = OTHER_MODE[cluster.mode]
    switched = dataclasses.replace(cluster, mode=other)
    nodes = [host_of(name) for name in NODES]
    since = nodes[0].check_output("date +%s")

    # The switch is README's headline; after a cut-off run, README's inventory line finishes it.
    headline = documented("README.md", r"ansible-playbook cluster-up.yml -e", other, cluster)
    # Proven on one cluster (post_mortem's), as it does not depend on the platform: the
    # other scenarios switch in one run (MODE_SWITCH_CUT_OFF=0 in their molecule.yml).
    cut = os.environ.get("MODE_SWITCH_CUT_OFF", "1") == "1"
    if cut:
        # Cut off once every node has its new unit and environment, before any Ray stops:
        # the next run finds those files current, and must still restart Ray.
        cut_off(headline, CUT_AT)
        assert all(runs_in(node, cluster.mode) for node in nodes)
        switch = documented(
            "README.md", r"ansible-playbook -i \S+ cluster-up.yml -e", other, cluster
        )
    else:
        switch = headline
    report, seconds = converge(switch)
    record(cluster, f"mode switch {cluster.mode} -> {other}", seconds)
    changed = changed_tasks(report)
    assert changed and changed <= SWITCH_TASKS
    # A cut-off run wrote every node's files: this one finds them current.
    assert written_by(report, WRITE_RAY_FILES) == (set() if cut else SWITCH_PATHS)
    assert all(runs_in(node, other) for node in nodes)
    # Every node runs a new Ray: the proof of the last run does not hold for it, nor the node
    # list the head's probe read before the switch.
    assert "Proof: run now" in summary_of(report)
    assert ran_on(report, ASK_THE_HEAD, PROOF_PLAY) == {HEAD}
    # Each node stopped once and drained through a live GCS: the workers before the head,
    # and systemd signalled only `ray start`, not the GCS under it.
    for node in nodes:
        drains = drain_messages(node, since)
        assert any("finished draining" in line for line in drains), drains
        assert not any("Failed to mark" in line for line in drains), drains
        assert sum("received SIGTERM" in line for line in drains) == 1, drains
    ROUND_TRIPS[other](switched, submit, jobs, outsider)
    # The switched runbook's own commands, under this scenario's auth: on post_mortem's
    # cluster (token auth) this is the one run of legacy's `ray debug` with the token.
    find_and_attach(switched, submit, jobs, outsider)
    # The hung rank's debugger in the new mode, where torch is there to hang an all-reduce.
    if switched.verl_version:
        a_waiting_rank_debugged(switched, submit, jobs)

    # A no-op re-run changes nothing and restarts nothing: a running job keeps running.
    job_id = submit("long_running.py", cluster.worker_ips[GPU_WORKER])
    wait_for_log(jobs, job_id, "RUNNING")
    # Read now: the runbook names the inventory of the run that wrote it.
    again = documented("RUNBOOK.md", r"ansible-playbook -i \S+ cluster-up.yml -e", other, switched)
    report, seconds = converge(again)
    record(cluster, "no-op re-run", seconds)
    assert changed_tasks(report) == set()
    assert jobs.get_job_status(job_id) == JobStatus.RUNNING
    # Every node runs the Ray the last run proved, so the no-op reports that proof, proven
    # whole from the node list the head's probe read: no node was asked again.
    assert any(line.startswith("Proof: reused from ") for line in summary_of(report))
    assert ran_on(report, ASK_THE_HEAD) == set()
    # The GPU worker's GPUs are stand-ins: the GPU proof must not call them checked.
    assert f"GPU proof: not checked: stand-in: {GPU_WORKER}" in summary_of(report)
    # Nor may the counts and the GPU line read as real GPUs.
    assert any(line.endswith("; GPUs: 2 (2 stand-in)") for line in summary_of(report))
    assert f"GPU nodes: {GPU_WORKER}: {STAND_IN_GPUS}" in summary_of(report)
