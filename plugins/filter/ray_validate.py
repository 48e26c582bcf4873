"""What the validate role checks of each host's variables: the values it sets, for the roles'
specs, and the names and directories that must be safe as paths."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

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


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ray_host_arguments": host_arguments, "ray_path_problems": path_problems}
