"""The nodes run the Debian the Makefile names for the scenario (MOLECULE_NODE_SUITE:
bookworm, or trixie for online), and on a Python verl does not support, cluster-up refuses
verl before it changes anything, naming each node and its Python."""

from __future__ import annotations

import os
import re

import pytest
from conftest import Cluster, run_playbook
from nodes import NODES
from test_nodes import ray_main_pid

testinfra_hosts = ["ansible://ray_cluster"]

SUITE = os.environ.get("MOLECULE_NODE_SUITE", "bookworm")


def test_node_runs_the_scenarios_debian(host) -> None:
    assert f"VERSION_CODENAME={SUITE}" in host.file("/etc/os-release").content_string
    venv_python = host.check_output("/opt/ray-cluster/venv/bin/python -V")
    assert venv_python.startswith("Python 3."), venv_python


@pytest.mark.python_outside_verl
def test_verl_is_refused_on_an_unsupported_python(cluster: Cluster, host_of) -> None:
    """Selected only where the nodes' Python is outside verl's (online, Debian 13)."""
    pids = {name: ray_main_pid(host_of(name)) for name in NODES}
    python = ".".join(map(str, cluster.python))
    run = run_playbook(
        "ansible-playbook cluster-up.yml -e verl_install=true",
        ANSIBLE_INVENTORY=os.environ["MOLECULE_INVENTORY_FILE"],
        # Molecule forces colour, whose codes would split the messages read below.
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    nodes = ", ".join(f"{name}: Python {python}" for name in NODES)
    refusal = rf"verl \S+ supports Python \S+, but {re.escape(nodes)}\."
    assert re.search(refusal, output), output[-3000:]
    # Nothing warns about post_mortem there: the venv's hook hands debugpy the exception.
    assert "WARNING: debug_mode post_mortem" not in output
    assert "PLAY [Install and configure nodes]" not in output
    assert {name: ray_main_pid(host_of(name)) for name in NODES} == pids
