"""The pauses as the operator reads them: the grouped list, the numbered table, JSON and
VS Code's launch.json. Plain records in (pauses.Pause), text out; nothing here reads Ray."""

import json
import textwrap
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from ray_debug_tools.pauses import LEGACY, LOOPBACK_HOSTS, POST_MORTEM, Pause

TABLE_HEADER = ("#", "mode", "node ip", "task/actor", "file:line", "debugger", "waited")
GROUP_HEADER = ("#", "mode", "paused", "nodes", "task/actor", "file:line", "debugger", "max wait")
NODES_SHOWN = 2
EXCEPTION_WIDTH = 100
# What VS Code names the folder it has open: the operator's copy of the job.
WORKSPACE = "${workspaceFolder}"


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
