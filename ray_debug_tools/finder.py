"""`verl-debug breakpoints`: list the tasks paused in a Ray debugger and attach to one.

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
import socket
import sys
import threading
from typing import TextIO

from ray_debug_tools import PROGRAM
from ray_debug_tools._net import RayDebugConnectionError, open_tcp
from ray_debug_tools.endpoints import DASHBOARD_PORT, GCS_PORT, Endpoints, resolve_endpoints
from ray_debug_tools.pause_views import (
    WORKSPACE,
    format_groups,
    format_table,
    grouped,
    launch_config,
    number_spans,
    pauses_json,
)
from ray_debug_tools.pauses import LEGACY, POST_MORTEM, Pause, find_pauses

PROG = f"{PROGRAM} breakpoints"

# Exit codes: 2 is argparse's for misuse, and --vscode/--attach on the wrong kind of pause
# is a misuse the operator fixes by switching flags.
EXIT_OK, EXIT_ERROR, EXIT_WRONG_KIND = 0, 1, 2


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
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
        print(f"{PROG}: error: {exc}", file=sys.stderr)
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
    return " ".join([PROG, *(f"{flag} {value}" for flag, value in flags if value)])


def _pick(pauses: list[Pause], number: int) -> Pause | None:
    if 1 <= number <= len(pauses):
        return pauses[number - 1]
    valid = f": {number_spans(range(1, len(pauses) + 1))}" if pauses else ""
    print(
        f"{PROG}: no pause #{number} ({len(pauses)} paused now{valid})",
        file=sys.stderr,
    )
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
            f"{PROG}: #{number} is a legacy pdb pause, which VS Code cannot "
            f"attach to; open it with: {command} --attach {number}{valid}",
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
            f"{PROG}: #{number} waits in debugpy, not pdb; attach VS Code with: "
            f"{command} --vscode {number} > .vscode/launch.json",
            file=sys.stderr,
        )
        return EXIT_WRONG_KIND
    print(
        f"{PROG}: attaching to #{number} {pause.name} at {pause.address} "
        "(c continues the task, Ctrl-D quits it)",
        file=sys.stderr,
    )
    attach_pdb(pause, timeout, sys.stdin, sys.stdout)
    return EXIT_OK
