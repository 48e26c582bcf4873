"""Ray and debugger ports answer the cluster and trusted addresses, and nobody else."""

from __future__ import annotations

import socket
import subprocess

import pytest
from conftest import Cluster, alive_nodes

NODES = ("rc-head", "rc-worker1", "rc-worker2")
FULL_SCAN = "nmap -Pn -n -p- -T4 --max-retries 1 --min-rate 20000 -oG -"


def open_ports(scan: str) -> set[int]:
    """The open TCP ports in nmap's grepable (-oG) output."""
    ports = scan.split("Ports: ", 1)[1].split("\t")[0] if "Ports: " in scan else ""
    return {int(entry.split("/", 1)[0]) for entry in ports.split(", ") if "/open/" in entry}


def scan_from_controller(arguments: str) -> str:
    return subprocess.run(
        [*FULL_SCAN.split(), *arguments.split()], capture_output=True, text=True, check=True
    ).stdout


def address_of(cluster: Cluster, node: str) -> str:
    return cluster.head_ip if node == "rc-head" else cluster.worker_ips[node]


def in_port_table(cluster: Cluster, port: int) -> bool:
    spans = [*cluster.ports.values(), f"{cluster.debugger_range[0]}-{cluster.debugger_range[-1]}"]
    for spec in spans:
        low, _, high = str(spec).partition("-")
        if int(low) <= port <= int(high or low):
            return True
    return False


@pytest.mark.parametrize("node", NODES)
def test_outsider_finds_no_open_port(outsider, cluster, node) -> None:
    assert open_ports(outsider.check_output(f"{FULL_SCAN} {address_of(cluster, node)}")) == set()


@pytest.mark.parametrize("node", NODES)
def test_trusted_address_reaches_rays_ports_and_only_those(cluster, node) -> None:
    """The controller (10.123.0.1, in ray_trusted_cidrs) scans every port of every node."""
    found = open_ports(scan_from_controller(address_of(cluster, node)))
    assert {port for port in found if not in_port_table(cluster, port)} == set()
    expected = {int(cluster.ports["node_manager"]), int(cluster.ports["object_manager"])}
    if node == "rc-head":
        expected |= {int(cluster.ports["gcs"]), int(cluster.ports["dashboard"])}
    assert expected <= found


def test_controller_reaches_dashboard_and_gcs(cluster) -> None:
    assert set(alive_nodes(cluster)) == {cluster.head_ip, *cluster.worker_ips.values()}
    socket.create_connection((cluster.head_ip, int(cluster.ports["gcs"])), timeout=5).close()


@pytest.mark.parametrize("node", NODES)
def test_firewall_table_is_our_own(host_of, node) -> None:
    host = host_of(node)
    assert host.service("ray-firewall").is_enabled
    tables = host.check_output("nft list tables")
    assert "table inet ray_cluster" in tables
    # prepare.yml loaded a table of the operator's; ours must leave it alone.
    assert "table inet site_rules" in tables
