"""The scenario's node names and addresses, as .config/molecule/config.yml builds them.

Each scenario's containers and networks have a name prefix and a subnet of their own
(MOLECULE_NODE_PREFIX, MOLECULE_SUBNET: the Makefile sets both), so that scenarios run side by
side on one Docker daemon; by hand, without them, a scenario gets rc-* on 10.123.
"""

from __future__ import annotations

import os

PREFIX = os.environ.get("MOLECULE_NODE_PREFIX") or "rc"
SUBNET = os.environ.get("MOLECULE_SUBNET") or "123"

HEAD = f"{PREFIX}-head"
# No GPUs; the one node with an rdma group, as rdma-core makes on RDMA nodes.
WORKER = f"{PREFIX}-worker1"
# Two stand-in GPUs (ray_stand_in_gpus), and a second address on the fabric with the head.
GPU_WORKER = f"{PREFIX}-worker2"
OUTSIDER = f"{PREFIX}-outsider"
NODES = (HEAD, WORKER, GPU_WORKER)
WORKERS = (WORKER, GPU_WORKER)

NETWORK = f"{PREFIX}-molecule"
# The controller reaches the nodes from the network's gateway.
CONTROLLER_IP = f"10.{SUBNET}.0.1"
# The unrouted second network the head and GPU_WORKER share, as GPU nodes share a fabric.
FABRIC = {HEAD: f"10.{SUBNET}.1.10", GPU_WORKER: f"10.{SUBNET}.1.12"}
