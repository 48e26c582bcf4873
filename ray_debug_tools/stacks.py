"""`verl-debug stacks`: every Ray worker's Python stack, on every node at once, grouped.

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
import sys
import time

from ray_debug_tools import PROGRAM
from ray_debug_tools._net import RayDebugConnectionError
from ray_debug_tools.endpoints import dashboard_parser, dashboard_url
from ray_debug_tools.stack_views import format_report, group, report_json
from ray_debug_tools.worker_stacks import find_workers, read_stacks, resolve_job

PROG = f"{PROGRAM} stacks"

EXIT_OK, EXIT_ERROR = 0, 1


def build_parser() -> argparse.ArgumentParser:
    parser = dashboard_parser(PROG, __doc__)
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
    dashboard = dashboard_url(args)
    started = time.monotonic()
    try:
        job = resolve_job(dashboard, args.job, args.timeout) if args.job else None
        workers = find_workers(dashboard, job, args.timeout)
    except (RayDebugConnectionError, RuntimeError, LookupError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not workers:
        print(
            f"{PROG}: no live worker{' of job ' + args.job if args.job else ''}",
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
