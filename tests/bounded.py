"""Commands the tests run, each under a time limit: a hung run fails its own test, names the
Ansible task it hung in, and the suite goes on.

Imported by the molecule and sandbox tests from this directory (as doc_commands is).
"""

from __future__ import annotations

import configparser
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

# Long enough for a cold cluster-up of the molecule cluster on a busy 2-core machine (~5 min).
PLAYBOOK_LIMIT_S = 900
# What a single Ansible task may take (a wheel sync, a node's join) before Ansible stops it.
TASK_LIMIT_S = 600
CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"
ANSIBLE_CFG = Path(__file__).resolve().parents[1] / "ansible.cfg"


def callbacks_enabled(*more: str) -> str:
    """ANSIBLE_CALLBACKS_ENABLED for the callbacks `more` beside the checkout's own. The
    variable replaces ansible.cfg's list, so that list is read here, never named again."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ANSIBLE_CFG)
    own = config.get("defaults", "callbacks_enabled", fallback="")
    return ",".join([*more, *(name.strip() for name in own.split(",") if name.strip())])


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every process under it. Not by process group: ansible-playbook starts
    a session of its own, so the group of the command that ran it misses it and its modules."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name, in parentheses, may hold spaces: the parent follows its end.
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending += children.get(current, [])
    for member in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)


class RunTimedOut(AssertionError):
    """A command ran past its limit; the message names the last Ansible task it started."""


def run_bounded(
    args: list[str], timeout: float, env: dict[str, str] | None = None, **kwargs
) -> subprocess.CompletedProcess[str]:
    """subprocess.run(args, capture_output, text) that kills the command and everything under
    it after `timeout` seconds and raises RunTimedOut with the last Ansible task any
    ansible-playbook under it started and the end of its output."""
    with tempfile.NamedTemporaryFile("r", prefix="last-task-") as last_task:
        env = {
            **(os.environ if env is None else env),
            "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
            "ANSIBLE_CALLBACKS_ENABLED": callbacks_enabled("last_task"),
            "ANSIBLE_LAST_TASK_FILE": last_task.name,
            "ANSIBLE_TASK_TIMEOUT": str(TASK_LIMIT_S),
        }
        process = subprocess.Popen(
            args,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(process.pid)
            stdout, stderr = process.communicate()
            task = Path(last_task.name).read_text() or "no Ansible task started"
            raise RunTimedOut(
                f"{args} still running after {timeout} s, in task: {task}\n"
                f"{stdout[-2000:]}{stderr[-2000:]}"
            ) from None
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def run_until_cut(
    args: list[str], marker: str, timeout: float, env: dict[str, str] | None = None, **kwargs
) -> str:
    """Run `args` until a line of its output holds `marker`, then SIGKILL it and everything
    under it, as a dropped SSH session or a power cut would end a run; its output so far.
    Fails if the command ends, or `timeout` seconds pass, before the marker."""
    process = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )
    assert process.stdout is not None
    # A run that hangs before the marker prints nothing more: the kill ends the read.
    deadline = threading.Timer(timeout, kill_tree, (process.pid,))
    deadline.start()
    output: list[str] = []
    try:
        for line in process.stdout:
            output.append(line)
            if marker in line:
                return "".join(output)
    finally:
        deadline.cancel()
        kill_tree(process.pid)
        process.wait()
    raise AssertionError(
        f"{args} ended or ran past {timeout} s before printing {marker!r}:\n"
        + "".join(output)[-3000:]
    )
