"""Each molecule scenario's verify collects exactly the test ids its list names: a change that
drops or adds a check in a scenario rewrites molecule/SCENARIO/test-ids.txt
(`python -m tools.scenario_ids --write`), where review sees it."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import yaml

from tools.scenario_ids import PROJECT, SCENARIOS, collected, listed, nodes_env


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_collects_its_listed_ids(scenario: str) -> None:
    ids = collected(scenario)
    assert ids, f"{scenario} collects no test"
    expected = listed(scenario).read_text().splitlines()
    assert {
        "dropped": sorted(set(expected) - set(ids)),
        "added": sorted(set(ids) - set(expected)),
    } == {
        "dropped": [],
        "added": [],
    }


def test_scenarios_side_by_side_share_no_name_or_subnet() -> None:
    """Any scenario may run beside another on one Docker daemon, and beside the sandbox's
    network (10.124) or the bench's (10.125)."""
    envs = [nodes_env(scenario) for scenario in SCENARIOS]
    prefixes = [env["MOLECULE_NODE_PREFIX"] for env in envs]
    subnets = [int(env["MOLECULE_SUBNET"]) for env in envs]
    assert len(set(prefixes)) == len(SCENARIOS), prefixes
    assert len(set(subnets)) == len(SCENARIOS), subnets
    assert all(0 < subnet < 256 and subnet not in (124, 125) for subnet in subnets), subnets


def test_scenarios_reach_nodes_over_ssh_as_the_checkout_does() -> None:
    """Molecule writes its own ansible.cfg for the scenarios' runs: its SSH arguments
    (ControlPersist, the keepalives that report a vanished node unreachable) must be the
    checkout's, or the scenarios test another SSH than operators run."""
    checkout = configparser.ConfigParser()
    checkout.read(PROJECT / "ansible.cfg")
    molecule = yaml.safe_load(Path(PROJECT, ".config/molecule/config.yml").read_text())
    ssh_args = molecule["ansible"]["cfg"]["ssh_connection"]["ssh_args"]
    assert ssh_args.split() == checkout["ssh_connection"]["ssh_args"].split()
