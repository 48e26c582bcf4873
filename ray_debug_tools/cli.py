"""`verl-debug COMMAND ...`: the one entry point of the operator's and the playbooks' tools.

Each command is a module of this package with `main(argv) -> int`; it is imported only when
named, so `verl-debug stacks` does not pay for the probe's imports. `python -m
ray_debug_tools COMMAND` is the same entry point, for the playbooks (the controller's Ansible
Python need not have the console script on PATH).
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

from ray_debug_tools import PROGRAM


class Command(NamedTuple):
    module: str
    summary: str


COMMANDS = {
    "breakpoints": Command("finder", "list the tasks paused in a debugger, attach to one"),
    "stacks": Command("stacks", "every worker's Python stack on every node, grouped"),
    "rank": Command("debug_rank", "open the debugger in one running worker (a hung rank)"),
    "forward": Command("forward", "serve a token cluster's dashboard on loopback, with the token"),
    "probe": Command("probe", "prove every node can be debugged (playbooks/debug_probe.yml)"),
    "collective": Command("collective", "prove the all-reduce data path between the nodes"),
    "verl-check": Command("verl_check", "import verl on every node, round-trip a DataProto"),
    "evidence": Command("evidence", "a hung job's evidence from every node in one archive"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROGRAM} COMMAND [-h] ...", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {command.summary}" for name, command in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"{PROGRAM}: no command {name!r}; the commands are: {', '.join(COMMANDS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    module = importlib.import_module(f"ray_debug_tools.{COMMANDS[name].module}")
    return module.main(rest)
