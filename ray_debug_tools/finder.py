"""`ray-breakpoints`: list the tasks paused in a Ray debugger and attach to one.

Runs on an operator's machine that is not a Ray node. Legacy pdb pauses come from the GCS
registry that `ray debug` reads; debugpy pauses (post-mortem crashes and breakpoint() with
RAY_DEBUG=1) come from the dashboard's state API. Listing never attaches: attaching is what
consumes a pause, so only --attach (pdb) or the VS Code config (debugpy) does that.
"""

import argparse
import codecs
import json
import socket
import sys
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

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "-"


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
        pauses.append(
            Pause(
                number=0,
                mode=POST_MORTEM,
                node_ip=worker.ip,
                name=name or f"worker pid {worker.pid}",
                host=worker.ip,
                port=worker.port,
                # The state API has no pause location; only a DAP attach would tell it.
                file=None,
                line=None,
                waited_s=now - start_ms / 1000 if start_ms else None,
                waited_from="task_start" if start_ms else None,
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


def format_table(pauses: list[Pause], command: str) -> str:
    """The numbered table plus notes and how to attach; `command` repeats the address flags."""
    if not pauses:
        return "No paused tasks."
    rows = [TABLE_HEADER, *(_table_cells(pause) for pause in pauses)]
    widths = [max(len(row[col]) for row in rows) for col in range(len(TABLE_HEADER))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
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
    return "To attach to pause N, " + "; ".join(hints) + "."


def pauses_json(pauses: list[Pause]) -> str:
    return json.dumps([asdict(pause) | {"address": pause.address} for pause in pauses], indent=2)


def launch_config(pause: Pause) -> dict[str, Any]:
    """A VS Code launch.json that attaches the Python debugger to a debugpy pause."""
    return {
        "version": "0.2.0",
        "configurations": [
            {
                "name": f"Ray: {pause.name} on {pause.node_ip}",
                "type": "debugpy",
                "request": "attach",
                "connect": {"host": pause.host, "port": pause.port},
                # Ray's own frames (the worker loop, the post-mortem hook) sit above the task.
                "justMyCode": False,
            }
        ],
    }


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


def _table_cells(pause: Pause) -> tuple[str, ...]:
    waited = format_duration(pause.waited_s)
    if pause.waited_from == "task_start":
        waited += "*"
    return (
        str(pause.number),
        pause.mode,
        pause.node_ip,
        pause.name,
        pause.location,
        pause.address,
        waited,
    )


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
    output.add_argument("--json", action="store_true", help="print the list as JSON")
    output.add_argument("--vscode", type=int, metavar="N", help="print launch.json for pause N")
    output.add_argument("--attach", type=int, metavar="N", help="open pdb pause N here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    endpoints = resolve_endpoints(args.head, args.dashboard, args.gcs)
    _check_endpoints(parser, endpoints, args.mode)
    try:
        pauses = find_pauses(endpoints, args.mode, args.timeout)
        if args.vscode is not None:
            return _print_vscode(pauses, args.vscode, _command(args))
        if args.attach is not None:
            return _attach(pauses, args.attach, args.timeout, _command(args))
    except (RayDebugConnectionError, RuntimeError) as exc:
        print(f"ray-breakpoints: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(pauses_json(pauses) if args.json else format_table(pauses, _command(args)))
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
    print(f"ray-breakpoints: no pause #{number} ({len(pauses)} paused now)", file=sys.stderr)
    return None


def _print_vscode(pauses: list[Pause], number: int, command: str) -> int:
    if not (pause := _pick(pauses, number)):
        return EXIT_ERROR
    if pause.mode == LEGACY:
        print(
            f"ray-breakpoints: #{number} is a legacy pdb pause, which VS Code cannot attach to; "
            f"open it with: {command} --attach {number}",
            file=sys.stderr,
        )
        return EXIT_WRONG_KIND
    print(json.dumps(launch_config(pause), indent=2))
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
