"""A run with --tags re-applies one slice of cluster-up and leaves the cluster whole.

README.md's tagged command, by its text, after the slice's own file was removed: the run puts
it back, changes nothing outside the slice's role, and restarts no Ray (every node keeps its
node ID and its raylet's PID). Validation and the node facts run with any tag, so the slice
works from the same facts a full run has.
"""

from __future__ import annotations

import os
import re

import pytest
from conftest import PROJECT, Cluster, alive_nodes
from nodes import NODES, WORKER
from test_mode_switch import README_INVENTORY, changed_task_names, converge
from test_nodes import ray_main_pid
from test_runbook import commands, derived

pytestmark = pytest.mark.once


def tagged_command(tag: str) -> str:
    [text] = [
        text
        for text in commands((PROJECT / "README.md").read_text())
        if re.match(r"ansible-playbook -i \S+ cluster-up.yml --tags \w+$", text)
    ]
    return derived(
        text,
        re.sub(r"--tags \w+$", f"--tags {tag}", text).replace(
            README_INVENTORY, os.environ["MOLECULE_INVENTORY_FILE"]
        ),
    )


def same_but_the_inventory(text: str) -> str:
    return re.sub(r"-i \S+", "-i INVENTORY", text)


@pytest.mark.parametrize("tag", ["ray_firewall", "runbook"])
def test_a_tagged_run_repairs_its_slice_and_restarts_nothing(
    cluster: Cluster, host_of, tag: str
) -> None:
    worker = host_of(WORKER)
    rules = "/etc/ray-cluster/firewall.nft"
    runbook = cluster.artifacts / "RUNBOOK.md"
    kept = {"ray_firewall": worker.file(rules).content_string, "runbook": runbook.read_text()}
    pids = {name: ray_main_pid(host_of(name)) for name in NODES}
    nodes = alive_nodes(cluster)
    if tag == "ray_firewall":
        worker.run(f"rm {rules}")
    else:
        runbook.unlink()

    report, _ = converge(tagged_command(tag))

    changed = changed_task_names(report)
    assert changed, "the removed file was not put back"
    assert {name.split(" : ")[0] for name in changed} == {f"verl_debug.cluster.{tag}"}, changed
    restored = worker.file(rules).content_string if tag == "ray_firewall" else runbook.read_text()
    # The runbook names the inventory of the run that wrote it: molecule's converge passes its
    # inventory directory, the tagged command the file in it.
    assert same_but_the_inventory(restored) == same_but_the_inventory(kept[tag])
    assert {name: ray_main_pid(host_of(name)) for name in NODES} == pids
    assert alive_nodes(cluster) == nodes
