"""Every task of a role carries a tag named after the role, in every playbook, so an operator
can re-apply one slice (`--tags ray_firewall`). Read from `ansible-playbook --list-tasks`,
which resolves the tags the way a run does. Whether a slice leaves the cluster whole is run
for real in molecule/shared/tests/test_tags.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ["cluster-up.yml", "cluster-down.yml", *sorted(
    f"playbooks/{path.name}" for path in (PROJECT / "playbooks").glob("*.yml")
)]  # fmt: skip
TASK = re.compile(r"^\s+verl_debug\.cluster\.(\w+) : (.*)\tTAGS: \[(.*)\]$")


def listed_tasks(playbook: str) -> list[tuple[str, str, set[str]]]:
    listing = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), playbook, "--list-tasks"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        (match[1], match[2], {tag.strip() for tag in match[3].split(",")})
        for match in map(TASK.match, listing.splitlines())
        if match
    ]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_task_carries_its_roles_tag(playbook: str) -> None:
    # ray_defaults' own tasks are the argument check every role runs first: its caller's.
    untagged = [
        f"{role} : {name}"
        for role, name, tags in listed_tasks(playbook)
        if role != "ray_defaults" and role not in tags
    ]
    assert untagged == []


def test_a_slice_runs_what_it_reads_and_validation() -> None:
    """--tags ray_service still resolves the lock (its environment carries the lock key), and
    --tags runbook still proves the cluster (the runbook prints the proof's summary)."""
    tags_of = {}
    for role, _, tags in listed_tasks("cluster-up.yml"):
        tags_of.setdefault(role, set()).update(tags)
    assert {"always"} <= tags_of["validate"] and {"always"} <= tags_of["ray_facts"]
    assert {"ray_python", "ray_service"} <= tags_of["wheelhouse"]
    assert "runbook" in tags_of["ray_verify"]
