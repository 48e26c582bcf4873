"""The debug-readiness probe touches only the pauses of its own job.

On a shared cluster another job may be paused on the node the probe checks; attaching to that
pause would release someone else's task. The fakes stand in for the job client and for the
pause listings (shaped like tests/fixtures), then a real head checks the state API query.
"""

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient
from ray_heads import (
    FAILING_DRIVER,
    NODE_HOOKS_PATH,
    finish,
    ray_head,
    start_driver,
    wait_for_pauses,
)

from ray_debug_tools import probe, probe_job
from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import legacy_record, paused_workers, paused_workers_from_rows
from ray_debug_tools.probe import NodeReport

IP = "10.0.0.5"
OURS, THEIRS = "02000000", "01000000"
NODE_ID = "5566cbc8a60e77a66412f443c552d931152400f3f7ab47fb4695ea5e"
OUR_WORKER, THEIR_WORKER = "aa" * 28, "bb" * 28
OUR_PORT, THEIR_PORT = 52001, 52002
PORTS = {"gcs": 6379, "dashboard": 8265}
PORT_RANGE = "52000-52099"


class FakeJobClient:
    """The probe job: reports its facts at once; its Ray job id appears once the driver runs."""

    def __init__(self, mode: str, job_ids: list[str | None]) -> None:
        env = {**dict.fromkeys(probe_job.ENV_NAMES), "RAY_DEBUGGER_PORT_RANGE": PORT_RANGE}
        self.facts = {
            IP: {"alive": True, "gpus": 0, "mode": mode, "ray": "2.60.0", "env": env,
                 "debugger_ports": [52000, 52099]},
        }  # fmt: skip
        self.job_ids = job_ids
        self.stopped: list[str] = []

    def submit_job(self, **_: Any) -> str:
        return "raysubmit_probe"

    def get_job_logs(self, submission_id: str) -> str:
        return "FACTS " + json.dumps(self.facts)

    def get_job_status(self, submission_id: str) -> JobStatus:
        return JobStatus.RUNNING

    def get_job_info(self, submission_id: str) -> SimpleNamespace:
        # The last answer stays, as the job id does once set.
        return SimpleNamespace(job_id=self.job_ids.pop(0) if self.job_ids[1:] else self.job_ids[0])

    def stop_job(self, submission_id: str) -> None:
        self.stopped.append(submission_id)


def registry_entry(job_id: str, port: int) -> dict[str, Any]:
    """A `RAY_PDB_*` value as in fixtures/legacy_registry.json, set by a probe_job.py."""
    return {
        "actor_id": None,
        "filename": "/tmp/ray/session_latest/runtime_resources/working_dir_files/probe_job.py",
        "job_id": job_id,
        "lineno": 40,
        "node_id": NODE_ID,
        "pdb_address": f"{IP}:{port}",
        "proctitle": "ray::pause",
        "task_id": f"16310a0f0a45af5cffffffffffffffffffffffff{job_id}",
        "timestamp": 1796032892.0,
        "traceback": "NoneType: None\n",
        "worker_id": "36aecd6d12405a9fcc809e4e60456ae57d8cac37c0939542fba8283d",
    }


def worker_row(worker_id: str, port: int, pid: int) -> dict[str, Any]:
    """A paused worker as in fixtures/state_workers.json: the row names no job."""
    return {
        "debugger_port": port,
        "ip": IP,
        "is_alive": True,
        "node_id": NODE_ID,
        "num_paused_threads": 1,
        "pid": pid,
        "worker_id": worker_id,
        "worker_type": "WORKER",
    }


