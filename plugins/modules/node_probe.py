#!/usr/bin/python
"""The documentation of the node_probe action (plugins/action/node_probe.py), which runs the
ray_facts role's node_probe.py on the node and computes the node's facts on the controller."""

DOCUMENTATION = r"""
module: node_probe
short_description: Read a node's state in one run there and answer its facts
description:
  - Reads the node's Python, CPUs, network, RDMA devices, GPUs, groups and accounts, the
    firewall's and Ray's units, the firewall's live table, the venv's lock and packages, every
    file M(verl_debug.cluster.node_files) keeps, and on the head the last proof and the node
    list of the Ray it runs. Changes nothing.
  - Runs the ray_facts role's C(node_probe.py) with O(python), and computes the node's facts
    from what it prints, on the controller; returns them as RV(facts) for one
    M(ansible.builtin.set_fact) to publish.
  - Where the connection pipelines, the script reaches O(python) on its standard input, in
    one command; elsewhere it runs as M(ansible.builtin.script) would run it.
  - An action plugin; this file documents it.
options:
  python:
    description: The Python the probe runs with and reports (its version, glibc).
    type: str
    required: true
  nvidia_smi:
    description: nvidia-smi's command.
    type: str
    required: true
  driver:
    description: The file a loaded NVIDIA kernel driver shows.
    type: str
    required: true
  venv:
    description: The cluster's venv.
    type: str
    required: true
  firewall_unit:
    description: The firewall's systemd unit.
    type: str
    required: true
  ray_unit:
    description: Ray's systemd unit.
    type: str
    required: true
  files_record:
    description: Where M(verl_debug.cluster.node_files) lists the paths it keeps.
    type: str
    required: true
  proof_record:
    description: Where the head keeps its record of the last passing proof.
    type: str
    required: true
  operators:
    description: Accounts to read besides the system ones.
    type: list
    elements: str
    default: []
  nodes_api:
    description: On the head, its dashboard's node list, to read.
    type: str
  token_file:
    description: On the head, the cluster token its Ray runs with.
    type: str
  node_ip:
    description: The node's address for Ray; empty for the source address of its default route.
    type: str
    default: ""
  num_gpus:
    description: The GPUs Ray offers; empty for those nvidia-smi lists.
    type: str
    default: ""
  socket_ifname:
    description: The interface NCCL and Gloo use; empty for the one that carries O(node_ip).
    type: str
    default: ""
  stand_in_gpus:
    description: Whether the node offers stand-in GPUs (a test node without any).
    type: bool
    default: false
  nccl_ib_gid_index:
    description: The GID index NCCL uses over RoCE, where the host sets one.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Probe the node
  verl_debug.cluster.node_probe:
    nvidia_smi: nvidia-smi
    driver: /proc/driver/nvidia/version
    venv: /opt/ray-cluster/venv
    firewall_unit: ray-firewall
    ray_unit: ray
    files_record: /etc/ray-cluster/node-files.json
    proof_record: /opt/ray-cluster/last_proof.json
    python: /usr/bin/python3
  register: probe
"""

RETURN = r"""
facts:
  description: The node's facts (ray_node_* and those the facts checks read), by name.
  type: dict
  returned: success
"""
