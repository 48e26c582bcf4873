"""What the validate role checks of each host's variables: the values it sets, for the roles'
specs, the rules between hosts and the formats a spec cannot say, and the names and
directories that must be safe as paths."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.verl_debug.cluster.plugins.filter.ray_network import invalid_cidrs
from ansible_collections.verl_debug.cluster.plugins.filter.ray_ports import (
    debugger_port_range_error,
    ports_overlapping,
)
from jinja2 import Undefined


def host_arguments(
    hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str], names: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """{host: {name: value}} for each of `names` that a host sets (inventory, extra vars).

    A value that refers to a role default cannot be resolved before the roles load: it is
    left out here, and the role's own argument validation checks it on the host.
    """
    wanted = list(names)
    arguments: dict[str, dict[str, Any]] = {}
    for host in hosts:
        own = hostvars[host]
        values = {name: own[name] for name in wanted if name in own}
        arguments[host] = {
            name: value for name, value in values.items() if not isinstance(value, Undefined)
        }
    return arguments


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def plain_name_error(value: object) -> str:
    """Why `value` cannot name a file or unit on its own (a path, '..', spaces), or ''."""
    if PLAIN_NAME.fullmatch(str(value)):
        return ""
    return (
        f"{str(value)!r} is not a plain name: use 1-64 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit (e.g. 'verl-debug')"
    )


def owned_path_error(value: object) -> str:
    """Why `value` cannot be a directory we create and purge on the nodes, or ''."""
    text = str(value)
    parts = text.rstrip("/").split("/")
    if not text.startswith("/") or any(part in ("", ".", "..") for part in parts[1:]):
        return f"{text!r} is not a normalised absolute path (e.g. '/opt/ray-cluster')"
    if len(parts) < 3:
        return (
            f"{text!r} is a top-level directory, which purge would remove; "
            f"use e.g. '{text}/ray-cluster'"
        )
    return ""


def path_problems(names: Mapping[str, object], directories: Mapping[str, object]) -> list[str]:
    """'variable: why' for each plain name and owned directory that is not safe as a path."""
    checks = [(names, plain_name_error), (directories, owned_path_error)]
    return [
        f"{variable}: {problem}"
        for values, check in checks
        for variable, value in values.items()
        if (problem := check(value))
    ]


WHOLE_NUMBER = re.compile(r"[0-9]+")
# Ray compares tokens byte for byte; shorter ones are guessable.
MIN_TOKEN_LENGTH = 32


def token_problem(token: str) -> str:
    """What is wrong with a cluster token, described and never shown, or ''."""
    if token.split() != [token]:
        return "contains whitespace; Ray compares tokens byte for byte"
    if len(token) < MIN_TOKEN_LENGTH:
        return (
            f"is {len(token)} characters; use at least {MIN_TOKEN_LENGTH} "
            "(e.g. openssl rand -hex 32)"
        )
    return ""


# The head's settings every node must share.
SHARED_WITH_HEAD = ("debug_mode", "ray_auth_mode")


def one_host_problems(own: Callable[[str], Any], head: Mapping[str, Any]) -> list[str]:
    """What is wrong with one host's variables (`own(name)`), beside the head's settings of
    SHARED_WITH_HEAD (`head`)."""
    problems = []
    mode, head_mode = own("debug_mode"), head["debug_mode"]
    if mode != head_mode:
        problems.append(
            f"debug_mode '{mode}' differs from the head's '{head_mode}'; "
            "one cluster runs one debug mode."
        )
    port_range = own("ray_debugger_port_range")
    if range_error := debugger_port_range_error(port_range):
        problems.append(f"ray_debugger_port_range: {range_error}.")
    elif overlaps := ports_overlapping(port_range, own("ray_ports")):
        problems.append(
            f"ray_debugger_port_range '{port_range}' overlaps Ray's own ports "
            f"{', '.join(overlaps)} (see ray_ports); pick a free range."
        )
    if bad_cidrs := invalid_cidrs(own("ray_trusted_cidrs")):
        problems.append(
            f"ray_trusted_cidrs entries {bad_cidrs} are not CIDRs "
            "(e.g. 10.0.0.0/24, 192.0.2.7/32, 2001:db8::/64)."
        )
    gpus = str(own("ray_num_gpus"))
    if gpus and not WHOLE_NUMBER.fullmatch(gpus):
        problems.append(
            f"ray_num_gpus '{gpus}' must be a whole number of GPUs, or empty to detect them."
        )
    auth_mode, head_auth_mode = own("ray_auth_mode"), head["ray_auth_mode"]
    if auth_mode != head_auth_mode:
        problems.append(
            f"ray_auth_mode '{auth_mode}' differs from the head's '{head_auth_mode}'; "
            "every node of a cluster must agree."
        )
    token = str(own("ray_auth_token"))
    if token and auth_mode == "token" and (problem := token_problem(token)):
        problems.append(f"ray_auth_token {problem}.")
    names = {name: own(name) for name in ("cluster_name", "ray_unit", "ray_nft_unit")}
    directories = {name: own(name) for name in ("ray_install_dir", "ray_config_dir")}
    problems += [f"{problem}." for problem in path_problems(names, directories)]
    gid_index = str(own("ray_nccl_ib_gid_index"))
    if gid_index and not WHOLE_NUMBER.fullmatch(gid_index):
        problems.append(
            f"ray_nccl_ib_gid_index '{gid_index}' must be a GID index (a whole number), "
            "or empty to use the one found."
        )
    return problems


def host_problems(
    hostvars: Mapping[str, Mapping[str, Any]],
    hosts: Iterable[str],
    head: str,
    defaults: Mapping[str, Any],
) -> list[str]:
    """'host: what is wrong' for each host whose variables break a rule between hosts or a
    format an argument spec cannot say. A variable a host does not set (or sets to what only
    the roles can resolve) is the play's `defaults`, the same for every host."""

    def values_of(host: str) -> Callable[[str], Any]:
        own = hostvars[host]

        def value(name: str) -> Any:
            found = own[name] if name in own else defaults[name]
            return defaults[name] if isinstance(found, Undefined) else found

        return value

    head_value = values_of(head)
    head_settings = {name: head_value(name) for name in SHARED_WITH_HEAD}
    return [
        f"{host}: {' '.join(problems)}"
        for host in hosts
        if (problems := one_host_problems(values_of(host), head_settings))
    ]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "ray_host_arguments": host_arguments,
            "ray_host_problems": host_problems,
        }
