"""verl-debug forward against a real head with token auth on: the Ray Distributed Debugger
extension's discovery (the state API's workers and tasks) lists a paused worker and its
debugger port through the forwarder, and the same requests straight at the head get 401."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from ray_heads import FAILING_DRIVER, finish, free_port, ray_head, start_driver, wait_for_pauses

from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import paused_workers_from_rows

# What the extension polls: every worker with its debugger port and paused threads, and the
# tasks with their debugger state (the state API's detail rows).
DISCOVERY = ("/api/v0/workers?detail=1&limit=10000", "/api/v0/tasks?detail=1&limit=10000")


def get(url: str) -> Any:
    """GET without any token, as a client that knows none."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture
def token_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The operator's environment for a token cluster: the head, the driver and the forwarder
    read the same token file."""
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    return token


def start_forwarder(dashboard: str, port: int) -> subprocess.Popen[str]:
    forwarder = subprocess.Popen(
        [sys.executable, "-m", "ray_debug_tools", "forward", "--dashboard", dashboard,
         "--port", str(port)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert forwarder.stderr is not None
    # It says where it serves once it listens.
    assert "verl-debug forward: http://127.0.0.1:" in forwarder.stderr.readline()
    return forwarder


def test_the_extensions_discovery_goes_through_with_the_token(
    tmp_path: Path, token_env: Path
) -> None:
    with ray_head({"RAY_DEBUG_POST_MORTEM": "1"}, tmp_path / "ray-start.log") as head:
        driver, _ = start_driver(FAILING_DRIVER, tmp_path, head)
        port = free_port()
        forwarder = start_forwarder(head.dashboard_url, port)
        try:
            local = f"http://127.0.0.1:{port}"
            [worker] = wait_for_pauses(
                lambda: paused_workers_from_rows(
                    get(local + DISCOVERY[0])["data"]["result"]["result"]
                ),
                driver,
            )
            assert worker.port > 0
            # Task events reach the GCS in batches: the paused worker's task row may come later.
            wait_for_pauses(
                lambda: [
                    task
                    for task in get(local + DISCOVERY[1])["data"]["result"]["result"]
                    if task["worker_id"] == worker.worker_id
                ],
                driver,
            )
            for path in DISCOVERY:
                with pytest.raises(urllib.error.HTTPError) as refused:
                    get(head.dashboard_url + path)
                assert refused.value.code == 401
            # The forwarder carries no one else's credentials: a wrong token is replaced.
            wrong = urllib.request.Request(
                local + DISCOVERY[0], headers={"Authorization": "Bearer not-the-token"}
            )
            with urllib.request.urlopen(wrong, timeout=10) as response:
                assert response.status == 200
        finally:
            forwarder.terminate()
            forwarder.wait(timeout=30)
        with DapSession.connect(worker.ip, worker.port, timeout=30) as dap:
            dap.continue_(dap.attach_for_post_mortem()["body"]["threadId"])
            dap.disconnect()
        assert "FAILED" in finish(driver)


def test_without_a_token_it_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    run = subprocess.run(
        [sys.executable, "-m", "ray_debug_tools", "forward", "--head", "192.0.2.1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert "set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH" in run.stderr
