"""Read Ray's paused tasks, from a machine that is not a Ray node, as typed records.

The layer between Ray and the commands: legacy pdb pauses come from the GCS registry that
`ray debug` reads, debugpy pauses (post-mortem crashes and breakpoint() with RAY_DEBUG=1)
from the dashboard's state API; `find_pauses` reads both into one numbered list of `Pause`.
Formatting them is pause_views.py's; the commands (finder.py, probe.py) only choose.
"""

import json
import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ray._raylet import GcsClient
from ray.exceptions import RayError

from ray_debug_tools._dashboard import state_api_rows
from ray_debug_tools._net import RayDebugConnectionError, open_tcp
from ray_debug_tools.endpoints import Endpoints

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


def job_workers(dashboard_url: str, job_id: str, timeout: float = 10.0) -> set[str]:
    """The ids of the workers running a task of one job (hex job id), from the state API."""
    url = f"{dashboard_url.rstrip('/')}/api/v0/tasks"
    # The GCS applies both filters itself, so other jobs' tasks never count toward its row cap.
    filters = [("state", "=", "RUNNING"), ("job_id", "=", job_id)]
    return {row["worker_id"] for row in state_api_rows(url, timeout, filters=filters)}


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


# ---- every pause as one record -------------------------------------------------------------

LEGACY = "legacy"
POST_MORTEM = "post_mortem"
Mode = Literal["legacy", "post_mortem", "auto"]
TRACEBACK_FRAME = re.compile(r'^\s*File "(.+)", line (\d+)', re.MULTILINE)
# Where a node unpacks a job's working_dir: SESSION_DIR/runtime_resources/working_dir_files/
# NAME, NAME being the package's file name without .zip (ray/_private/runtime_env/packaging.py).
WORKING_DIR_FILES = "runtime_resources/working_dir_files"


@dataclass(frozen=True)
class Pause:
    """One paused task, as Ray's records tell it; `number` is what --vscode/--attach take."""

    number: int
    mode: str
    node_ip: str
    name: str
    host: str
    port: int
    file: str | None
    line: int | None
    waited_s: float | None
    # "pause" for legacy; "task_start" for debugpy, whose pause time Ray does not record.
    waited_from: str | None
    # "ValueError: boom" for a post-mortem pause; None for breakpoint() and legacy pauses.
    exception: str | None = None
    # The job's working_dir as the worker's frames name it, where the task row tells it.
    remote_root: str | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "-"


@dataclass(frozen=True)
class Raised:
    """Where a task raised and what, as far as its task row tells."""

    file: str | None
    line: int | None
    exception: str | None


def legacy_pauses(breakpoints: Iterable[LegacyBreakpoint], node_ips: dict[str, str]) -> list[Pause]:
    """Rows for remote pdb pauses; `node_ips` maps node id to IP (the registry lacks it)."""
    return [
        Pause(
            number=0,
            mode=LEGACY,
            # Without --ray-debugger-external the registered address is "localhost".
            node_ip=node_ips.get(bp.node_id, bp.ip),
            name=bp.proctitle.removeprefix("ray::") or f"task {bp.task_id}",
            host=bp.ip,
            port=bp.port,
            file=bp.filename,
            line=bp.lineno,
            waited_s=bp.waited_s,
            waited_from="pause",
        )
        for bp in breakpoints
    ]


