"""Open a debugger on every alive node the way Ray does in MODE; print where each listened.

Run by cluster-up on the head with the cluster's Python: `debugger_proof.py MODE`. Prints one
JSON object, {node ip: {"ray", "port", "paused", "reserved", "error"}}, which the play judges.
Each task runs in a worker of its own that exits after it (max_calls=1): the debugger's port
goes with it, and nothing is left behind.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

RESERVED_PORTS = "/proc/sys/net/ipv4/ip_local_reserved_ports"
TIMEOUT_S = 120


def open_debugger(mode: str) -> dict[str, object]:
    report: dict[str, object] = {"ray": ray.__version__, "port": None, "paused": False}
    try:
        with open(RESERVED_PORTS) as reserved:
            report["reserved"] = reserved.read().strip()
        if mode == "post_mortem":
            # Where Ray's debugpy debugger opens its port, before it waits for a client.
            ray.util.debugpy._ensure_debugger_port_open_thread_safe()
            report["port"] = ray._private.worker.global_worker.debugger_port
        elif mode == "legacy":
            # What ray.util.rpdb._connect_ray_pdb builds for --ray-debugger-external.
            from ray._common.network_utils import get_all_interfaces_ip
            from ray.util.rpdb import _RemotePdb

            pdb = _RemotePdb(
                breakpoint_uuid="cluster-up-proof",
                host=get_all_interfaces_ip(),
                port=0,
                ip_address=ray.util.get_node_ip_address(),
            )
            report["port"] = pdb._listen_socket.getsockname()[1]
            pdb._listen_socket.close()
        else:
            # In mode off a forgotten breakpoint() must not wait for a debugger.
            done = threading.Event()
            threading.Thread(target=lambda: (breakpoint(), done.set()), daemon=True).start()
            report["paused"] = not done.wait(10)
    except Exception:  # the play reports it, naming the node and Ray version
        report["error"] = traceback.format_exc(limit=-2).strip().replace("\n", " | ")
    return report


def main(mode: str) -> None:
    ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
    task = ray.remote(num_cpus=0, max_calls=1)(open_debugger)
    alive = {node["NodeManagerAddress"]: node["NodeID"] for node in ray.nodes() if node["Alive"]}
    pending = {
        address: task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        ).remote(mode)
        for address, node_id in alive.items()
    }
    report = {}
    for address, ref in pending.items():
        try:
            report[address] = ray.get(ref, timeout=TIMEOUT_S)
        except Exception as exc:
            report[address] = {"error": f"the proof task did not finish: {exc!r}"[:500]}
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
