"""Every role documents its variables in defaults/main.yml and types them in
meta/argument_specs.yml; the two must agree, and every name carries the role's prefix or
the shared `ray_` namespace. What a role computes for itself wears `__<role>_` and stays in
the role; what crosses roles is a fact docs/design.md publishes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.role_docs import load, own_options

PROJECT = Path(__file__).parents[2]
ROLES = sorted(path for path in (PROJECT / "roles").iterdir() if path.is_dir())
# Names the README promises users; they predate the prefix rule.
PUBLIC_NAMES = {"debug_mode", "cluster_name", "verl_install", "verl_version"}


def defaults(role: Path) -> dict:
    return load(role / "defaults" / "main.yml")


def spec_options(role: Path) -> dict:
    return own_options(load(role / "meta" / "argument_specs.yml").get("argument_specs", {}))


@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.name)
def test_defaults_and_argument_specs_name_the_same_variables(role: Path) -> None:
    assert sorted(defaults(role)) == sorted(spec_options(role))


@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.name)
def test_spec_defaults_match_role_defaults(role: Path) -> None:
    role_defaults = defaults(role)
    for name, option in spec_options(role).items():
        if "default" in option:
            assert option["default"] == role_defaults[name], name


@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.name)
def test_variables_carry_a_prefix(role: Path) -> None:
    prefixes = (f"{role.name}_", "ray_")
    unprefixed = [
        name
        for name in defaults(role)
        if not name.startswith(prefixes) and name not in PUBLIC_NAMES
    ]
    assert unprefixed == []


def test_shared_variables_wear_no_roles_prefix() -> None:
    """ray_defaults holds what several roles read: a name there with one role's prefix would
    send its reader to the wrong role for it."""
    role_prefixes = tuple(f"{role.name}_" for role in ROLES if role.name != "ray_defaults")
    [ray_defaults] = [role for role in ROLES if role.name == "ray_defaults"]
    misnamed = [name for name in defaults(ray_defaults) if name.startswith(role_prefixes)]
    assert misnamed == []


def test_validation_reads_every_node_roles_spec() -> None:
    """Validation types each host's values from these specs: a role left out goes unchecked."""
    validate_vars = load(PROJECT / "roles" / "validate" / "vars" / "main.yml")
    # ray_evidence is not cluster-up's (playbooks/evidence.yml, the checkout's alone): Ansible
    # checks its spec when that play enters it.
    node_roles = {role.name for role in ROLES} - {"validate", "sandbox", "ray_evidence"}
    assert sorted(validate_vars["__validate_spec_roles"]) == sorted(node_roles)


def test_debug_mode_choices_are_the_modes() -> None:
    ray_defaults = next(role for role in ROLES if role.name == "ray_defaults")
    choices = spec_options(ray_defaults)["debug_mode"]["choices"]
    assert sorted(choices) == sorted(defaults(ray_defaults)["ray_debug_modes"])


def published_facts() -> set[str]:
    """The names in docs/design.md's "Facts the roles publish" table."""
    section = (PROJECT / "docs/design.md").read_text().split("### Facts the roles publish")[1]
    rows = [line for line in section.split("\n## ")[0].splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])}


def tasks_of(entries: list) -> Iterator[dict]:
    for entry in entries or []:
        yield entry
        for key in ("block", "rescue", "always"):
            yield from tasks_of(entry.get(key))


def computed_names(role: Path) -> set[str]:
    """What the role sets at run time: its vars/main.yml, registers and set_facts."""
    names = set(load(role / "vars/main.yml")) if (role / "vars/main.yml").exists() else set()
    for path in [*role.glob("tasks/*.yml"), *role.glob("handlers/*.yml")]:
        for task in tasks_of(load(path)):
            names |= {task["register"]} if "register" in task else set()
            names |= set(task.get("ansible.builtin.set_fact", {})) - {"cacheable"}
    return names


@pytest.mark.parametrize(
    "role", [role for role in ROLES if role.name != "ray_defaults"], ids=lambda role: role.name
)
def test_computed_names_are_private_or_published(role: Path) -> None:
    """A computed `ray_service_loaded` reads as a knob of ray_service; `__ray_service_loaded`
    says nobody sets it. ray_defaults is the shared namespace itself."""
    loose = computed_names(role) - published_facts()
    assert sorted(name for name in loose if not name.startswith(f"__{role.name}_")) == []


def test_every_published_fact_is_set_by_a_role() -> None:
    computed = set().union(*(computed_names(role) for role in ROLES))
    assert sorted(published_facts() - computed) == []


def test_private_names_stay_in_their_role() -> None:
    """A role never reads another's private results (docs/design.md, "Who owns what")."""
    owners = sorted((role.name for role in ROLES), key=len, reverse=True)
    strays = []
    for path in [*(PROJECT / "roles").rglob("*"), *(PROJECT / "playbooks").rglob("*.yml")]:
        if path.suffix not in (".yml", ".j2") or "/playbooks/collections/" in str(path):
            continue
        for name in set(re.findall(r"\b__([a-z0-9_]+)", path.read_text())):
            owner = next((role for role in owners if name.startswith(f"{role}_")), None)
            if owner is None or not path.is_relative_to(PROJECT / "roles" / owner):
                strays.append(f"{path.relative_to(PROJECT)}: __{name}")
    assert sorted(strays) == []
