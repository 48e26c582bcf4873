"""ray_debug_tools against a real local Ray head, attaching the way the controller would."""

import sys
from pathlib import Path

import pytest
from ray.job_submission import JobSubmissionClient
from ray_heads import (
    BREAKPOINT_DRIVER,
    BREAKPOINT_LINE,
    FAILING_DRIVER,
    finish,
    free_port,
    ray_head,
    start_driver,
    submit_job,
    wait_for_pauses,
)

from ray_debug_tools._dashboard import JobIds, job_ids
from ray_debug_tools._net import RayDebugConnectionError
from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import legacy_breakpoints, paused_workers
from ray_debug_tools.pdb_client import PdbSession
from ray_debug_tools.probe import ray_job_id
from ray_debug_tools.worker_stacks import resolve_job


def test_legacy_breakpoint_found_in_gcs_and_driven_over_pdb(tmp_path: Path) -> None:
    with ray_head({"RAY_DEBUG": "legacy"}, tmp_path / "ray-start.log") as head:
        driver, script = start_driver(BREAKPOINT_DRIVER, tmp_path, head)
        [pause] = wait_for_pauses(lambda: legacy_breakpoints(head.gcs_address), driver)
        assert (pause.filename, pause.lineno) == (str(script), BREAKPOINT_LINE)
        assert pause.waited_s >= 0
        # Without --ray-debugger-external the worker binds loopback: attachable from this host only.
        assert pause.loopback_only
        with PdbSession.connect(pause.ip, pause.port, timeout=10) as pdb:
            assert "return answer + 1" in pdb.banner
            assert pdb.command("p answer") == "42"
            pdb.continue_()
        assert "RESULT 43" in finish(driver)
        assert legacy_breakpoints(head.gcs_address) == []


def test_post_mortem_found_in_state_api_and_inspected_over_dap(tmp_path: Path) -> None:
    with ray_head({"RAY_DEBUG_POST_MORTEM": "1"}, tmp_path / "ray-start.log") as head:
        driver, _ = start_driver(FAILING_DRIVER, tmp_path, head)
        [worker] = wait_for_pauses(lambda: paused_workers(head.dashboard_url), driver)
        assert worker.num_paused_threads == 1
        with DapSession.connect(worker.ip, worker.port, timeout=30) as dap:
            stopped = dap.attach_for_post_mortem()
            assert stopped["body"]["reason"] == "exception"
            thread_id = stopped["body"]["threadId"]
            info = dap.exception_info(thread_id)
            assert "ValueError" in info["exceptionId"]
            assert "boom" in info["description"]
            frame = next(f for f in dap.stack_trace(thread_id) if f["name"] == "failing_task")
            assert dap.evaluate("answer", frame["id"]) == "42"
            dap.continue_(thread_id)
            dap.disconnect()
        assert "FAILED" in (output := finish(driver)) and "boom" in output
        assert paused_workers(head.dashboard_url) == []


def test_unreachable_endpoints_are_named_in_errors() -> None:
    port = free_port()
    with pytest.raises(RayDebugConnectionError, match=f"127.0.0.1:{port}"):
        PdbSession.connect("127.0.0.1", port, timeout=2)
    with pytest.raises(RayDebugConnectionError, match=f"127.0.0.1:{port}"):
        DapSession.connect("127.0.0.1", port, timeout=2)
    with pytest.raises(RayDebugConnectionError, match=f"127.0.0.1:{port}"):
        legacy_breakpoints(f"127.0.0.1:{port}", timeout=2)
    with pytest.raises(RayDebugConnectionError, match=f"127.0.0.1:{port}"):
        paused_workers(f"http://127.0.0.1:{port}", timeout=2)


def test_a_job_is_found_by_either_of_its_ids(tmp_path: Path) -> None:
    """What `verl-debug stacks --job` and the evidence take: the submission id `ray job submit`
    printed, or the Ray job id; an id of no job names the cluster's jobs."""
    with ray_head({}, tmp_path / "ray-start.log") as head:
        client = JobSubmissionClient(head.dashboard_url)
        # This venv's Python, which has Ray, whatever PATH the tests run with.
        entrypoint = f"{sys.executable} -c 'import time, ray; ray.init(); time.sleep(300)'"
        submission = submit_job(client, entrypoint)
        try:
            ray_id = ray_job_id(client, submission, timeout=60)
            both = JobIds(submission, ray_id)
            assert job_ids(head.dashboard_url, submission, 10) == both
            assert job_ids(head.dashboard_url, ray_id, 10) == both
            assert both.known == [submission, ray_id]
            assert resolve_job(head.dashboard_url, submission, 10) == ray_id
            assert resolve_job(head.dashboard_url, ray_id, 10) == ray_id
            with pytest.raises(LookupError, match=f"no job 'raysubmit_none'.*{submission}"):
                job_ids(head.dashboard_url, "raysubmit_none", 10)
        finally:
            client.stop_job(submission)
