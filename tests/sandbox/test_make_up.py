"""The newcomer's path: `make up`, `make probe`, `make down` on a 1 head + 1 worker sandbox.

The probe must pass on the fresh sandbox and fail, naming the node, the debugger address and
the fix, once the worker's debugger ports are filtered for this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ray_debug_tools.dap_client import DapSession

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "tests"))
from bounded import PLAYBOOK_LIMIT_S, run_bounded  # noqa: E402
from doc_commands import commands, derived, ran  # noqa: E402
from extension import forwarding, paused_through  # noqa: E402

README = commands((PROJECT / "README.md").read_text())
# The job a reader debugs: a task that crashes, so post_mortem pauses it.
MY_JOB = """import ray

@ray.remote
def step():
    answer = 42
    raise ValueError(f"my job crashed with answer={answer}")

ray.init()
ray.get(step.remote())
"""
WORKER = "ray-sandbox-w1"
# Stands for a site firewall between the operator and one worker's debuggers.
BLOCK_CONTROLLER = "insert rule inet ray_cluster input ip saddr 10.124.0.1 tcp dport {ports} drop"


def make(*args: str) -> subprocess.CompletedProcess:
    """`make ARGS` as the README types it; past PLAYBOOK_LIMIT_S the test fails, naming the
    Ansible task it hung in."""
    ran(" ".join(["make", *args]))
    return run_bounded(["make", *args], PLAYBOOK_LIMIT_S, cwd=PROJECT)


def docker_exec(*args: str) -> None:
    subprocess.run(["docker", "exec", WORKER, *args], check=True, timeout=120)


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


def readme_lines(*starts: str) -> list[str]:
    """README.md's commands that start so, in order, with the reader's checkout put here."""
    return [
        derived(text, text.replace("/path/to/ray-cluster", str(PROJECT)))
        for text in README
        if text.startswith(starts)
    ]


def test_readme_debugs_a_job(sandbox: str, tmp_path: Path) -> None:
    """README's lines, from a job's own directory: submit it, find its pause, get VS Code's
    launch.json for it, find it as the extension does through README's forwarder. Release
    the pause the way VS Code would, over DAP."""
    (tmp_path / "my_job.py").write_text(MY_JOB)
    setup_lines = readme_lines("source ", "export RAY_AUTH_MODE=")
    setup = "\n".join(setup_lines)
    (submit,) = readme_lines("ray job submit ")
    listing, vscode = readme_lines("verl-debug breakpoints ")
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}
    for line in [*setup_lines, submit, listing]:
        ran(line)
    job = subprocess.Popen(
        ["bash", "-c", f"{setup}\n{submit}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            listed = subprocess.run(
                ["bash", "-c", f"{setup}\n{listing}"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            # Only this job's pause, so that README's "--vscode 1" is it: a probe run by an
            # earlier test can leave its own pause listed for a few seconds.
            only_ours = "my_job.py" in listed.stdout and "probe_job.py" not in listed.stdout
            if only_ours or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert listed.returncode == 0 and only_ours, listed.stdout + listed.stderr
        ran(vscode)
        launch = subprocess.run(
            ["bash", "-c", f"{setup}\n{vscode}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert launch.returncode == 0, listed.stdout + launch.stdout + launch.stderr
        connect = json.loads(launch.stdout)["configurations"][0]["connect"]
        assert 52000 <= connect["port"] <= 52099, connect
        # The extension's discovery with no token of its own, through README's forwarder.
        (forward,) = readme_lines("verl-debug forward ")
        ran(forward)
        with forwarding(f"{setup}\n{forward}", env) as dashboard:
            assert dashboard == "http://127.0.0.1:8265", dashboard
            assert (connect["host"], connect["port"]) in paused_through(dashboard)
        with DapSession.connect(connect["host"], connect["port"]) as session:
            stopped = session.attach_for_post_mortem()
            session.continue_(stopped["body"]["threadId"])
        output, _ = job.communicate(timeout=120)
    finally:
        job.kill()
    assert "my job crashed with answer=42" in output, output[-3000:]


def test_readme_collective_check(sandbox: str) -> None:
    (check,) = readme_lines("ansible-playbook -i artifacts/ray-sandbox/hosts.yml ")
    ran(check)
    run = run_bounded(["bash", "-c", check], PLAYBOOK_LIMIT_S, cwd=PROJECT)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "ray-sandbox-w1" in run.stdout


def test_make_down_removes_the_sandbox(sandbox: str) -> None:
    down = make("down")
    assert down.returncode == 0
    listed = subprocess.run(
        ["docker", "ps", "--all", "--filter", "name=ray-sandbox", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert listed.stdout.strip() == ""
    assert not (PROJECT / "artifacts/ray-sandbox").exists()
