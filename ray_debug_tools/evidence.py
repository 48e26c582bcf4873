"""Every node's evidence of a hang in one archive, with an index: the controller's steps.

The ray_evidence role (playbooks/evidence.yml, `make evidence`) runs these on the controller:

    verl-debug evidence job --head H --dashboard-port P --job ID
        the job's submission id and Ray job id, as JSON (its log files carry one or the other)
    verl-debug evidence assemble --staging DIR --nodes NODES.json --out-dir DIR
        one tar.gz of every node's part under its name, with index.json and INDEX.md
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from ray_debug_tools import PROGRAM
from ray_debug_tools._dashboard import job_ids
from ray_debug_tools._net import RayDebugConnectionError

PROG = f"{PROGRAM} evidence"

# Exit codes of `job` the role tells apart: an unknown job stops the run, a silent head not.
UNKNOWN_JOB = 2
NO_ANSWER = 3


def node_entry(result: dict[str, Any]) -> dict[str, Any]:
    """A node's line in the index from what the collector task did there (Ansible's result)."""
    if result.get("unreachable"):
        return {"status": "unreachable", "reason": result.get("msg", "")}
    if result.get("rc") != 0:
        why = (result.get("stderr") or result.get("msg") or "no output").strip()
        return {"status": "failed", "reason": why.splitlines()[-1] if why else ""}
    return {"status": "collected", "index": json.loads(result["stdout"])["index"]}


def markdown_index(index: dict[str, Any]) -> str:
    lines = [
        f"# Evidence of {index['cluster']}" + (f", job {index['job']}" if index["job"] else ""),
        "",
        f"Gathered {index['created']}. Each part holds its newest files up to "
        f"{index['part_cap_bytes'] / 1048576:g} MB; a file over it keeps its end.",
        "",
    ]
    for node, entry in index["nodes"].items():
        if entry["status"] != "collected":
            lines += [f"## {node}: {entry['status']}", "", entry.get("reason", ""), ""]
            continue
        lines += [f"## {node}", "", "| part | file | bytes |", "|---|---|---|"]
        for part, content in entry["index"]["parts"].items():
            for each in content["files"]:
                cut = " (its end)" if each["truncated"] else ""
                lines.append(f"| {part} | {each['name']}{cut} | {each['bytes']} |")
            if content["left_out"]:
                lines.append(f"| {part} | {content['left_out']} older files left out (cap) | |")
        if entry["index"]["missing"]:
            lines += ["", "Missing:", ""]
            lines += [f"- {what}: {why}" for what, why in entry["index"]["missing"].items()]
        lines.append("")
    return "\n".join(lines)


def add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    archive.addfile(info, fileobj=io.BytesIO(data))


def assemble(staging: Path, nodes: dict[str, Any], out_dir: Path, meta: dict[str, Any]) -> Path:
    """One archive of the staged node archives, each under its node's name, and the index."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = out_dir / f"evidence-{stamp}.tar.gz"
    index = {**meta, "created": stamp, "nodes": nodes}
    out_dir.mkdir(parents=True, exist_ok=True)
    # Logs may hold what only the cluster's operators should read.
    out.touch(mode=0o600)
    with tarfile.open(out, "w:gz") as archive:
        add_bytes(archive, "index.json", json.dumps(index, indent=2).encode())
        add_bytes(archive, "INDEX.md", markdown_index(index).encode())
        for node, entry in nodes.items():
            if entry["status"] != "collected":
                continue
            with tarfile.open(staging / f"{node}.tar.gz") as part:
                for member in part.getmembers():
                    content = part.extractfile(member)
                    member.name = f"{node}/{member.name}"
                    archive.addfile(member, content)
    shutil.rmtree(staging)
    return out


def summary(out: Path, nodes: dict[str, Any]) -> list[str]:
    lines = [f"Evidence: {out} ({out.stat().st_size} bytes)"]
    for node, entry in nodes.items():
        if entry["status"] == "collected":
            parts = entry["index"]["parts"]
            size = sum(part["bytes"] for part in parts.values())
            missing = len(entry["index"]["missing"])
            lines.append(f"  {node}: {size} bytes in {len(parts)} parts, {missing} missing")
        else:
            lines.append(f"  {node}: {entry['status']}: {entry.get('reason', '')}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    job = steps.add_parser("job", help="a job's submission id and Ray job id, as JSON")
    job.add_argument("--head", required=True)
    job.add_argument("--dashboard-port", type=int, required=True)
    job.add_argument("--job", required=True)
    job.add_argument("--timeout", type=float, default=10.0)
    put = steps.add_parser("assemble", help="one archive with its index")
    put.add_argument("--staging", type=Path, required=True)
    put.add_argument("--nodes", type=Path, required=True, help="the collector's result per node")
    put.add_argument("--out-dir", type=Path, required=True)
    put.add_argument("--cluster", required=True)
    put.add_argument("--job", default="")
    put.add_argument("--part-cap-bytes", type=int, required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.step == "job":
        dashboard = f"http://{args.head}:{args.dashboard_port}"
        try:
            print(json.dumps(job_ids(dashboard, args.job, args.timeout).known))
        except LookupError as error:
            print(error, file=sys.stderr)
            return UNKNOWN_JOB
        except RayDebugConnectionError as error:
            print(error, file=sys.stderr)
            return NO_ANSWER
        return 0
    results = json.loads(args.nodes.read_text())
    nodes = {node: node_entry(result) for node, result in results.items()}
    meta = {"cluster": args.cluster, "job": args.job, "part_cap_bytes": args.part_cap_bytes}
    out = assemble(args.staging, nodes, args.out_dir, meta)
    print("\n".join(summary(out, nodes)))
    return 0
