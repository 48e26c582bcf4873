"""The debug-readiness probe's Ray job: report each node, then pause one task on each.

Runs on the head as a Ray job (working_dir: this directory); imports only Ray and stdlib.
Prints one `FACTS {json}` line, then pauses a task on every target node in that node's
debug mode: a breakpoint (legacy) or a crash (post_mortem). The controller attaches to each
pause from outside and releases it.
"""

from __future__ import annotations

import json
import os
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ENV_NAMES = (
    "RAY_DEBUG",
    "RAY_DEBUG_POST_MORTEM",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "RAY_DEBUGGER_PORT_RANGE",
)


class ProbeCrash(RuntimeError):
    """Raised on purpose so post-mortem debugging pauses the task."""


def node_facts() -> dict[str, object]:
    return {
        "ray": ray.__version__,
        "env": {name: os.environ.get(name) for name in ENV_NAMES},
        "debugger_ports": debugger_ports(os.environ.get("RAY_DEBUGGER_PORT_RANGE")),
    }


def debugger_ports(value: str | None) -> list[int] | str:
    """[low, high] of the node's debugger port range, read as its hook reads it, or why not.

    The grammar is the one the node's hook loads (roles/ray_debug_hooks installs both), so a
    node without the hook says so here.
    """
    try:
        from ray_port_range import port_range
    except ImportError:
        return "the debugger hooks are not installed in this node's venv"
    if value is None:
        return "the Ray service does not set RAY_DEBUGGER_PORT_RANGE"
    try:
        ports = port_range(value)
    except ValueError as error:
        return f"RAY_DEBUGGER_PORT_RANGE: {error}"
    return [ports.start, ports.stop - 1]


def mode_of(env: dict[str, str | None]) -> str:
    if env.get("RAY_DEBUG") == "legacy":
        return "legacy"
    if env.get("RAY_DEBUG_POST_MORTEM") == "1":
        return "post_mortem"
    return "off"


def pause(mode: str, node_ip: str) -> str:
    probe_token = f"probe-{node_ip}"
    if mode == "legacy":
        breakpoint()  # the probe attaches here from the controller
        return probe_token
    raise ProbeCrash(probe_token)


def pinned(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def main(targets: list[str]) -> None:
    ray.init()
    nodes = {node["NodeManagerAddress"]: node for node in ray.nodes() if node["Alive"]}
    facts = {}
    for ip in targets:
        if ip not in nodes:
            facts[ip] = {"alive": False}
            continue
        strategy = pinned(nodes[ip]["NodeID"])
        seen = ray.get(ray.remote(node_facts).options(scheduling_strategy=strategy).remote())
        gpus = nodes[ip]["Resources"].get("GPU", 0)
        facts[ip] = {"alive": True, "gpus": gpus, "mode": mode_of(seen["env"]), **seen}
    print("FACTS " + json.dumps(facts), flush=True)

    paused = [
        ray.remote(pause)
        .options(scheduling_strategy=pinned(nodes[ip]["NodeID"]), max_retries=0)
        .remote(facts[ip]["mode"], ip)
        for ip in targets
        if facts[ip].get("mode") in ("legacy", "post_mortem")
    ]
    # Released pauses end here; the controller stops the job if one is never released.
    ray.wait(paused, num_returns=len(paused))
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
