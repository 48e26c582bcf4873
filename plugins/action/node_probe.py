"""Action of node_probe: the facts play's probe run on the node, its facts computed here.

The facts play ran roles/ray_facts/files/node_probe.py with ansible.builtin.script and then
templated some 25 facts from its JSON in a set_fact: each a Jinja expression compiled afresh
in the worker Ansible forks for each task and host, so that the set_fact cost the controller
more than the probe itself, on every node and every run (docs/performance.md). This action
runs the same script (no module wrapper for the node to unpack) and computes the facts in
Python; the set_fact that publishes them to hostvars only copies them.

Where the connection pipelines, the script reaches the node's Python on its standard input,
in one command. The script action takes five commands (the home directory, a temporary
directory, the script's mode, the run, the removal) and the script's transfer, each an SSH or
SFTP client the controller starts, on every node and every run.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail, AnsibleFilterError
from ansible.plugins.action import ActionBase
from ansible_collections.verl_debug.cluster.plugins.filter.ray_gpus import gpu_inventory
from ansible_collections.verl_debug.cluster.plugins.filter.ray_network import (
    interface_for_ip,
    routable_addresses,
)

SCRIPT = Path(__file__).resolve().parents[2] / "roles/ray_facts/files/node_probe.py"
# What the script reads on the node, each given as its flag (nvidia_smi as --nvidia-smi); the
# paths are the node's, so none is expanded here.
PROBE_OPTIONS: dict[str, dict[str, Any]] = {
    "nvidia_smi": {"type": "str", "required": True},
    "driver": {"type": "str", "required": True},
    "venv": {"type": "str", "required": True},
    "firewall_unit": {"type": "str", "required": True},
    "ray_unit": {"type": "str", "required": True},
    "files_record": {"type": "str", "required": True},
    "proof_record": {"type": "str", "required": True},
    "operators": {"type": "list", "elements": "str", "default": []},
    "nodes_api": {"type": "str"},
    "token_file": {"type": "str"},
}
# What the facts take from the host's settings besides the node's reading.
SETTINGS: dict[str, dict[str, Any]] = {
    "node_ip": {"type": "str", "default": ""},
    "num_gpus": {"type": "str", "default": ""},
    "socket_ifname": {"type": "str", "default": ""},
    "stand_in_gpus": {"type": "bool", "default": False},
    "nccl_ib_gid_index": {"type": "str", "default": ""},
}
ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    # The Python the script runs with, which it reports: the one the venv will be built from.
    "python": {"type": "str", "required": True},
    **PROBE_OPTIONS,
    **SETTINGS,
}


def probe_flags(options: Mapping[str, Any]) -> list[str]:
    """The script's arguments for the options given (the operators one flag each)."""
    flags = [
        part
        for name in PROBE_OPTIONS
        if name != "operators" and options.get(name) is not None
        for part in (f"--{name.replace('_', '-')}", str(options[name]))
    ]
    for operator in options.get("operators") or []:
        flags += ["--operator", operator]
    return flags


