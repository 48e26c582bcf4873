"""The head's node list (Ray's state API): which nodes are alive, with their GPUs, and which
have joined again since Ray restarted on them. The controller's filters read it from a reply,
and the node_list module waits on the head, in one process, until it holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def node_rows(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The node rows of a reply of the head to /api/v0/nodes; none where it did not answer
    with a node list (refused token, dashboard down)."""
    try:
        return reply["json"]["data"]["result"]["result"]
    except (KeyError, TypeError):
        return []


def nodes_not_ready(rows: Iterable[Mapping[str, Any]], wanted: Mapping[str, int]) -> list[str]:
    """Compare the state API's node rows with {ip: GPUs}; say what is not ready yet.

    An address with two ALIVE rows is not ready: Ray there restarted and its new node joined
    before the head marked the old one dead (its health checks take ~15 s), and a task pinned
    to the old one can never run.
    """
    alive: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("state") == "ALIVE":
            alive.setdefault(row["node_ip"], []).append(row)
    problems = []
    for address, gpus in sorted(wanted.items()):
        if address not in alive:
            problems.append(f"{address}: not alive")
            continue
        if len(alive[address]) > 1:
            problems.append(
                f"{address}: {len(alive[address])} nodes alive (Ray restarted there and the"
                " head has not yet marked the old node dead)"
            )
            continue
        offered = int(alive[address][0].get("resources_total", {}).get("GPU", 0))
        if offered != int(gpus):
            problems.append(f"{address}: {offered} GPUs, expected {gpus}")
    return problems


def alive_node_ids(rows: Iterable[Mapping[str, Any]], address: str) -> list[str]:
    """Node ids the state API reports ALIVE at `address` (a restart adds a new one)."""
    return [
        str(row["node_id"])
        for row in rows
        if row.get("node_ip") == address and row.get("state") == "ALIVE"
    ]


def nodes_not_joined(
    rows: Iterable[Mapping[str, Any]], ids_before: Mapping[str, Iterable[str]]
) -> list[str]:
    """Addresses with no ALIVE node id that was not there before Ray stopped on them
    ({address: node ids alive there before the stop})."""
    records = list(rows)
    return [
        address
        for address, before in ids_before.items()
        if not set(alive_node_ids(records, address)) - set(before)
    ]
