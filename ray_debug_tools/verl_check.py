"""verl check: import verl on every node and send a DataProto through Ray and back.

Proves the verl installed on the nodes and the cluster's runtime_env.yaml work together
before a training job does, with no model download and no GPU.
"""

from __future__ import annotations

from ray_debug_tools import PROGRAM
from ray_debug_tools._jobs import cluster_parser, connect, parse_nodes, run_report_job, table_of

PROG = f"{PROGRAM} verl-check"

JOB_SCRIPT = "verl_job.py"
COLUMNS = ("node", "ip", "verl", "round trip")


def main(argv: list[str] | None = None) -> int:
    parser = cluster_parser(PROG, __doc__)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    client, runtime_env = connect(args)
    nodes = parse_nodes(args.nodes)
    report = run_report_job(
        client, JOB_SCRIPT, {"nodes": list(nodes.values())}, runtime_env, args.timeout
    )["nodes"]
    print(table_of(COLUMNS, [
        (name, ip, report[ip].get("verl", "-"), "FAILED" if "error" in report[ip] else "ok")
        for name, ip in nodes.items()
    ]))  # fmt: skip
    failed = {name: report[ip]["error"] for name, ip in nodes.items() if "error" in report[ip]}
    for name, error in failed.items():
        print(f"FAILED {name}: {error}")
    return 1 if failed else 0
