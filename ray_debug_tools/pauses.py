"""Find Ray tasks paused in a debugger, from a machine that is not a Ray node."""

import json
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ray._raylet import GcsClient

from ray_debug_tools._dashboard import dashboard_get
from ray_debug_tools._net import open_tcp

# Namespace and key prefix written by ray/util/rpdb.py (ray_constants.KV_NAMESPACE_PDB).
PDB_NAMESPACE = b"ray_pdb"
PDB_KEY_PREFIX = b"RAY_PDB_"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class LegacyBreakpoint:
    """A task waiting in Ray's remote pdb for `ray debug` or `PdbSession`."""

    ip: str
    port: int
    filename: str
    lineno: int
    task_id: str
    job_id: str
    node_id: str
    waited_s: float
    # Defaults keep older constructors working; the registry entry always has them.
    proctitle: str = ""
    worker_id: str = ""
    actor_id: str | None = None

    @property
    def loopback_only(self) -> bool:
        """True when the worker bound localhost, i.e. the node lacks --ray-debugger-external."""
        return self.ip in LOOPBACK_HOSTS


@dataclass(frozen=True)
class PausedWorker:
    """A worker whose debugpy server waits for a DAP client (breakpoint or post-mortem)."""

    ip: str
    port: int
    worker_id: str
    node_id: str
    pid: int
    num_paused_threads: int


def legacy_breakpoints(gcs_address: str, timeout: float = 10.0) -> list[LegacyBreakpoint]:
    """Breakpoints of live jobs registered in the GCS internal KV, newest first.

    `gcs_address` is "HOST:PORT" of the head's GCS (`ray start --port`, default 6379).
    """
    host, _, port = gcs_address.rpartition(":")
    # GcsClient() blocks for about 40 s on an unreachable GCS; fail fast with the address.
    open_tcp(host.strip("[]"), int(port), timeout).close()
    gcs = GcsClient(address=gcs_address)
    keys = gcs.internal_kv_keys(PDB_KEY_PREFIX, namespace=PDB_NAMESPACE, timeout=timeout)
    values = gcs.internal_kv_multi_get(keys, namespace=PDB_NAMESPACE, timeout=timeout)
    # A worker killed while waiting leaves its key behind; `ray debug` drops those of dead jobs.
    live_jobs = {
        info.job_id.hex()
        for info in gcs.get_all_job_info(
            skip_submission_job_info_field=True, skip_is_running_tasks_field=True, timeout=timeout
        ).values()
        if not info.is_dead
    }
    now = time.time()
    found = [legacy_record(json.loads(value), now) for value in values.values()]
    found = [record for record in found if record.job_id in live_jobs]
    return sorted(found, key=lambda record: record.waited_s)


def paused_workers(dashboard_url: str, timeout: float = 10.0) -> list[PausedWorker]:
    """Workers with a paused thread, from the dashboard's state API.

    `dashboard_url` is like "http://HEAD:8265". Token auth follows Ray's own clients:
    RAY_AUTH_MODE=token with RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, set before Ray is imported.
    """
    rows = state_api_rows(f"{dashboard_url.rstrip('/')}/api/v0/workers", timeout)
    return paused_workers_from_rows(rows)


def paused_workers_from_rows(rows: list[dict[str, Any]]) -> list[PausedWorker]:
    """The paused workers among rows of `GET /api/v0/workers?detail=1`."""
    return [
        PausedWorker(
            ip=row["ip"],
            port=row["debugger_port"],
            worker_id=row["worker_id"],
            node_id=row["node_id"],
            pid=row["pid"],
            num_paused_threads=row["num_paused_threads"],
        )
        for row in rows
        # A worker keeps its debugger_port after a pause ends; only the count says it waits.
        if row.get("debugger_port") and (row.get("num_paused_threads") or 0) > 0
    ]


def worker_tasks(dashboard_url: str, worker_id: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Raw rows of `GET /api/v0/tasks?detail=1` for the tasks running in one worker."""
    url = f"{dashboard_url.rstrip('/')}/api/v0/tasks"
    # The GCS applies the state filter itself but not the worker_id one, which the dashboard
    # applies to what the GCS sent: without state=RUNNING, a job past the GCS's row limit
    # could lose the running task before the worker filter ever sees it.
    filters = [("state", "=", "RUNNING"), ("worker_id", "=", worker_id)]
    return state_api_rows(url, timeout, filters=filters)


def job_running_tasks(
    dashboard_url: str, job_id: str, timeout: float = 10.0
) -> list[dict[str, Any]]:
    """Raw rows of `GET /api/v0/tasks?detail=1` for the running tasks of one job (hex job id)."""
    url = f"{dashboard_url.rstrip('/')}/api/v0/tasks"
    # The GCS applies both filters itself, so other jobs' tasks never count toward its row cap.
    filters = [("state", "=", "RUNNING"), ("job_id", "=", job_id)]
    return state_api_rows(url, timeout, filters=filters)


def legacy_record(data: dict[str, Any], now: float) -> LegacyBreakpoint:
    """Parse one `RAY_PDB_*` registry value (JSON-decoded) as seen at time `now`."""
    host, _, port = data["pdb_address"].rpartition(":")
    return LegacyBreakpoint(
        ip=host.strip("[]"),
        port=int(port),
        filename=data["filename"],
        lineno=data["lineno"],
        task_id=data["task_id"],
        job_id=data["job_id"],
        node_id=data["node_id"],
        # Worker clock against ours: clock skew between the hosts shows up here.
        waited_s=now - data["timestamp"],
        proctitle=data.get("proctitle", ""),
        worker_id=data.get("worker_id", ""),
        actor_id=data.get("actor_id"),
    )


def state_api_rows(
    url: str,
    timeout: float,
    filters: list[tuple[str, str, str]] | None = None,
) -> list[dict[str, Any]]:
    # The state API truncates to 100 rows by default; 10000 is its server-side maximum.
    query = [("detail", "1"), ("limit", "10000")]
    # The server zips repeated filter_keys/filter_predicates/filter_values in order.
    for key, predicate, value in filters or []:
        query += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
    payload = dashboard_get(f"{url}?{urllib.parse.urlencode(query)}", timeout)
    if not payload.get("result"):
        raise RuntimeError(f"state API {url} failed: {payload.get('msg')}")
    return payload["data"]["result"]["result"]