@pytest.fixture
def attached(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Where the probe attached, instead of attaching; no waiting between polls."""
    calls: list[tuple[str, int]] = []

    def fake_attach(report: NodeReport, port: int, port_range: str) -> None:
        calls.append((report.ip, port))
        report.reachable = "yes"

    monkeypatch.setattr(probe, "attach", fake_attach)
    monkeypatch.setattr(probe.time, "sleep", lambda _: None)
    return calls


def pauses_of(
    monkeypatch: pytest.MonkeyPatch, legacy_jobs: list[str], pm_workers: list[str]
) -> None:
    """Pause jobs on the node: legacy breakpoints by job id, post-mortem workers by worker id."""
    ports = {OURS: OUR_PORT, THEIRS: THEIR_PORT, OUR_WORKER: OUR_PORT, THEIR_WORKER: THEIR_PORT}
    entries = [registry_entry(job, ports[job]) for job in legacy_jobs]
    monkeypatch.setattr(
        probe, "legacy_breakpoints", lambda _: [legacy_record(e, time.time()) for e in entries]
    )
    rows = [worker_row(worker, ports[worker], ports[worker] - 50000) for worker in pm_workers]
    monkeypatch.setattr(probe, "paused_workers", lambda _: paused_workers_from_rows(rows))
    # The workers running a task of each job: the probe's pause task's, if it paused.
    running = {OURS: {OUR_WORKER}} if OUR_WORKER in pm_workers else {}
    monkeypatch.setattr(probe, "job_workers", lambda _, job_id: running.get(job_id, set()))


def run_probe(client: FakeJobClient, timeout: float = 5) -> NodeReport:
    [report] = probe.probe(client, "head", {"node1": IP}, {}, PORT_RANGE, PORTS, timeout)
    return report


@pytest.mark.parametrize("mode", ["legacy", "post_mortem"])
@pytest.mark.parametrize("theirs_first", [True, False])
def test_only_the_probe_jobs_pause_is_attached(
    mode: str, theirs_first: bool, monkeypatch: pytest.MonkeyPatch, attached: list[tuple[str, int]]
) -> None:
    # Both orders: picking by node alone attaches to whichever pause comes first or last.
    order = slice(None, None, 1 if theirs_first else -1)
    pauses_of(monkeypatch, [THEIRS, OURS][order], [THEIR_WORKER, OUR_WORKER][order])
    # No Ray job id until the probe's driver connects: the submission id is no stand-in.
    client = FakeJobClient(mode, [None, None, OURS])
    report = run_probe(client)
    assert attached == [(IP, OUR_PORT)]
    assert (report.reachable, report.problem) == ("yes", "")
    assert client.stopped == ["raysubmit_probe"]


@pytest.mark.parametrize(
    ("mode", "label"), [("legacy", f"job {THEIRS}"), ("post_mortem", "worker pid 2002")]
)
def test_another_jobs_pause_alone_is_reported_not_attached(
    mode: str, label: str, monkeypatch: pytest.MonkeyPatch, attached: list[tuple[str, int]]
) -> None:
    pauses_of(monkeypatch, [THEIRS], [THEIR_WORKER])
    report = run_probe(FakeJobClient(mode, [OURS]), timeout=0.2)
    assert attached == []
    assert report.reachable == "no"
    assert f"no paused task of probe job {OURS} seen within 0.2 s" in report.problem
    assert f"ignored another job's pause on this node ({label})" in report.problem


def test_no_pause_at_all_mentions_no_other_job(
    monkeypatch: pytest.MonkeyPatch, attached: list[tuple[str, int]]
) -> None:
    pauses_of(monkeypatch, [], [])
    report = run_probe(FakeJobClient("legacy", [OURS]), timeout=0.2)
    assert attached == []
    assert "ignored" not in report.problem


@pytest.mark.parametrize("stand_in", ["node1", IP])
def test_stand_in_gpus_say_so_in_the_probes_table(
    stand_in: str, monkeypatch: pytest.MonkeyPatch, attached: list[tuple[str, int]]
) -> None:
    """--stand-in by name or address: a stand-in's GPUs in the table are never bare."""
    pauses_of(monkeypatch, [OURS], [])
    client = FakeJobClient("legacy", [OURS])
    client.facts[IP]["gpus"] = 2.0
    reports = probe.probe(
        client, "head", {"node1": IP}, {}, PORT_RANGE, PORTS, 5, frozenset({stand_in})
    )
    assert reports[0].gpus == "2 (stand-in)"
    assert "node1  10.0.0.5  2.60.0  2 (stand-in)" in probe.table(reports)
    [plain] = probe.probe(client, "head", {"node1": IP}, {}, PORT_RANGE, PORTS, 5)
    assert plain.gpus == "2"


def test_probe_leaves_another_jobs_post_mortem_pause_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real head: the state API ties the probe's paused worker to the probe's Ray job."""
    # The job's entrypoint runs `python` from the head's PATH, as the cluster's venv is there.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # Any port counts: the hook that would keep the debugger in a range is not loaded here.
    env = {"RAY_DEBUG_POST_MORTEM": "1", "RAY_DEBUGGER_PORT_RANGE": "1-65535",
           "PYTHONPATH": NODE_HOOKS_PATH}  # fmt: skip
    with ray_head(env, tmp_path / "ray-start.log", num_cpus=4) as head:
        driver, _ = start_driver(FAILING_DRIVER, tmp_path, head)
        [theirs] = wait_for_pauses(lambda: paused_workers(head.dashboard_url), driver)
        client = JobSubmissionClient(head.dashboard_url)
        host, _, dashboard_port = head.dashboard_url.removeprefix("http://").rpartition(":")
        gcs_port = int(head.gcs_address.rpartition(":")[2])
        ports = {"gcs": gcs_port, "dashboard": int(dashboard_port)}
        [report] = probe.probe(client, host, {"node": theirs.ip}, {}, "1-65535", ports, 60)
        assert (report.mode, report.reachable, report.problem) == ("post_mortem", "yes", "")
        assert report.debugger != f"{theirs.ip}:{theirs.port}"
        assert theirs in paused_workers(head.dashboard_url)
        with DapSession.connect(theirs.ip, theirs.port, timeout=30) as dap:
            stopped = dap.attach_for_post_mortem()
            dap.continue_(stopped["body"]["threadId"])
            dap.disconnect()
        assert "FAILED" in finish(driver)
