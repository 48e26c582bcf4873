"""The read layer of `verl-debug stacks`: the live workers of a job or of the cluster, from the
state API, and each one's stack, read by its node's dashboard agent with py-spy (all at once,
through the head's dashboard with the token)."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ray._private.authentication.http_token_authentication import (
    get_auth_headers_if_auth_enabled,
)

from ray_debug_tools._dashboard import job_ids, state_api_rows

THREAD = re.compile(r'^Thread (\S+) \((\w+)\): "(.*)"$')
# Requests in flight at once: one py-spy per worker runs on its node.
PARALLEL_READS = 64


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


def resolve_job(dashboard: str, job: str, timeout: float) -> str:
    """Ray's hex job id, from itself or from a submission id (what `ray job submit` prints)."""
    found = job_ids(dashboard, job, timeout).job_id
    if not found:
        raise RuntimeError(f"job {job} has no Ray job id yet: its driver has not started")
    return found


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
