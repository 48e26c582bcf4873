"""The step that hangs: nothing pauses and nothing raises. The job goes in through the
runbook's NCCL debug profile line; the runbook's `verl-debug stacks` line reads every rank of
the job on every node at once, through the head's dashboard with the token, and names the rank that
never joined the all-reduce; its `verl-debug rank` line opens the cluster's debugger on a rank
blocked in the all-reduce (legacy's, after the mode switch, in test_mode_switch.py); its
evidence line puts every node's part in one archive.

Needs torch on the nodes (verl's install) and profiling, which is on where token auth is:
the online scenario, which has neither, leaves this module out (its molecule.yml)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from conftest import JOBS, Cluster, record, wait_for_log
from nodes import NODES
from ray.job_submission import JobSubmissionClient
from test_runbook import derived, printed, printed_command, run_printed

from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pdb_client import PdbSession

pytestmark = pytest.mark.once

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
    line = printed_command(cluster, r"verl-debug stacks ")
    text = derived(line, " ".join([line.replace("JOB_ID", job_id), *flags]))
    return run_printed(cluster, text, timeout=180)


def frames(group: dict) -> list[str]:
    return [frame for thread in group["threads"] for frame in thread["frames"]]


def grouped(
    cluster: Cluster, job_id: str, *flags: str, sizes: list[int], timeout: float = 120
) -> list[dict]:
    """The stacks' groups once they have `sizes`: the waiting ranks all inside the all-reduce."""
    deadline = time.monotonic() + timeout
    while True:
        run = ray_stacks(cluster, job_id, "--json", *flags)
        assert run.returncode == 0, run.stderr + run.stdout
        groups = json.loads(run.stdout)["groups"]
        if sorted((len(group["workers"]) for group in groups), reverse=True) == sizes:
            return groups
        assert time.monotonic() < deadline, f"the ranks never settled in {sizes}: {groups}"
        time.sleep(3)


def submit_with_the_nccl_profile(cluster: Cluster, *args: str) -> str:
    """The runbook's NCCL debug profile line, from the jobs' directory, without waiting."""
    line = printed_command(cluster, r"ray job submit .*runtime_env\.nccl-debug\.yaml")
    entrypoint = "-- python3 -m verl.trainer.main_ppo ..."
    assert line.endswith(entrypoint), line
    text = derived(line, line.replace(entrypoint, f"--no-wait -- python3 {' '.join(args)}"))
    run = run_printed(cluster, text, cwd=JOBS, timeout=180)
    found = re.search(r"Job '(\S+)' submitted successfully", run.stdout + run.stderr)
    assert run.returncode == 0 and found, run.stdout + run.stderr
    return found.group(1)


def everything_read(cluster: Cluster) -> re.Match[str]:
    """The runbook's `verl-debug stacks` line without --job: '(workers) of N workers read on (nodes)
    nodes in (seconds) s'."""
    line = printed_command(cluster, r"verl-debug stacks ")
    whole = run_printed(cluster, derived(line, line.replace(" --job JOB_ID", "")), timeout=180)
    read = re.match(r"(\d+) of \d+ workers read on (\d+) nodes in ([\d.]+) s", whole.stdout)
    assert whole.returncode == 0 and read, whole.stdout + whole.stderr
    return read


def evidence(cluster: Cluster, job_id: str) -> dict[str, bytes]:
    """The runbook's evidence line for the job: every file of the archive it made."""
    line = printed_command(cluster, r"ansible-playbook -i \S+ playbooks/evidence\.yml")
    started = time.monotonic()
    run = run_printed(cluster, derived(line, line.replace("JOB_ID", job_id)), timeout=300)
    record(cluster, "evidence of a hung job, 3 nodes", time.monotonic() - started)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    path = re.search(r"Evidence: (\S+\.tar\.gz)", run.stdout)
    assert path, run.stdout[-4000:]
    with tarfile.open(path.group(1)) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def test_a_hung_job_names_its_odd_rank_and_leaves_its_evidence(
    cluster: Cluster, jobs: JobSubmissionClient, submit
) -> None:
    first, second = sorted(cluster.worker_ips.values())[:2]
    job_id = submit_with_the_nccl_profile(
        cluster, "hung_allreduce.py", first, second, str(RANKS_PER_NODE)
    )
    try:
        debugger = hung_job(cluster, jobs, submit, job_id, first, second)
    finally:
        jobs.stop_job(job_id)
    closes(*debugger)


