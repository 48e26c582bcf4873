"""Run one of this package's job scripts on the cluster and read the report it prints;
the command-line pieces every check run from the controller shares."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import time
from pathlib import Path
from typing import Any

import yaml
from ray.job_submission import JobSubmissionClient


def cluster_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """A parser with what every check run from the controller needs: where the cluster is."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--head", required=True, help="the head's Ray address")
    parser.add_argument("--nodes", nargs="+", required=True, metavar="NAME=IP")
    parser.add_argument("--runtime-env", type=Path, required=True, help="the cluster's file")
    parser.add_argument("--dashboard-port", type=int, default=8265)
    return parser


def parse_nodes(values: list[str]) -> dict[str, str]:
    """cluster_parser's `--nodes NAME=IP ...` as {name: ip}."""
    return dict(value.split("=", 1) for value in values)


def table_of(columns: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    """Left-aligned columns, as the probe and the collective check print them."""
    rows = [columns, *body]
    widths = [max(len(row[column]) for row in rows) for column in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)  # fmt: skip


def connect(args: argparse.Namespace) -> tuple[JobSubmissionClient, dict[str, Any]]:
    """The head's job client and the cluster's runtime env, from cluster_parser's arguments."""
    # The job client logs each upload at INFO; the report is what the operator needs.
    logging.getLogger("ray").setLevel(logging.WARNING)
    client = JobSubmissionClient(f"http://{args.head}:{args.dashboard_port}")
    return client, yaml.safe_load(args.runtime_env.read_text())


def run_report_job(
    client: JobSubmissionClient,
    script: str,
    config: dict[str, Any],
    runtime_env: dict[str, Any],
    wait: float,
) -> dict[str, Any]:
    """Submit `script` (a file next to this one) with `config` as JSON; return its report.

    The script prints one line `MARKER {json}`, MARKER being its name in capitals without
    `_job.py` (collective_job.py -> COLLECTIVE).
    """
    marker = script.removesuffix("_job.py").upper() + " "
    job_id = client.submit_job(
        entrypoint=f"python {script} {shlex.quote(json.dumps(config))}",
        runtime_env={**runtime_env, "working_dir": str(Path(__file__).parent)},
    )
    deadline = time.monotonic() + wait
    while not client.get_job_status(job_id).is_terminal():
        if time.monotonic() > deadline:
            client.stop_job(job_id)
            raise TimeoutError(f"job {job_id} ({script}) still running after {wait:g} s")
        time.sleep(1)
    logs = client.get_job_logs(job_id)
    for line in logs.splitlines():
        if line.startswith(marker):
            return json.loads(line.removeprefix(marker))
    raise RuntimeError(f"job {job_id} ({script}) ended without a report:\n{logs[-3000:]}")
