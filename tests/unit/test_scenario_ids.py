"""Each molecule scenario's verify collects exactly the test ids its list names: a change that
drops or adds a check in a scenario rewrites molecule/SCENARIO/test-ids.txt
(`python -m tools.scenario_ids --write`), where review sees it."""

from __future__ import annotations

import pytest

from tools.scenario_ids import SCENARIOS, collected, listed, nodes_env


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
