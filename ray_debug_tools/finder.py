"""`ray-breakpoints`: list the tasks paused in a Ray debugger and attach to one.

Runs on an operator's machine that is not a Ray node. Legacy pdb pauses come from the GCS
registry that `ray debug` reads; debugpy pauses (post-mortem crashes and breakpoint() with
RAY_DEBUG=1) come from the dashboard's state API. Listing never attaches: attaching is what
consumes a pause, so only --attach (pdb) or the VS Code config (debugpy) does that.

When a verl step raises or hits breakpoint(), every rank pauses at once, so the default list
shows one line per place the ranks stopped; --all lists each pause with its number.
"""

import argparse
import codecs
import json
import re
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal, TextIO

from ray._raylet import GcsClient
from ray.exceptions import RayError

from ray_debug_tools._net import RayDebugConnectionError, open_tcp
from ray_debug_tools.pauses import (
    LOOPBACK_HOSTS,
    LegacyBreakpoint,
    PausedWorker,
    legacy_breakpoints,
    paused_workers,
    worker_tasks,
)

GCS_PORT = 6379
DASHBOARD_PORT = 8265
LEGACY = "legacy"
POST_MORTEM = "post_mortem"
Mode = Literal["legacy", "post_mortem", "auto"]
TABLE_HEADER = ("#", "mode", "node ip", "task/actor", "file:line", "debugger", "waited")
GROUP_HEADER = ("#", "mode", "paused", "nodes", "task/actor", "file:line", "debugger", "max wait")
NODES_SHOWN = 2
EXCEPTION_WIDTH = 100
TRACEBACK_FRAME = re.compile(r'^\s*File "(.+)", line (\d+)', re.MULTILINE)
# Where a node unpacks a job's working_dir: SESSION_DIR/runtime_resources/working_dir_files/
# NAME, NAME being the package's file name without .zip (ray/_private/runtime_env/packaging.py).
WORKING_DIR_FILES = "runtime_resources/working_dir_files"
# What VS Code names the folder it has open: the operator's copy of the job.
WORKSPACE = "${workspaceFolder}"
# Exit codes: 2 is argparse's for misuse, and --vscode/--attach on the wrong kind of pause
# is a misuse the operator fixes by switching flags.
EXIT_OK, EXIT_ERROR, EXIT_WRONG_KIND = 0, 1, 2


@dataclass(frozen=True)
class Pause:
    """One paused task as the table shows it; `number` is what --vscode/--attach take."""

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


@dataclass(frozen=True)
class Endpoints:
    gcs: str | None
    dashboard: str | None


