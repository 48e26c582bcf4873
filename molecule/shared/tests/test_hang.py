"""The step that hangs: nothing pauses and nothing raises. The runbook's `ray-stacks` line
reads every rank of the job on every node at once, through the head's dashboard with the
token, and names the rank that never joined the all-reduce.

Needs torch on the nodes (verl's install) and profiling, which is on where token auth is:
the online scenario, which has neither, leaves this module out (its molecule.yml)."""

from __future__ import annotations

import json
import re
import subprocess
import time

from conftest import Cluster
from ray.job_submission import JobSubmissionClient
from test_runbook import derived, printed_command, run_printed

RANKS_PER_NODE = 2
# Ray prefixes a task's printed lines with its name, pid and node, in colour.
ODD_RANK_LINE = re.compile(r"\(rank_step pid=(\d+), ip=([\d.]+)\) ODD_RANK")
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def odd_rank(jobs: JobSubmissionClient, job_id: str, timeout: float = 180) -> tuple[str, int]:
    """(node ip, pid) of the rank that sleeps, once it has joined the process group."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = ODD_RANK_LINE.search(COLOUR.sub("", jobs.get_job_logs(job_id)))
        if found:
            return found.group(2), int(found.group(1))
        assert not jobs.get_job_status(job_id).is_terminal(), jobs.get_job_logs(job_id)[-3000:]
        time.sleep(2)
    raise TimeoutError(f"no rank of {job_id} joined in {timeout} s: {jobs.get_job_logs(job_id)}")


def ray_stacks(cluster: Cluster, job_id: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """The runbook's line for the job, with `flags`, as the operator runs it."""
    line = printed_command(cluster, r"ray-stacks ")
    text = derived(line, " ".join([line.replace("JOB_ID", job_id), *flags]))
    return run_printed(cluster, text, timeout=180)


def frames(group: dict) -> list[str]:
    return [frame for thread in group["threads"] for frame in thread["frames"]]


def grouped(cluster: Cluster, job_id: str, *flags: str, timeout: float = 120) -> list[dict]:
    """ray-stacks' groups once the waiting ranks are all inside the all-reduce."""
    deadline = time.monotonic() + timeout
    while True:
        run = ray_stacks(cluster, job_id, "--json", *flags)
        assert run.returncode == 0, run.stderr + run.stdout
        groups = json.loads(run.stdout)["groups"]
        if [len(group["workers"]) for group in groups] == [2 * RANKS_PER_NODE - 1, 1]:
            return groups
        assert time.monotonic() < deadline, f"the ranks never settled in two groups: {groups}"
        time.sleep(3)


def test_ray_stacks_names_the_rank_that_never_joins(
    cluster: Cluster, jobs: JobSubmissionClient, submit
) -> None:
    first, second = sorted(cluster.worker_ips.values())[:2]
    job_id = submit("hung_allreduce.py", first, second, str(RANKS_PER_NODE))
    odd_ip, odd_pid = odd_rank(jobs, job_id)
    assert odd_ip == second

    waiting, odd = grouped(cluster, job_id)
    assert any(frame.startswith("all_reduce ") for frame in frames(waiting)), waiting
    assert {worker["node_ip"] for worker in waiting["workers"]} == {first, second}
    assert [(w["node_ip"], w["pid"], w["running"]) for w in odd["workers"]] == [
        (second, odd_pid, "rank_step")
    ]
    assert frames(odd)[0].startswith("odd_rank_sleeps "), odd

    # C frames: the waiting ranks' main threads are blocked in PyTorch's C++ collective layer,
    # waiting on the work a Gloo thread does.
    waiting, _ = grouped(cluster, job_id, "--native")
    assert any(frame.startswith("c10d::") for frame in frames(waiting)), frames(waiting)

    # What the operator reads: the count first, the odd rank named by node, pid and task.
    text = ray_stacks(cluster, job_id)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"{2 * RANKS_PER_NODE} of {2 * RANKS_PER_NODE} workers read"
                                  " on 2 nodes"), text.stdout  # fmt: skip
    assert f"1 worker (odd one out)\n    {second} pid {odd_pid} rank_step" in text.stdout
