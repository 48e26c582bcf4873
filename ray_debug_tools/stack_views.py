"""What `verl-debug stacks` prints: stacks grouped by what their task threads show, largest group
first, as text for the operator or JSON for scripts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ray_debug_tools.worker_stacks import Stack, Worker

ADDRESS = re.compile(r"0x[0-9a-f]+")
# The threads a worker runs its tasks in; the rest are Ray's own.
TASK_THREADS = ("MainThread", "AsyncIO Thread")


@dataclass
class Group:
    signature: tuple[tuple[str, tuple[str, ...]], ...]
    stacks: list[Stack]


def signature(
    threads: list[tuple[str, list[str]]], all_threads: bool = False
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What makes two workers' stacks the same: their task threads' frames, addresses masked."""
    chosen = [
        (name, frames) for name, frames in threads if all_threads or name.startswith(TASK_THREADS)
    ] or threads
    return tuple(
        sorted(
            (name, tuple(ADDRESS.sub("0x…", frame) for frame in frames)) for name, frames in chosen
        )
    )


def group(stacks: Iterable[Stack], all_threads: bool = False) -> list[Group]:
    """Read stacks grouped by signature, the largest group first (ties: the first seen)."""
    groups: dict[tuple[Any, ...], Group] = {}
    for stack in stacks:
        if stack.error:
            continue
        key = signature(stack.threads, all_threads)
        groups.setdefault(key, Group(key, [])).stacks.append(stack)
    return sorted(groups.values(), key=lambda found: -len(found.stacks))


def _who(worker: Worker) -> str:
    return f"{worker.node_ip} pid {worker.pid}" + (f" {worker.running}" if worker.running else "")


def format_report(groups: list[Group], failed: list[Stack], workers: int, seconds: float) -> str:
    read = sum(len(found.stacks) for found in groups)
    nodes = len({stack.worker.node_ip for found in groups for stack in found.stacks})
    lines = [
        f"{read} of {workers} workers read on {nodes} nodes in {seconds:.1f} s,"
        f" {len(groups)} distinct stack{'s' if len(groups) != 1 else ''}"
    ]
    for number, found in enumerate(groups, 1):
        odd = len(groups) > 1 and number > 1
        lines += [
            "",
            f"[{number}] {len(found.stacks)} worker{'s' if len(found.stacks) != 1 else ''}"
            + (" (odd one out)" if odd and len(found.stacks) == 1 else ""),
        ]
        for stack in found.stacks:
            lines.append(f"    {_who(stack.worker)}")
        for name, frames in found.signature:
            lines.append(f"  thread {name!r}:")
            lines += [f"      {frame}" for frame in frames]
    if failed:
        lines += ["", f"not read ({len(failed)}):"]
        lines += [f"    {_who(stack.worker)}: {stack.error}" for stack in failed]
    return "\n".join(lines)


def report_json(groups: list[Group], failed: list[Stack]) -> str:
    return json.dumps(
        {
            "groups": [
                {
                    "workers": [asdict(stack.worker) for stack in found.stacks],
                    "threads": [
                        {"name": name, "frames": list(frames)} for name, frames in found.signature
                    ],
                }
                for found in groups
            ],
            "not_read": [{**asdict(stack.worker), "error": stack.error} for stack in failed],
        },
        indent=2,
    )