# ---- pure parts: plain data in, rows and text out ------------------------------------------


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


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    # Clock skew between the worker and this machine can make a fresh pause look negative.
    total = max(int(seconds), 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def group_key(pause: Pause) -> tuple[str, str, str, str | None]:
    """Pauses with one key stopped at one place, like the ranks of one verl step.

    The task name counts because a breakpoint() pause in debugpy has no file:line. Of the
    exception, only its type counts: messages often name the rank or GPU (a CUDA OOM reports
    each GPU's free memory), which would split one crash into a line per rank.
    """
    return (pause.mode, pause.name, pause.location, _exception_type(pause))


def grouped(pauses: list[Pause]) -> list[list[Pause]]:
    """Pauses by `group_key`, each group in pause order and ordered by its first pause."""
    groups: dict[tuple[str, str, str, str | None], list[Pause]] = {}
    for pause in pauses:
        groups.setdefault(group_key(pause), []).append(pause)
    return list(groups.values())


def number_spans(numbers: Iterable[int]) -> str:
    """1, 2, 3, 5 -> "1-3,5"."""
    runs: list[tuple[int, int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def format_table(pauses: list[Pause], command: str) -> str:
    """The numbered table plus notes and how to attach; `command` repeats the address flags."""
    if not pauses:
        return "No paused tasks."
    lines = _aligned([TABLE_HEADER, *(_table_cells(pause) for pause in pauses)])
    return "\n".join([*lines, "", *_notes(pauses), attach_hint(pauses, command)])


def format_groups(pauses: list[Pause], command: str) -> str:
    """The default list: one line per group, its exception under it, then how to attach."""
    if not pauses:
        return "No paused tasks."
    groups = grouped(pauses)
    header, *rows = _aligned([GROUP_HEADER, *(_group_cells(group) for group in groups)])
    # Under the mode column: the exception is too long for a column of its own.
    indent = " " * header.index(GROUP_HEADER[1])
    lines = [header]
    for row, group in zip(rows, groups, strict=True):
        lines.append(row)
        if raised := _group_exception(group):
            lines.append(indent + "raised " + raised)
    if any(len(group) > 1 for group in groups):
        lines += ["", f"Each pause on its own line, numbered: `{command} --all`."]
    return "\n".join([*lines, "", *_notes(pauses), attach_hint(pauses, command)])


def attach_hint(pauses: list[Pause], command: str) -> str:
    hints = []
    if any(pause.mode == LEGACY for pause in pauses):
        hints.append(f"pdb pause: `{command} --attach N`")
    if any(pause.mode == POST_MORTEM for pause in pauses):
        hints.append(
            f"debugpy pause: `{command} --vscode N > .vscode/launch.json`, then start "
            "debugging in VS Code"
        )
    if any(len(group) > 1 and group[0].mode == POST_MORTEM for group in grouped(pauses)):
        hints.append(
            f"every debugpy pause on pause N's line at once: `{command} --vscode-group N "
            "> .vscode/launch.json`"
        )
    return "To attach to pause N, " + "; ".join(hints) + "."


def pauses_json(pauses: list[Pause]) -> str:
    """One object per pause; `group` is the first pause number of its line in the list."""
    group_of = {pause.number: group[0].number for group in grouped(pauses) for pause in group}
    return json.dumps(
        [
            asdict(pause) | {"address": pause.address, "group": group_of[pause.number]}
            for pause in pauses
        ],
        indent=2,
    )


def launch_config(pauses: list[Pause], local_root: str = WORKSPACE) -> dict[str, Any]:
    """A VS Code launch.json that attaches the Python debugger to debugpy pauses; for more
    than one, a compound attaches to all of them at once. Where a pause's job has a
    working_dir, its files map to `local_root`: VS Code opens the operator's own files and
    binds the breakpoints set in them."""
    configurations = [
        {
            # The address keeps names unique, which the compound needs to refer to them.
            "name": f"Ray: {pause.name} on {pause.address}",
            "type": "debugpy",
            "request": "attach",
            "connect": {"host": pause.host, "port": pause.port},
            # Ray's own frames (the worker loop, the post-mortem hook) sit above the task.
            "justMyCode": False,
        }
        | (
            {"pathMappings": [{"localRoot": local_root, "remoteRoot": pause.remote_root}]}
            if pause.remote_root
            else {}
        )
        for pause in pauses
    ]
    config: dict[str, Any] = {"version": "0.2.0", "configurations": configurations}
    if len(pauses) > 1:
        config["compounds"] = [
            {
                "name": f"Ray: all {len(pauses)} pauses of {pauses[0].name}",
                "configurations": [configuration["name"] for configuration in configurations],
            }
        ]
    return config


def resolve_endpoints(head: str | None, dashboard: str | None, gcs: str | None) -> Endpoints:
    """Explicit --dashboard/--gcs win over the defaults derived from --head."""
    if head:
        host = f"[{head}]" if ":" in head and not head.startswith("[") else head
        gcs = gcs or f"{host}:{GCS_PORT}"
        dashboard = dashboard or f"http://{host}:{DASHBOARD_PORT}"
    if dashboard and "://" not in dashboard:
        dashboard = f"http://{dashboard}"
    return Endpoints(gcs=gcs, dashboard=dashboard.rstrip("/") if dashboard else None)


def _renumber(pause: Pause, number: int) -> Pause:
    return Pause(**(asdict(pause) | {"number": number}))


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _table_cells(pause: Pause) -> tuple[str, ...]:
    return (
        str(pause.number),
        pause.mode,
        pause.node_ip,
        pause.name,
        pause.location,
        pause.address,
        _waited([pause]),
    )


def _group_cells(group: list[Pause]) -> tuple[str, ...]:
    first = group[0]
    node_ips = list(dict.fromkeys(pause.node_ip for pause in group))
    nodes = ", ".join(node_ips[:NODES_SHOWN]) + (", ..." if len(node_ips) > NODES_SHOWN else "")
    if len(node_ips) > 1:
        nodes = f"{len(node_ips)} nodes: {nodes}"
    ports = sorted(pause.port for pause in group)
    # A lone pause shows its address, as --all does, ready for any DAP client or `nc`.
    if len(group) == 1:
        debugger = first.address
    else:
        debugger = f"ports {ports[0]}-{ports[-1]}" if ports[0] != ports[-1] else f"port {ports[0]}"
    return (
        number_spans(pause.number for pause in group),
        first.mode,
        str(len(group)),
        nodes,
        first.name,
        first.location,
        debugger,
        _waited(group),
    )


def _group_exception(group: list[Pause]) -> str | None:
    exceptions = {pause.exception for pause in group if pause.exception}
    if not exceptions:
        return None
    if len(exceptions) > 1:
        return f"{_exception_type(group[0])} (messages differ; --json has each)"
    return textwrap.shorten(exceptions.pop(), EXCEPTION_WIDTH, placeholder=" ...")


def _exception_type(pause: Pause) -> str | None:
    return pause.exception.partition(":")[0] if pause.exception else None


def _waited(pauses: list[Pause]) -> str:
    """The longest wait; a star when it counts from the task's start."""
    waits = [pause.waited_s for pause in pauses if pause.waited_s is not None]
    waited = format_duration(max(waits, default=None))
    if any(pause.waited_from == "task_start" for pause in pauses):
        waited += "*"
    return waited


def _notes(pauses: list[Pause]) -> list[str]:
    notes = []
    if any(pause.waited_from == "task_start" for pause in pauses):
        notes.append("* since the task started: Ray does not record when a debugpy pause began.")
    if any(pause.mode == LEGACY and pause.host in LOOPBACK_HOSTS for pause in pauses):
        notes.append(
            "localhost: that node runs without --ray-debugger-external, so its pdb pauses "
            "are reachable only from the node itself (`ray debug` there)."
        )
    return notes


# ---- cluster access ------------------------------------------------------------------------


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


def attach_pdb(pause: Pause, timeout: float, stdin: TextIO, stdout: TextIO) -> None:
    """Relay a terminal to a remote pdb, like `ray debug`, until the worker hangs up.

    The worker closes the connection on `c`; end of input (Ctrl-D) is passed on and pdb
    treats it as `quit`, as a local pdb would.
    """
    sock = open_tcp(pause.host, pause.port, timeout)
    # No timeout from here on: the operator may sit at the prompt as long as they like.
    sock.settimeout(None)
    # A thread for input because select() cannot wait on every stdin (pipes on Windows,
    # StringIO in tests); it is a daemon so a line half-typed at hang-up does not block exit.
    threading.Thread(target=_send_lines, args=(sock, stdin), daemon=True).start()
    try:
        _copy_output(sock, stdout)
    finally:
        sock.close()


def _send_lines(sock: socket.socket, stdin: TextIO) -> None:
    try:
        for line in stdin:
            sock.sendall(line.encode())
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        return  # the worker hung up (after `c`); the output side reports that


def _copy_output(sock: socket.socket, stdout: TextIO) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := sock.recv(65536):
        # pdb's prompt has no newline, so flush every chunk.
        stdout.write(decoder.decode(chunk))
        stdout.flush()


# ---- command line --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ray-breakpoints",
        description="List Ray tasks paused in a debugger (legacy pdb or debugpy) and attach.",
        epilog="Listing never attaches; attaching is what uses up a pause. On a cluster with "
        "token auth, set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH (or RAY_AUTH_TOKEN), "
        "as for the ray CLI.",
    )
    parser.add_argument("--head", help=f"head host: GCS :{GCS_PORT}, dashboard :{DASHBOARD_PORT}")
    parser.add_argument("--dashboard", help="dashboard URL, e.g. http://HOST:8265")
    parser.add_argument("--gcs", help="GCS address HOST:PORT")
    parser.add_argument(
        "--mode",
        choices=[LEGACY, POST_MORTEM, "auto"],
        default="auto",
        help="legacy: pdb pauses in the GCS; post_mortem: debugpy pauses in the dashboard; "
        "auto (default): both, wherever an address is known",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--all", action="store_true", help="list each pause on its own line, not each group"
    )
    output.add_argument("--json", action="store_true", help="print every pause as JSON")
    output.add_argument("--vscode", type=int, metavar="N", help="print launch.json for pause N")
    output.add_argument(
        "--vscode-group",
        type=int,
        metavar="N",
        help="print one launch.json for pause N and every pause on its line, with a compound "
        "that attaches to all of them",
    )
    output.add_argument("--attach", type=int, metavar="N", help="open pdb pause N here")
    parser.add_argument(
        "--local-root",
        default=WORKSPACE,
        metavar="DIR",
        help="with --vscode/--vscode-group: the local copy of the job's working_dir its files "
        f"map to (default: {WORKSPACE}, the folder VS Code has open)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    endpoints = resolve_endpoints(args.head, args.dashboard, args.gcs)
    _check_endpoints(parser, endpoints, args.mode)
    try:
        pauses = find_pauses(endpoints, args.mode, args.timeout)
        if args.vscode is not None:
            return _print_vscode(pauses, args.vscode, _command(args), args.local_root, False)
        if args.vscode_group is not None:
            return _print_vscode(pauses, args.vscode_group, _command(args), args.local_root, True)
        if args.attach is not None:
            return _attach(pauses, args.attach, args.timeout, _command(args))
    except (RayDebugConnectionError, RuntimeError) as exc:
        print(f"ray-breakpoints: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(pauses_json(pauses))
    else:
        print((format_table if args.all else format_groups)(pauses, _command(args)))
    return EXIT_OK


def _check_endpoints(parser: argparse.ArgumentParser, endpoints: Endpoints, mode: str) -> None:
    if mode == LEGACY and not endpoints.gcs:
        parser.error("--mode legacy needs --head or --gcs")
    if mode == POST_MORTEM and not endpoints.dashboard:
        parser.error("--mode post_mortem needs --head or --dashboard")
    if not (endpoints.gcs or endpoints.dashboard):
        parser.error("give --head, or --dashboard and/or --gcs")


def _command(args: argparse.Namespace) -> str:
    """The address flags as given, so the printed hints can be pasted back."""
    flags = [("--head", args.head), ("--dashboard", args.dashboard), ("--gcs", args.gcs)]
    if args.mode != "auto":
        flags.append(("--mode", args.mode))
    return " ".join(["ray-breakpoints", *(f"{flag} {value}" for flag, value in flags if value)])


def _pick(pauses: list[Pause], number: int) -> Pause | None:
    if 1 <= number <= len(pauses):
        return pauses[number - 1]
    valid = f": {number_spans(range(1, len(pauses) + 1))}" if pauses else ""
    print(f"ray-breakpoints: no pause #{number} ({len(pauses)} paused now{valid})", file=sys.stderr)
    return None


def _print_vscode(
    pauses: list[Pause], number: int, command: str, local_root: str, whole_group: bool
) -> int:
    if not (pause := _pick(pauses, number)):
        return EXIT_ERROR
    if pause.mode == LEGACY:
        debugpy = [p.number for p in pauses if p.mode != LEGACY]
        valid = f" (debugpy pauses: {number_spans(debugpy)})" if debugpy else ""
        print(
            f"ray-breakpoints: #{number} is a legacy pdb pause, which VS Code cannot attach to; "
            f"open it with: {command} --attach {number}{valid}",
            file=sys.stderr,
        )
        return EXIT_WRONG_KIND
    chosen = next(g for g in grouped(pauses) if pause in g) if whole_group else [pause]
    print(json.dumps(launch_config(chosen, local_root), indent=2))
    return EXIT_OK


def _attach(pauses: list[Pause], number: int, timeout: float, command: str) -> int:
    if not (pause := _pick(pauses, number)):
        return EXIT_ERROR
    if pause.mode != LEGACY:
        print(
            f"ray-breakpoints: #{number} waits in debugpy, not pdb; attach VS Code with: "
            f"{command} --vscode {number} > .vscode/launch.json",
            file=sys.stderr,
        )
        return EXIT_WRONG_KIND
    print(
        f"ray-breakpoints: attaching to #{number} {pause.name} at {pause.address} "
        "(c continues the task, Ctrl-D quits it)",
        file=sys.stderr,
    )
    attach_pdb(pause, timeout, sys.stdin, sys.stdout)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
