"""Round trip from the controller: a task paused on a worker is found, attached and released."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

from conftest import Cluster, wait_for_job
from ray.job_submission import JobStatus

from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import (
    LegacyBreakpoint,
    PausedWorker,
    legacy_breakpoints,
    paused_workers,
)
from ray_debug_tools.pdb_client import PdbSession

WORKER = "rc-worker1"
T = TypeVar("T")


def wait_for(find: Callable[[], list[T]], what: str, timeout: float = 120) -> list[T]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(1)
    raise TimeoutError(f"no {what} after {timeout} s")


def finder_lists(cluster: Cluster, mode: str, address: str) -> None:
    """The operator's finder, run here, lists the pause with its debugger address."""
    listed = subprocess.run(
        ["ray-breakpoints", "--head", cluster.head_ip, "--mode", mode, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert address in [pause["address"] for pause in json.loads(listed.stdout)], listed.stdout


def filtered_for_outsider(outsider, ip: str, port: int) -> bool:
    scan = outsider.check_output(f"nmap -Pn -n -p {port} --max-retries 1 -oG - {ip}")
    return f"{port}/filtered/" in scan


def open_for_controller(ip: str, port: int) -> bool:
    """The paused debugger seen from this trusted address (the network's gateway)."""
    scan = subprocess.run(
        ["nmap", "-Pn", "-n", "-p", str(port), "--max-retries", "1", "-oG", "-", ip],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return f"{port}/open/" in scan


def legacy_round_trip(cluster: Cluster, submit, jobs, outsider) -> None:
    """A breakpoint() in a task on a worker: find it in the GCS, read a local, continue."""
    worker_ip = cluster.worker_ips[WORKER]
    job_id = submit("legacy_breakpoint.py", worker_ip)

    pause: LegacyBreakpoint = wait_for(lambda: legacy_breakpoints(cluster.gcs), "breakpoint")[0]
    assert (pause.ip, pause.filename.endswith("legacy_breakpoint.py")) == (worker_ip, True)
    assert pause.port in cluster.debugger_range
    assert filtered_for_outsider(outsider, pause.ip, pause.port)
    assert open_for_controller(pause.ip, pause.port)
    finder_lists(cluster, "legacy", f"{pause.ip}:{pause.port}")

    with PdbSession.connect(pause.ip, pause.port) as session:
        assert session.command("p answer").strip() == "42"
        session.continue_()

    assert wait_for_job(jobs, job_id) == JobStatus.SUCCEEDED
    assert "RESULT 43" in jobs.get_job_logs(job_id)


def post_mortem_round_trip(cluster: Cluster, submit, jobs, outsider) -> None:
    """A crash in a task on a worker: find the pause in the state API, attach with DAP."""
    worker_ip = cluster.worker_ips[WORKER]
    job_id = submit("post_mortem_crash.py", worker_ip)

    pause: PausedWorker = wait_for(lambda: paused_workers(cluster.dashboard), "paused worker")[0]
    assert pause.ip == worker_ip
    assert pause.port in cluster.debugger_range
    assert filtered_for_outsider(outsider, pause.ip, pause.port)
    assert open_for_controller(pause.ip, pause.port)
    finder_lists(cluster, "post_mortem", f"{pause.ip}:{pause.port}")

    with DapSession.connect(pause.ip, pause.port) as session:
        stopped = session.attach_for_post_mortem()
        assert stopped["body"]["reason"] == "exception"
        thread_id = stopped["body"]["threadId"]
        info = session.exception_info(thread_id)
        assert "probe crash with answer=42" in str(info)
        session.continue_(thread_id)

    assert wait_for_job(jobs, job_id) == JobStatus.FAILED
    assert "probe crash with answer=42" in jobs.get_job_logs(job_id)


ROUND_TRIPS = {"legacy": legacy_round_trip, "post_mortem": post_mortem_round_trip}


def test_debugger_round_trip_from_the_controller(cluster: Cluster, submit, jobs, outsider) -> None:
    ROUND_TRIPS[cluster.mode](cluster, submit, jobs, outsider)
