"""Every task of a role carries a tag named after the role, in every playbook, so an operator
can re-apply one slice (`--tags ray_firewall`). Read from `ansible-playbook --list-tasks`,
which resolves the tags the way a run does. Whether a slice leaves the cluster whole is run
for real in molecule/shared/tests/test_tags.py.

A check over a listing passes on an empty one, so the listing is held to the playbook: every
line of it must parse (a changed format reads as a failure, not as "no task"), and every role
the playbook imports statically must show tasks in it."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ["cluster-up.yml", "cluster-down.yml", *sorted(
    f"playbooks/{path.name}" for path in (PROJECT / "playbooks").glob("*.yml")
)]  # fmt: skip
# A role's task reads "<role> : <name>", the role as the playbook spells it (FQCN or not); a
# play's own task has no role.
TASK = re.compile(r"^ {6}(?:([\w.]+) : )?(.*)\tTAGS: \[(.*)\]$")
# The lines around the tasks: "playbook: x.yml", "  play #1 (hosts): name\tTAGS: []",
# "    tasks:" and blank lines.
FRAME = re.compile(r"^(playbook: .*|  play #\d+ \(.*\): .*\tTAGS: \[.*\]| {4}tasks:|\s*)$")


# One listing per playbook for every test here: each costs ansible-playbook's start-up.
@functools.cache
def listed_tasks(playbook: str) -> list[tuple[str | None, str, set[str]]]:
    """(role or None, task name, tags) for every task the listing shows; fails on a line it
    cannot read and on a listing without tasks."""
    listing = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), playbook, "--list-tasks"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    unread = [
        line for line in listing.splitlines() if not TASK.match(line) and not FRAME.match(line)
    ]
    assert unread == [], f"{playbook}: lines of --list-tasks this test cannot read"
    tasks = [
        (
            match[1] and match[1].rsplit(".", 1)[-1],
            match[2],
            {t.strip() for t in match[3].split(",")},
        )
        for match in map(TASK.match, listing.splitlines())
        if match
    ]
    assert tasks, f"{playbook}: --list-tasks lists no task"
    return tasks


def imported_roles(playbook: Path) -> set[str]:
    """The roles a playbook imports statically (`roles:`, import_role), through
    import_playbook: each must list tasks. include_role is dynamic and lists as one task."""
    roles = set()
    for play in yaml.safe_load(playbook.read_text()):
        if "ansible.builtin.import_playbook" in play:
            roles |= imported_roles(playbook.parent / play["ansible.builtin.import_playbook"])
            continue
        for role in play.get("roles", []):
            roles.add(role["role"] if isinstance(role, dict) else role)
        for task in play.get("tasks", []) + play.get("pre_tasks", []) + play.get("post_tasks", []):
            if "ansible.builtin.import_role" in task:
                roles.add(task["ansible.builtin.import_role"]["name"])
    return {role.rsplit(".", 1)[-1] for role in roles}


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_imported_role_lists_its_tasks(playbook: str) -> None:
    listed = {role for role, _, _ in listed_tasks(playbook) if role}
    # A play names ray_defaults for its defaults alone: it has no tasks/main.yml.
    with_tasks = {
        role
        for role in imported_roles(PROJECT / playbook)
        if (PROJECT / "roles" / role / "tasks" / "main.yml").exists()
    }
    assert with_tasks - listed == set()


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_task_carries_its_roles_tag(playbook: str) -> None:
    # ray_defaults' own tasks (read_nodes.yml) are imported by other roles: its callers'.
    untagged = [
        f"{role} : {name}"
        for role, name, tags in listed_tasks(playbook)
        if role and role != "ray_defaults" and role not in tags
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