def node_facts(node: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The facts a node publishes, from the probe's reading and the host's settings."""
    network, rdma, nvidia = node["network"], node["rdma"], node["nvidia"]
    address = settings["node_ip"] or network["default_ipv4"]
    interfaces = network["interfaces"]
    gpus = gpu_inventory(
        nvidia["query"]["stdout"] if nvidia["query"]["rc"] == 0 else "", nvidia["banner"]["stdout"]
    )
    return {
        # ray_node_ip's default: the source address of the route to a public address.
        "ray_node_default_ipv4": network["default_ipv4"],
        "ray_node_address": address,
        # Traffic from a node may leave from any of its NICs (an InfiniBand or storage network
        # beside the default route): the firewall trusts them all.
        "ray_node_addresses": routable_addresses(
            [address, *(ip for ips in interfaces.values() for ip in ips)]
        ),
        "ray_node_python": {
            key: node[key] for key in ("version", "machine", "glibc", "cpus", "rdma")
        },
        "ray_node_groups": node["groups"],
        # The system accounts (Ray's among them) and the operators'.
        "ray_node_accounts": node["accounts"],
        # Read before this run changes anything: the firewall installs and starts only what
        # is missing or stopped, Ray starts where it is stopped or runs older files.
        "ray_node_units": node["units"],
        "ray_node_has_nft": node["nft"] is not None,
        # intact, changed (behind the firewall unit's back) or unknown (no unit says what it
        # loaded).
        "ray_node_firewall_table": node["firewall_table"],
        # The lock the venv recorded at its last sync, and its packages that differ from it.
        "ray_node_venv": node["venv"],
        # Every file node_files keeps on the node, as it is now: a re-run sends only what
        # differs.
        "ray_node_files": node["files"],
        # The head's record of the last passing proof (none elsewhere, or before the first).
        "ray_node_last_proof": node["last_proof"],
        # The head's node list as its running Ray answered before this run changed anything
        # (none elsewhere): what ray_verify proves the cluster whole from where the run starts
        # no Ray.
        "ray_node_head_nodes": node["head_nodes"],
        "ray_node_cpus": node["cpus"],
        "ray_node_gpus": gpus,
        "ray_node_gpu_count": int(settings["num_gpus"]) if settings["num_gpus"] else gpus["count"],
        # NCCL uses every HCA, InfiniBand or RoCE; the Ray service's environment says which.
        "ray_node_ib_hcas": rdma["infiniband"] + rdma["roce"],
        "ray_node_roce_hcas": rdma["roce"],
        "ray_node_roce_gid_index": (
            "" if rdma["roce_gid_index"] is None else str(rdma["roce_gid_index"])
        ),
        "ray_node_ifname": settings["socket_ifname"] or interface_for_ip(interfaces, address),
        # ray_stand_in_gpus keeps the GPU proof off its host: on a host with a real driver it
        # would let GPUs that CUDA cannot use pass unproven (refused by the facts checks).
        "__ray_facts_stand_in_driver": nvidia["driver"] if settings["stand_in_gpus"] else None,
        # Operators named for the host (ray_operators) that have no account there.
        "__ray_facts_missing_operators": [
            name for name in dict.fromkeys(settings["operators"]) if name not in node["accounts"]
        ],
        # RoCE without a routable GID and no GID index set for the host.
        "__ray_facts_roce_unrouted": bool(rdma["roce"])
        and rdma["roce_gid_index"] is None
        and not settings["nccl_ib_gid_index"],
    }


class ActionModule(ActionBase):
    # The script action, where the connection does not pipeline, makes its own.
    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict[str, Any]:
        _, options = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result = super().run(tmp, task_vars)
        # Read-only, however it ran: the script action counts every run as a change.
        reply = {**self._read_node(options, task_vars), "changed": False}
        if reply.get("failed"):
            return reply
        try:
            node = json.loads(reply["stdout"])
        except ValueError as problem:
            raise AnsibleActionFail(
                f"the probe printed no JSON ({problem})", result=reply
            ) from None
        settings = {name: options[name] for name in SETTINGS}
        try:
            result["facts"] = node_facts(node, {**settings, "operators": options["operators"]})
        except AnsibleFilterError as problem:
            raise AnsibleActionFail(str(problem)) from None
        return result

    def _read_node(self, options: Mapping[str, Any], task_vars: dict | None) -> dict[str, Any]:
        """The script's run on the node: rc, stdout and stderr, failed where rc is not 0."""
        if self._connection.is_pipelining_enabled():
            command = shlex.join([options["python"], "-", *probe_flags(options)])
            reply = self._low_level_execute_command(command, in_data=SCRIPT.read_bytes())
            if reply["rc"] != 0:
                reply.update(failed=True, msg=f"the probe exited with {reply['rc']}")
            return reply
        script_task = self._task.copy()
        script_task.args = {
            "cmd": shlex.join([str(SCRIPT), *probe_flags(options)]),
            "executable": options["python"],
        }
        script = self._shared_loader_obj.action_loader.get(
            "ansible.builtin.script",
            task=script_task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        return script.run(task_vars=task_vars)