def a_waiting_rank_debugged(cluster: Cluster, submit, jobs: JobSubmissionClient) -> None:
    """The hung all-reduce again, in the cluster's mode now, and its debugger on a waiting
    rank: how test_mode_switch.py proves legacy's on the cluster that has torch."""
    first, second = sorted(cluster.worker_ips.values())[:2]
    job_id = submit("hung_allreduce.py", first, second, str(RANKS_PER_NODE))
    try:
        odd_rank(jobs, job_id)
        waiting, _ = grouped(cluster, job_id, sizes=[2 * RANKS_PER_NODE - 1, 1])
        debugger = debug_a_waiting_rank(cluster, waiting["workers"][0])
    finally:
        jobs.stop_job(job_id)
    closes(*debugger)


def debug_a_waiting_rank(cluster: Cluster, rank: dict) -> tuple[str, int]:
    """The runbook's `verl-debug rank` line on a rank blocked in the all-reduce: the cluster's
    debugger opens in the port range and shows the all-reduce frame; (host, port) of it."""
    line = printed_command(cluster, r"verl-debug rank ")
    text = derived(line, line.replace("NODE_IP PID", f"{rank['node_ip']} {rank['pid']}"))
    started = time.monotonic()
    run = run_printed(cluster, text, timeout=180)
    record(cluster, f"verl-debug rank ({cluster.mode})", time.monotonic() - started)
    assert run.returncode == 0, run.stdout + run.stderr
    found = re.search(rf"{cluster.mode} debugger at (\S+):(\d+)\n", run.stdout)
    assert found, run.stdout
    host, port = found.group(1), int(found.group(2))
    assert host == rank["node_ip"] and port in cluster.debugger_range, run.stdout
    assert ", in all_reduce\n" in run.stdout, run.stdout
    if cluster.mode == "post_mortem":
        with DapSession.connect(host, port, timeout=60) as dap:
            stopped = dap.attach_for_post_mortem()["body"]
            names = [frame["name"] for frame in dap.stack_trace(stopped["threadId"])]
            assert "all_reduce" in names, names
            dap.continue_(stopped["threadId"])
            dap.disconnect()
    else:
        session = PdbSession.connect(host, port, timeout=60)
        assert "all_reduce()" in session.command("where")
        session.continue_()
    return host, port


