"""`verl-debug rank NODE_IP PID`: open the cluster's debugger in one running worker, the hung
rank that `verl-debug stacks` named, without restarting it.

The worker's main thread may be blocked in C (a collective waiting for a rank that never
comes); the debugger reads its Python frames from beside it. In post_mortem the worker opens
debugpy in the cluster's debugger port range and counts as paused: `verl-debug breakpoints` lists
it, `--vscode N` prints its launch.json. In legacy it opens Ray's remote pdb: `ray debug` and
`verl-debug breakpoints --attach N` list and attach it. In debug_mode=off it refuses. The request
goes through the head's dashboard as a job (token auth as Ray's own clients do it, no SSH);
a task on the worker's node asks it, as the Ray service's user.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error

from ray.job_submission import JobSubmissionClient

from ray_debug_tools import PROGRAM
from ray_debug_tools._jobs import run_report_job
from ray_debug_tools.endpoints import dashboard_parser, dashboard_url

PROG = f"{PROGRAM} rank"

EXIT_OK, EXIT_ERROR = 0, 1


def build_parser() -> argparse.ArgumentParser:
    parser = dashboard_parser(PROG, __doc__)
    parser.add_argument("node_ip", help="the worker's node, as verl-debug stacks names it")
    parser.add_argument("pid", type=int, help="the worker's pid, as verl-debug stacks names it")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait in all")
    return parser


def finder_flags(head: str | None, dashboard: str, mode: str, gcs: str) -> str:
    """The finder's flags for where this command was pointed: post_mortem's pauses are listed
    by the dashboard, legacy's breakpoints by the GCS (`gcs`, as the cluster names it)."""
    if head:
        return f"--head {head}"
    return f"--dashboard {dashboard}" + (f" --gcs {gcs}" if mode == "legacy" else "")


def attach_hint(mode: str, finder: str) -> str:
    """How to attach, with the finder pointed where this command was (`finder`: its flags)."""
    if mode == "post_mortem":
        return (
            f"It waits for a debugger: `verl-debug breakpoints {finder}` lists it,"
            " `--vscode N` prints its launch.json for VS Code."
        )
    return (
        f"It waits for pdb: `verl-debug breakpoints {finder}` lists it, `--attach N` opens it here;"
        " `ray debug` on the head lists it too."
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    dashboard = dashboard_url(args)
    config = {"node_ip": args.node_ip, "pid": args.pid}
    try:
        client = JobSubmissionClient(dashboard)
        reply = run_report_job(client, "debug_rank_job.py", config, {}, args.timeout)
    except (ConnectionError, urllib.error.URLError, RuntimeError, TimeoutError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if "error" in reply:
        print(f"{PROG}: pid {args.pid} on {args.node_ip}: {reply['error']}",
              file=sys.stderr)  # fmt: skip
        return EXIT_ERROR
    again = " (already open)" if reply.get("already_open") else ""
    print(
        f"pid {args.pid} on {args.node_ip}: {reply['mode']} debugger at {reply['address']}{again}"
        f"\nIts main thread waits at {reply['where']}:\n{reply['stack'].rstrip()}\n"
        + attach_hint(
            reply["mode"], finder_flags(args.head, dashboard, reply["mode"], reply["gcs"])
        )
    )
    return EXIT_OK
