"""What each host sets itself, for the validate role to check against the roles' specs."""

from __future__ import annotations

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


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ray_host_arguments": host_arguments}
