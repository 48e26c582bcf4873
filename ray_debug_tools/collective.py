"""Collective check: prove the data path verl's training uses, before the first job.

Submits collective_job.py, which runs a torch.distributed all-reduce between every pair of
nodes and across all of them (two GPUs of a lone GPU node), with each node's own NCCL/GLOO
interface settings: NCCL between GPU ranks, Gloo otherwise. A GPU node whose torch sees no
CUDA fails, unless named with --stand-in. Prints a row per group; exits 1 with the likely
cause of each failure instead of hanging.
"""

from __future__ import annotations

import argparse
from typing import Any

from ray_debug_tools import PROGRAM
from ray_debug_tools._jobs import cluster_parser, connect, parse_nodes, run_report_job, table_of

PROG = f"{PROGRAM} collective"

JOB_SCRIPT = "collective_job.py"
COLUMNS = ("nodes", "backend", "result", "time", "bus bandwidth")
INTERFACE_ERRORS = ("Unable to find address for", "No such device", "no such device")


def likely_cause(result: dict[str, Any], names: dict[str, str], timeout: float) -> str:
    """What an operator should look at, from the error of one group."""
    error = result["error"]
    where = " <-> ".join(names.get(ip, ip) for ip in result["nodes"])
    variable = "NCCL_SOCKET_IFNAME" if result.get("backend") == "nccl" else "GLOO_SOCKET_IFNAME"
    if any(marker in error for marker in INTERFACE_ERRORS):
        named = ", ".join(
            f"{names.get(ip, ip)}: {env.get(variable)}" for ip, env in result.get("env", {}).items()
        )
        return (
            f"{where}: {variable} names an interface a node does not have ({named}); "
            f"set ray_socket_ifname for that host. ({error})"
        )
    if error.startswith("timed out") or "Timed out" in error or "timeout" in error.lower():
        return (
            f"{where}: the group did not form within {timeout:g} s. A firewall between the "
            f"nodes, or {variable} naming a NIC that does not reach the other node. ({error})"
        )
    return f"{where}: {error}"


def row(result: dict[str, Any], names: dict[str, str]) -> tuple[str, ...]:
    # A lone GPU node's two ranks read "w1 <-> w1": the group ran between its GPUs.
    nodes = " <-> ".join(names.get(ip, ip) for ip in result["nodes"])
    backend = result.get("backend", "-")
    if result.get("note"):
        backend = f"{backend} ({result['note']})"
    if "error" in result:
        return (nodes, backend, "FAILED", "-", "-")
    return (
        nodes,
        backend,
        "ok",
        f"{result['seconds'] * 1000:.1f} ms",
        f"{result['busbw_gbps']:.2f} GB/s",
    )


def addresses(nodes: list[str], names: dict[str, str]) -> list[str]:
    """Nodes given by name or address, as addresses."""
    by_name = {name: ip for ip, name in names.items()}
    return [by_name.get(node, node) for node in nodes]


def parse_env(values: list[str], names: dict[str, str]) -> dict[str, dict[str, str]]:
    """NODE:NAME=VALUE overrides (NODE by name or address) as {ip: {NAME: VALUE}}."""
    overrides: dict[str, dict[str, str]] = {}
    for value in values:
        node, _, assignment = value.partition(":")
        name, _, setting = assignment.partition("=")
        overrides.setdefault(addresses([node], names)[0], {})[name] = setting
    return overrides


def argument_parser() -> argparse.ArgumentParser:
    parser = cluster_parser(PROG, __doc__)
    parser.add_argument("--timeout", type=float, default=60, help="seconds for a group to form")
    parser.add_argument("--size-mb", type=int, default=16, help="all-reduce size per rank")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NODE:NAME=VALUE",
        help="try another setting on one node, e.g. w1:GLOO_SOCKET_IFNAME=eth1",
    )  # fmt: skip
    parser.add_argument(
        "--backend", choices=("auto", "gloo"), default="auto",
        help="auto: NCCL where every rank sees CUDA, else Gloo; gloo: Gloo, GPUs unused",
    )  # fmt: skip
    parser.add_argument(
        "--stand-in", action="append", default=[], metavar="NODE",
        help="a node whose GPUs are stand-ins (tests only): Gloo there is not a failure",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    client, runtime_env = connect(args)

    names = {ip: name for name, ip in parse_nodes(args.nodes).items()}
    config = {
        "nodes": list(names),
        "names": names,
        "env": parse_env(args.env, names),
        "backend": args.backend,
        "stand_ins": addresses(args.stand_in, names),
        "timeout": args.timeout,
        "size_mb": args.size_mb,
    }
    groups = len(names) * (len(names) - 1) // 2 + 1
    report = run_report_job(client, JOB_SCRIPT, config, runtime_env, groups * (args.timeout + 60))
    results = report["results"]
    print(table_of(COLUMNS, [row(result, names) for result in results]))
    failed = [result for result in results if "error" in result]
    for result in failed:
        print(f"FAILED {likely_cause(result, names, args.timeout)}")
    return 1 if failed else 0
