"""The three ways to a debug-ready cluster, each timed from bare nodes to every node alive."""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

from bench.nodes import PROJECT, RESULTS, SSH_INVENTORY, Nodes, run
from tests.bounded import callbacks_enabled

VENV_BIN = Path(sys.executable).parent
ARCHIVE = RESULTS / "wheelhouse.tar"
LOCK = RESULTS / "requirements.lock"
# cluster-up's locks, which the sandbox's removal deletes with its artifacts, and their copies.
LOCKS = PROJECT / "artifacts/bench/locks"
KEPT_LOCKS = RESULTS / "locks"
WHEELHOUSE = PROJECT / ".cache/wheelhouse"
RECAP = re.compile(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", re.MULTILINE)
# Every task's seconds in the recap of ansible.posix.profile_tasks, longest first, beside
# ansible.cfg's own callbacks: the bench runs what users do.
PROFILE_TASKS = {
    "ANSIBLE_CALLBACKS_ENABLED": callbacks_enabled("ansible.posix.profile_tasks"),
    "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all",
    "PROFILE_TASKS_SORT_ORDER": "descending",
}
# A name wider than the terminal leaves one or two of the dashes it pads names with.
TASK_SECONDS = re.compile(r"^(.*?) -+ (\d+\.\d\d)s$", re.MULTILINE)


class Run(NamedTuple):
    seconds: float
    changed: int
    # (task name, seconds), longest first; a task that ran in several plays is listed for each.
    tasks: list[tuple[str, float]]


def cluster_up(
    *extra: str, env: dict[str, str] | None = None, playbook: str = "cluster-up.yml"
) -> Run:
    """`cluster-up.yml` (or `playbook`) on the benchmark nodes: its seconds, the tasks it
    changed and what each task took."""
    started = time.monotonic()
    output = run(
        VENV_BIN / "ansible-playbook", "-i", SSH_INVENTORY, playbook, *extra,
        env={**os.environ, **PROFILE_TASKS, **(env or {})},
    )  # fmt: skip
    return Run(
        seconds=time.monotonic() - started,
        changed=sum(int(changed) for _, changed in RECAP.findall(output)),
        tasks=[(name, float(seconds)) for name, seconds in TASK_SECONDS.findall(output)],
    )


def controller_cpu() -> float:
    """CPU seconds this process's finished children used: ansible-playbook and its forks."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def keep_locks() -> None:
    """After an untimed cluster-up: the locks it resolved, put back before every timed run
    (restore_locks), as its wheelhouse archive stays: a timed run starts where the controller
    of a cluster whose nodes were made anew starts, holding both."""
    shutil.copytree(LOCKS, KEPT_LOCKS, dirs_exist_ok=True)


def forget_locks() -> None:
    """Before a run that is not resumed: its warm-ups resolve the locks it keeps. A lock kept
    by an earlier run (of other requirements, light nodes' without verl) would be one more lock
    beside the one its cluster-up resolves."""
    shutil.rmtree(KEPT_LOCKS, ignore_errors=True)


def restore_locks() -> None:
    if KEPT_LOCKS.is_dir():
        shutil.copytree(KEPT_LOCKS, LOCKS, dirs_exist_ok=True)


def keep_lock_and_archive() -> None:
    """After a cluster-up: the lock it installed and its wheelhouse, for the other methods."""
    [lock] = LOCKS.glob("*.lock")
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    shutil.copyfile(lock, LOCK)
    ARCHIVE.unlink(missing_ok=True)
    os.link(WHEELHOUSE / f"{digest}.tar", ARCHIVE)


def ray_up(nodes: Nodes) -> float:
    """Seconds for `ray up` (local provider) until the autoscaler has every worker alive."""
    started = time.monotonic()
    run(
        VENV_BIN / "ray", "up", "-y", "--no-config-cache", "bench/ray-up.yaml",
        env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"),
    )  # fmt: skip
    wait_alive(nodes.head, len(nodes.names))
    return time.monotonic() - started


def manual(nodes: Nodes, head_alone: bool = False, all_at_once: bool = False) -> float:
    """Seconds for the hand sequence over SSH, one node at a time; with `head_alone`, on the
    head only: the limit, what one node costs without any orchestration; with `all_at_once`,
    on every node at the same time: the floor for the cluster."""
    addresses = [nodes.head] if head_alone else [nodes.head, *nodes.worker_addresses]
    at_once = ["--all-at-once"] if all_at_once else []
    started = time.monotonic()
    run("bench/manual.sh", *at_once, RESULTS / "id_ed25519", ARCHIVE, LOCK, *addresses)
    wait_alive(nodes.head, len(addresses))
    return time.monotonic() - started


def wait_alive(head: str, count: int, timeout: float = 900) -> None:
    """Until the head's state API lists `count` ALIVE nodes (clusters without token auth)."""
    deadline = time.monotonic() + timeout
    url = f"http://{head}:8265/api/v0/nodes?limit=10000"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                rows = json.load(response)["data"]["result"]["result"]
            if sum(row["state"] == "ALIVE" for row in rows) >= count:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} nodes not alive at {head} after {timeout:g} s")
        time.sleep(1)
