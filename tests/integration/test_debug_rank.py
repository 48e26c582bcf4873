"""`verl-debug rank` on real local heads: a worker whose main thread is blocked in C (as a rank
waiting in a collective is) opens the cluster's debugger without a restart, and the debugger
shows the blocked thread's frames and variables. The node's hook comes from the role's
files, as the .pth line loads it on a node; the molecule test (test_hang.py) runs the same
on a hung Gloo all-reduce across nodes."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray_debug_on_demand
from ray_heads import NODE_HOOKS_PATH, RayHead, ray_head, start_driver

from ray_debug_tools import debug_rank
from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import legacy_breakpoints, paused_workers
from ray_debug_tools.pdb_client import PdbSession

NOBODY = 65534
# The task's main thread waits on a lock nobody releases: C code, no Python frame runs.
HUNG_DRIVER = """\
import sys

import ray

ray.init(address=sys.argv[1])


def waits_in_c(lock):
    secret = 42
    lock.acquire()


@ray.remote
def hung_rank():
    import _thread
    import os

    import ray_debug_on_demand

    ray_debug_on_demand.install()
    lock = _thread.allocate_lock()
    lock.acquire()
    print("HUNG_RANK", ray.util.get_node_ip_address(), os.getpid(), flush=True)
    waits_in_c(lock)


ray.get(hung_rank.remote())
"""
WAIT_LINE = HUNG_DRIVER.splitlines().index("    lock.acquire()") + 1


@dataclass(frozen=True)
class Hung:
    head: RayHead
    driver: subprocess.Popen[str]
    script: Path
    # (node ip, pid) of the task's worker.
    rank: tuple[str, int]


@contextmanager
def hung_rank(mode: dict[str, str], tmp_path: Path) -> Iterator[Hung]:
    """A head in `mode` whose driver's task waits in C; the driver is killed afterwards."""
    with ray_head(head_env(mode), tmp_path / "ray.log") as head:
        driver, script = start_driver(HUNG_DRIVER, tmp_path, head)
        try:
            assert driver.stdout is not None
            for line in driver.stdout:
                found = re.search(r"HUNG_RANK (\S+) (\d+)", line)
                if found:
                    yield Hung(head, driver, script, (found.group(1), int(found.group(2))))
                    return
            pytest.fail("the driver ended before its task hung")
        finally:
            driver.kill()
            driver.communicate()


def open_debugger(
    capsys: pytest.CaptureFixture[str], head: RayHead, rank: tuple[str, int]
) -> tuple[int, str, str]:
    node_ip, pid = rank
    code = debug_rank.main(["--dashboard", head.dashboard_url, node_ip, str(pid)])
    out, err = capsys.readouterr()
    return code, out, err


def head_env(mode: dict[str, str]) -> dict[str, str]:
    return mode | {
        "RAY_DEBUG_ON_DEMAND": "1",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [NODE_HOOKS_PATH, os.environ.get("PYTHONPATH")])
        ),
    }


def test_post_mortem_opens_debugpy_on_the_blocked_main_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with hung_rank({"RAY_DEBUG_POST_MORTEM": "1"}, tmp_path) as hung:
        head, driver, script, rank = hung.head, hung.driver, hung.script, hung.rank
        ip, pid = rank
        code, out, err = open_debugger(capsys, head, rank)
        assert code == 0, err
        assert re.search(rf"post_mortem debugger at {ip}:\d+\n", out), out
        assert f"waits at {script}:{WAIT_LINE} in waits_in_c" in out
        # The finder's line, pointed where this command was: the dashboard lists the pauses.
        assert f"`verl-debug breakpoints --dashboard {head.dashboard_url}` lists it" in out, out
        [paused] = [w for w in paused_workers(head.dashboard_url) if w.pid == pid]
        with DapSession.connect(paused.ip, paused.port, timeout=30) as dap:
            stopped = dap.attach_for_post_mortem()["body"]
            assert stopped["reason"] == "exception"
            frames = dap.stack_trace(stopped["threadId"])
            assert (frames[0]["name"], frames[0]["line"]) == ("waits_in_c", WAIT_LINE)
            assert dap.evaluate("secret", frames[0]["id"]) == "42"
            dap.continue_(stopped["threadId"])
            dap.disconnect()
        # The main thread never moved: the rank still waits, nothing was restarted.
        assert driver.poll() is None
        again = open_debugger(capsys, head, rank)
        assert again[0] == 0 and "already open" not in again[1], again
        # Another user of the node may not ask: the worker reads the caller's uid.
        asked = f"import ray_debug_on_demand as hook; print(hook.request({pid})['error'])"
        other = subprocess.run(
            ["/usr/bin/python3", "-c", asked],
            env={"PYTHONPATH": NODE_HOOKS_PATH, "RAY_DEBUG_POST_MORTEM": "1"},
            user=NOBODY,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.stdout == f"uid {NOBODY} may not open this worker's debugger\n", other


def test_legacy_opens_remote_pdb_listed_where_the_main_thread_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with hung_rank({"RAY_DEBUG": "legacy"}, tmp_path) as hung:
        head, driver, script, rank = hung.head, hung.driver, hung.script, hung.rank
        code, out, err = open_debugger(capsys, head, rank)
        assert code == 0, err
        assert "legacy debugger at localhost:" in out, out
        [entry] = legacy_breakpoints(head.gcs_address)
        # The finder's line names the GCS the breakpoint is listed in, as the cluster names it
        # (at the head node's address), and the breakpoint is listed there.
        hint = re.search(
            rf"`verl-debug breakpoints --dashboard {head.dashboard_url} --gcs (\S+)`", out
        )
        assert hint, out
        assert [bp.port for bp in legacy_breakpoints(hint[1])] == [entry.port]
        assert (entry.filename, entry.lineno) == (str(script), WAIT_LINE)
        session = PdbSession.connect("127.0.0.1", entry.port, timeout=30)
        assert "waits_in_c()" in session.banner, session.banner
        assert "waits_in_c()" in session.command("where")
        assert session.command("p secret") == "42"
        session.continue_()
        # The remote pdb deregistered once attached; the rank still waits.
        assert legacy_breakpoints(head.gcs_address) == []
        assert driver.poll() is None


def test_off_refuses_and_names_the_modes_that_have_a_debugger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAY_DEBUG", "0")
    monkeypatch.delenv("RAY_DEBUG_POST_MORTEM", raising=False)
    reply = ray_debug_on_demand.request(os.getpid())
    assert "debug_mode=off" in reply["error"]
    assert "debug_mode=post_mortem or debug_mode=legacy" in reply["error"]


def test_a_process_without_the_hook_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_DEBUG_POST_MORTEM", "1")
    reply = ray_debug_on_demand.request(os.getpid())
    assert reply["error"].startswith(f"pid {os.getpid()} does not listen"), reply
