"""The newcomer's path: `make up`, `make probe`, `make down` on a 1 head + 1 worker sandbox.

The probe must pass on the fresh sandbox and fail, naming the node, the debugger address and
the fix, once the worker's debugger ports are filtered for this machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
WORKER = "ray-sandbox-w1"
# Stands for a site firewall between the operator and one worker's debuggers.
BLOCK_CONTROLLER = "insert rule inet ray_cluster input ip saddr 10.124.0.1 tcp dport {ports} drop"


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=PROJECT, capture_output=True, text=True, check=False)


def docker_exec(*args: str) -> None:
    subprocess.run(["docker", "exec", WORKER, *args], check=True)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[str]:
    up = make("up", "WORKERS=1", "MODE=post_mortem")
    try:
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        yield up.stdout
    finally:
        down = make("down")
        assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-4000:]


def test_make_up_prints_dashboard_mode_and_runbook(sandbox: str) -> None:
    assert "Dashboard: http://10.124.0.2:8265" in sandbox
    assert "is up in post_mortem debug mode" in sandbox
    assert "Runbook: " + str(PROJECT / "artifacts/ray-sandbox/RUNBOOK.md") in sandbox


def test_probe_passes_on_a_fresh_sandbox(sandbox: str) -> None:
    probe = make("probe")
    assert probe.returncode == 0, probe.stdout[-4000:]
    report = next(line for line in probe.stdout.splitlines() if WORKER in line and "2.60.0" in line)
    assert "post_mortem" in report and report.rstrip().rstrip("'").endswith("yes")


def test_probe_fails_with_a_diagnosis_when_a_debugger_is_filtered(sandbox: str) -> None:
    docker_exec("nft", *BLOCK_CONTROLLER.format(ports="52000-52099").split())
    try:
        probe = make("probe")
    finally:
        docker_exec("systemctl", "reload", "ray-firewall")
    assert probe.returncode != 0
    assert f"FAILED {WORKER}: debugger 10.124.0.3:520" in probe.stdout
    assert "filtered from 10.124.0.1: add 10.124.0.1/32" in probe.stdout
    assert "to ray_trusted_cidrs" in probe.stdout


def test_make_down_removes_the_sandbox(sandbox: str) -> None:
    down = make("down")
    assert down.returncode == 0
    listed = subprocess.run(
        ["docker", "ps", "--all", "--filter", "name=ray-sandbox", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.strip() == ""
    assert not (PROJECT / "artifacts/ray-sandbox").exists()
