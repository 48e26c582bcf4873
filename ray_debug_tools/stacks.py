"""`ray-stacks`: every Ray worker's Python stack, on every node at once, grouped.

For the step that hangs: nothing pauses and nothing raises, and the rank that differs is the
one to look at. Asks the head's dashboard (token auth as Ray's own clients do it, no SSH) for
the workers of a job (`--job`) or of the whole cluster, has each node's dashboard agent read
them with py-spy at once, and prints the ranks grouped by identical stack, largest group
first: the odd ones out are the small groups, named by node, pid and task or actor.

A stack is what the threads that run a worker's tasks show: the main thread, where tasks and
sync actors run, and "AsyncIO Thread" for async actors; Ray's own threads are the same in
every worker and would only add noise (--all-threads groups by every thread). Line numbers
count, so ranks in one function at different lines are different groups; memory addresses
and thread ids do not.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ray._private.authentication.http_token_authentication import (
    get_auth_headers_if_auth_enabled,
)

from ray_debug_tools._dashboard import dashboard_get
from ray_debug_tools._net import RayDebugConnectionError
from ray_debug_tools.endpoints import DASHBOARD_PORT
from ray_debug_tools.pauses import state_api_rows

THREAD = re.compile(r'^Thread (\S+) \((\w+)\): "(.*)"$')
ADDRESS = re.compile(r"0x[0-9a-f]+")
# The threads a worker runs its tasks in; the rest are Ray's own.
TASK_THREADS = ("MainThread", "AsyncIO Thread")
# Requests in flight at once: one py-spy per worker runs on its node.
PARALLEL_READS = 64
EXIT_OK, EXIT_ERROR = 0, 1


@dataclass(frozen=True)
class Worker:
    """A Ray worker process and what runs in it."""

    node_ip: str
    pid: int
    worker_id: str
    # The running task's or the actor's name ("" for an idle worker).
    running: str = ""
    job_id: str = ""


@dataclass
class Stack:
    """One worker's stack as py-spy dumped it, or why it could not be read."""

    worker: Worker
    threads: list[tuple[str, list[str]]] = field(default_factory=list)
    error: str = ""


@dataclass
class Group:
    signature: tuple[tuple[str, tuple[str, ...]], ...]
    stacks: list[Stack]


def parse_dump(text: str) -> list[tuple[str, list[str]]]:
    """(thread name, frames innermost first) for each thread of a `py-spy dump`."""
    threads: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        header = THREAD.match(line)
        if header:
            threads.append((header.group(3), []))
        elif threads and line.startswith((" ", "\t")) and line.strip():
            threads[-1][1].append(line.strip())
    return threads


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


def resolve_job(dashboard: str, job: str, timeout: float) -> str:
    """Ray's hex job id, from itself or from a submission id (what `ray job submit` prints)."""
    if re.fullmatch(r"[0-9a-f]+", job):
        return job
    url = f"{dashboard.rstrip('/')}/api/jobs/{urllib.parse.quote(job)}"
    found = dashboard_get(url, timeout).get("job_id")
    if not found:
        raise RuntimeError(f"job {job} has no Ray job id yet: its driver has not started")
    return str(found)


def find_workers(dashboard: str, job_id: str | None, timeout: float) -> list[Worker]:
    """The live workers (of one job, or all), each with what runs in it, from the state API."""
    base = dashboard.rstrip("/")
    nodes = {
        row["node_id"]: row["node_ip"] for row in state_api_rows(f"{base}/api/v0/nodes", timeout)
    }
    job = [("job_id", "=", job_id)] if job_id else []
    running: dict[tuple[str, int], tuple[str, str]] = {}
    for row in state_api_rows(
        f"{base}/api/v0/actors", timeout, filters=[("state", "=", "ALIVE"), *job]
    ):
        if row.get("pid"):
            where = (nodes.get(row.get("node_id", ""), ""), int(row["pid"]))
            running[where] = (row.get("class_name") or row.get("name") or "actor", row["job_id"])
    for row in state_api_rows(
        f"{base}/api/v0/tasks", timeout, filters=[("state", "=", "RUNNING"), *job]
    ):
        if row.get("worker_pid"):
            where = (nodes.get(row.get("node_id", ""), ""), int(row["worker_pid"]))
            running[where] = (
                row.get("name") or row.get("func_or_class_name", "task"),
                row["job_id"],
            )
    workers = []
    for row in state_api_rows(
        f"{base}/api/v0/workers",
        timeout,
        filters=[("is_alive", "=", "True"), ("worker_type", "=", "WORKER")],
    ):
        where = (row["ip"], int(row["pid"]))
        if job_id and where not in running:
            continue
        name, job = running.get(where, ("", ""))
        workers.append(Worker(row["ip"], int(row["pid"]), row["worker_id"], name, job))
    return sorted(workers, key=lambda worker: (worker.node_ip, worker.pid))


def read_stack(dashboard: str, worker: Worker, native: bool, timeout: float) -> Stack:
    """The worker's stack through the head's dashboard and its node's agent (py-spy)."""
    query = urllib.parse.urlencode(
        {"ip": worker.node_ip, "pid": worker.pid, "native": "1" if native else "0"}
    )
    request = urllib.request.Request(
        f"{dashboard.rstrip('/')}/worker/traceback?{query}",
        headers=get_auth_headers_if_auth_enabled({}),
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        body = error.read().decode(errors="replace").strip()
        return Stack(worker, error=f"HTTP {error.code}: {_last_line(body)}")
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        return Stack(worker, error=f"no answer within {timeout:g} s: {error}")
    threads = parse_dump(text)
    return Stack(worker, threads) if threads else Stack(worker, error=_last_line(text))


def read_stacks(dashboard: str, workers: list[Worker], native: bool, timeout: float) -> list[Stack]:
    if not workers:
        return []
    with ThreadPoolExecutor(min(PARALLEL_READS, len(workers))) as pool:
        return list(
            pool.map(lambda worker: read_stack(dashboard, worker, native, timeout), workers)
        )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "an empty answer"


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ray-stacks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", help=f"head host (dashboard :{DASHBOARD_PORT})")
    where.add_argument("--dashboard", help="dashboard URL, e.g. http://HOST:8265")
    parser.add_argument(
        "--job", help="only the workers of this job: its submission id or its hex Ray job id"
    )
    parser.add_argument("--native", action="store_true", help="add C frames (NCCL, Gloo, CUDA)")
    parser.add_argument("--all-threads", action="store_true", help="group by every thread")
    parser.add_argument("--json", action="store_true", help="print the groups as JSON")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    dashboard = args.dashboard or f"http://{args.head}:{DASHBOARD_PORT}"
    started = time.monotonic()
    try:
        job = resolve_job(dashboard, args.job, args.timeout) if args.job else None
        workers = find_workers(dashboard, job, args.timeout)
    except (RayDebugConnectionError, RuntimeError) as exc:
        print(f"ray-stacks: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not workers:
        print(
            f"ray-stacks: no live worker{' of job ' + args.job if args.job else ''}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    stacks = read_stacks(dashboard, workers, args.native, args.timeout)
    groups = group(stacks, args.all_threads)
    failed = [stack for stack in stacks if stack.error]
    if args.json:
        print(report_json(groups, failed))
    else:
        print(format_report(groups, failed, len(workers), time.monotonic() - started))
    return EXIT_OK if groups else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