def running_task(task_rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The task a worker runs now, from the rows of every task that ever ran in it."""
    running = [row for row in task_rows if row.get("state") == "RUNNING"]
    return max(running, key=lambda row: row.get("start_time_ms") or 0, default=None)


def task_raised(task: dict[str, Any] | None) -> Raised:
    """What a post-mortem pause's task raised, from its state API row.

    Ray's profiler ends the task's `task:execute` span with the traceback before the
    post-mortem hook pauses, so the last frame is where the debugger waits. A breakpoint()
    pause has no such event (its span is still open), nor has a pause whose event has not
    reached the GCS yet.
    """
    events = ((task or {}).get("profiling_data") or {}).get("events") or []
    for event in events:
        data = event.get("extra_data") or {}
        if event.get("event_name") == "task:execute" and "traceback" in data:
            frames = TRACEBACK_FRAME.findall(data["traceback"])
            file, line = frames[-1] if frames else (None, None)
            # "type" is str() of the class: "<class 'torch.OutOfMemoryError'>".
            kind = re.sub(r"^<class '(.+)'>$", r"\1", data.get("type", ""))
            value = data.get("value")
            return Raised(file, int(line) if line else None, f"{kind}: {value}" if value else kind)
    return Raised(None, None, None)


def job_root(task: dict[str, Any] | None, raised_file: str | None) -> str | None:
    """The directory on the worker's node that holds the job's working_dir, as its frames name
    it: read from the raising frame's path, or from the task's runtime env and its log path."""
    if raised_file and (found := re.match(rf"(.*/{WORKING_DIR_FILES}/[^/]+)/", raised_file)):
        return found[1]
    runtime_env = ((task or {}).get("runtime_env_info") or {}).get("serialized_runtime_env")
    try:
        uri = json.loads(runtime_env or "{}").get("working_dir") or ""
    except json.JSONDecodeError:
        return None
    log = ((task or {}).get("task_log_info") or {}).get("stdout_file") or ""
    session_dir = log.rpartition("/logs/")[0]
    if not (uri.startswith("gcs://") and session_dir):
        return None
    package = uri.rpartition("/")[2].removesuffix(".zip")
    return f"{session_dir}/{WORKING_DIR_FILES}/{package}"


def post_mortem_pauses(
    workers: Iterable[PausedWorker], tasks_by_worker: dict[str, list[dict[str, Any]]], now: float
) -> list[Pause]:
    """Rows for debugpy pauses, named after the task each worker runs (state API rows)."""
    pauses = []
    for worker in workers:
        task = running_task(tasks_by_worker.get(worker.worker_id, []))
        # Task events reach the GCS in batches, so a fresh pause may have no task row yet.
        name = (task.get("name") or task.get("func_or_class_name")) if task else None
        start_ms = task.get("start_time_ms") if task else None
        raised = task_raised(task)
        pauses.append(
            Pause(
                number=0,
                mode=POST_MORTEM,
                node_ip=worker.ip,
                name=name or f"worker pid {worker.pid}",
                host=worker.ip,
                port=worker.port,
                # The state API has no pause location: only a crash's traceback tells it.
                file=raised.file,
                line=raised.line,
                waited_s=now - start_ms / 1000 if start_ms else None,
                waited_from="task_start" if start_ms else None,
                exception=raised.exception,
                remote_root=job_root(task, raised.file),
            )
        )
    return pauses


def numbered(pauses: Iterable[Pause]) -> list[Pause]:
    """Oldest first, so a pause keeps its number while newer ones appear below it."""
    ordered = sorted(pauses, key=lambda p: (p.waited_s is None, -(p.waited_s or 0.0)))
    return [_renumber(pause, index) for index, pause in enumerate(ordered, start=1)]


def _renumber(pause: Pause, number: int) -> Pause:
    return Pause(**(asdict(pause) | {"number": number}))


def find_pauses(endpoints: Endpoints, mode: Mode, timeout: float) -> list[Pause]:
    """Every pause in the places `mode` says to look, numbered for --vscode/--attach."""
    found: list[Pause] = []
    if mode in (LEGACY, "auto") and endpoints.gcs:
        found += legacy_pauses(*_legacy_data(endpoints.gcs, timeout))
    if mode in (POST_MORTEM, "auto") and endpoints.dashboard:
        found += _post_mortem_data(endpoints.dashboard, timeout)
    return numbered(found)


def _legacy_data(gcs_address: str, timeout: float) -> tuple[list[LegacyBreakpoint], dict[str, str]]:
    try:
        breakpoints = legacy_breakpoints(gcs_address, timeout)
        if not breakpoints:
            return [], {}
        nodes = GcsClient(address=gcs_address).get_all_node_info(timeout=timeout)
    except RayError as exc:
        raise RayDebugConnectionError(f"GCS at {gcs_address} failed: {exc}") from exc
    except RayDebugConnectionError as exc:
        raise RayDebugConnectionError(f"GCS at {gcs_address}: {exc}") from exc
    return breakpoints, {
        node_id.hex(): info.node_manager_address for node_id, info in nodes.items()
    }


def _post_mortem_data(dashboard_url: str, timeout: float) -> list[Pause]:
    workers = paused_workers(dashboard_url, timeout)
    # One filtered query per paused worker: few workers pause, while a cluster-wide task
    # listing can hit the state API's 10000-row cap and miss the running task.
    tasks = {w.worker_id: worker_tasks(dashboard_url, w.worker_id, timeout) for w in workers}
    return post_mortem_pauses(workers, tasks, time.time())