def closes(host: str, port: int, timeout: float = 60) -> None:
    """The stopped job's debugger port is free again: nothing answers on it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=5).close()
        except OSError:
            return
        assert time.monotonic() < deadline, f"{host}:{port} still answers after the job stopped"
        time.sleep(1)


def hung_job(
    cluster: Cluster, jobs: JobSubmissionClient, submit, job_id: str, first: str, second: str
) -> tuple[str, int]:
    odd_ip, odd_pid = odd_rank(jobs, job_id)
    assert odd_ip == second

    waiting, odd = grouped(cluster, job_id, sizes=[2 * RANKS_PER_NODE - 1, 1])
    assert any(frame.startswith("all_reduce ") for frame in frames(waiting)), waiting
    assert {worker["node_ip"] for worker in waiting["workers"]} == {first, second}
    assert [(w["node_ip"], w["pid"], w["running"]) for w in odd["workers"]] == [
        (second, odd_pid, "rank_step")
    ]
    assert frames(odd)[0].startswith("odd_rank_sleeps "), odd

    # C frames: the waiting ranks' main threads are blocked in PyTorch's C++ collective layer.
    # The profile's TORCH_DISTRIBUTED_DEBUG=DETAIL shows there: the all-reduce first runs a
    # monitored barrier, whose coordinator (rank 0) waits at another frame than the rest.
    native = grouped(cluster, job_id, "--native", sizes=[2 * RANKS_PER_NODE - 2, 1, 1])
    for group in native:
        if [worker["pid"] for worker in group["workers"]] != [odd_pid]:
            barrier = "c10d::ProcessGroupGloo::monitoredBarrier"
            assert any(frame.startswith(barrier) for frame in frames(group)), frames(group)

    # What the operator reads: the count first, the odd rank named by node, pid and task.
    text = ray_stacks(cluster, job_id)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"{2 * RANKS_PER_NODE} of {2 * RANKS_PER_NODE} workers read"
                                  " on 2 nodes"), text.stdout  # fmt: skip
    assert f"1 worker (odd one out)\n    {second} pid {odd_pid} rank_step" in text.stdout
    # Every worker of the cluster at once, without --job, with two more busy workers on every
    # node: its own timing, for the record.
    nodes = [cluster.head_ip, *cluster.worker_ips.values()]
    wait_for_log(jobs, submit("long_running.py", *nodes * 2), "RUNNING")
    workers, read = 2 * RANKS_PER_NODE + 2 * len(nodes), everything_read(cluster)
    deadline = time.monotonic() + 120
    while int(read.group(1)) < workers or int(read.group(2)) < len(nodes):
        assert time.monotonic() < deadline, f"never {workers} workers on {nodes}: {read.string}"
        time.sleep(2)
        read = everything_read(cluster)
    record(
        cluster,
        f"verl-debug stacks, every worker: {read.group(1)} on {read.group(2)} nodes",
        float(read.group(3)),
    )

    # The evidence, while the job hangs: every node's part, the job's driver log (on the head)
    # and the ranks' stand-in dumps on their nodes, written under the NCCL profile; never the
    # cluster token.
    files = evidence(cluster, job_id)
    index = json.loads(files["index.json"])
    assert {node: entry["status"] for node, entry in index["nodes"].items()} == dict.fromkeys(
        NODES, "collected"
    )
    names = {ip: name for name, ip in cluster.worker_ips.items()}
    driver = [name for name in files if name.endswith(f"/ray-logs/job-driver-{job_id}.log")]
    assert len(driver) == 1 and b"ODD_RANK" in files[driver[0]], sorted(files)
    for ip, ranks in (
        (first, range(RANKS_PER_NODE)),
        (second, range(RANKS_PER_NODE, 2 * RANKS_PER_NODE)),
    ):
        for rank in ranks:
            dump = [
                name
                for name in files
                if name.startswith(f"{names[ip]}/dumps/") and name.endswith(f"_rank_{rank}")
            ]
            assert len(dump) == 1, sorted(files)
            profile = json.loads(files[dump[0]])
            assert profile["NCCL_DEBUG"] == "INFO" and profile["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
            assert profile["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
        assert any(name.startswith(f"{names[ip]}/ray-logs/worker-") for name in files), sorted(
            files
        )
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip().encode()
    assert not any(token in data for data in files.values())

    # The cluster's debugger on a rank blocked in the all-reduce, the job left running.
    return debug_a_waiting_rank(cluster, waiting["workers"][0])


@pytest.mark.faults
def test_mode_off_has_no_debugger_to_open(cluster: Cluster) -> None:
    """The faults scenario runs debug_mode=off: `verl-debug rank` refuses, naming the modes
    that have a debugger, and the runbook prints no command for it."""
    assert cluster.mode == "off"
    node_ip = sorted(cluster.worker_ips.values())[0]
    run = subprocess.run(
        ["verl-debug", "rank", "--head", cluster.head_ip, node_ip, "1"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "runs debug_mode=off" in run.stderr and "debug_mode=post_mortem or" in run.stderr
    assert not [text for text in printed(cluster) if text.startswith("verl-debug rank ")]
    assert (
        "Mode `off` has no debugger: `verl-debug rank` refuses."
        in (cluster.artifacts / "RUNBOOK.md").read_text()
    )
