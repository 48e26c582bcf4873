"""Every role documents its variables in defaults/main.yml and types them in
meta/argument_specs.yml; the two must agree, and every name carries the role's prefix or
the shared `ray_` namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.role_docs import load

ROLES = sorted(path for path in (Path(__file__).parents[2] / "roles").iterdir() if path.is_dir())
# Names the README promises users; they predate the prefix rule.
PUBLIC_NAMES = {"debug_mode", "cluster_name", "verl_install", "verl_version"}


def defaults(role: Path) -> dict:
    return load(role / "defaults" / "main.yml")


def spec_options(role: Path) -> dict:
    specs = load(role / "meta" / "argument_specs.yml").get("argument_specs", {})
    return specs.get("main", {}).get("options", {})


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
    validate_vars = load(Path(__file__).parents[2] / "roles" / "validate" / "vars" / "main.yml")
    # ray_evidence is not cluster-up's (playbooks/evidence.yml, the checkout's alone): Ansible
    # checks its spec when that play enters it.
    node_roles = {role.name for role in ROLES} - {"validate", "sandbox", "ray_evidence"}
    assert sorted(validate_vars["validate_spec_roles"]) == sorted(node_roles)


def test_debug_mode_choices_are_the_modes() -> None:
    ray_defaults = next(role for role in ROLES if role.name == "ray_defaults")
    choices = spec_options(ray_defaults)["debug_mode"]["choices"]
    assert sorted(choices) == sorted(defaults(ray_defaults)["ray_debug_modes"])
