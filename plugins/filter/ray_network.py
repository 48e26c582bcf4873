"""Addresses, networks and interfaces: CIDRs checked and split by family for the firewall, a
node's routable addresses, the interface that carries an address."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError


def invalid_cidrs(values: Iterable[str]) -> list[str]:
    """Return the entries of `values` that are not IPv4/IPv6 networks."""
    bad = []
    for value in values:
        try:
            ipaddress.ip_network(str(value), strict=False)
        except ValueError:
            bad.append(str(value))
    return bad


def cidrs_of_family(values: Iterable[str], family: int) -> list[str]:
    """Keep the networks of one IP family (4 or 6), normalised."""
    networks = (ipaddress.ip_network(str(value), strict=False) for value in values)
    return [str(network) for network in networks if network.version == family]


def routable_addresses(addresses: Iterable[str]) -> list[str]:
    """A node's addresses that other hosts can send from or to: no loopback, no link-local."""
    kept: list[str] = []
    for text in addresses:
        if not text:
            continue
        address = ipaddress.ip_address(str(text))
        if address.is_loopback or address.is_link_local or str(address) in kept:
            continue
        kept.append(str(address))
    return kept


def network_host(cidr: str, index: int) -> str:
    """The `index`-th address of a network, e.g. its usual gateway with index 1."""
    return str(ipaddress.ip_network(cidr, strict=False)[index])


def interface_for_ip(interfaces: Mapping[str, Iterable[str]], address: str) -> str:
    """Name the network interface that carries `address`, from the node probe's
    {interface: [its addresses]}."""
    for name, addresses in interfaces.items():
        if address in addresses:
            return str(name)
    known = sorted(interfaces)
    raise AnsibleFilterError(f"no interface carries address {address!r}; interfaces: {known}")


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_invalid_cidrs": invalid_cidrs,
            "ray_cidrs_of_family": cidrs_of_family,
            "ray_network_host": network_host,
        }
