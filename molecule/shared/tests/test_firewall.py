"""Ray and debugger ports answer the cluster and trusted addresses, and nobody else."""

from __future__ import annotations

import socket
import urllib.request

import pytest

NODES = ("rc-head", "rc-worker1", "rc-worker2")


def open_ports(outsider, address: str) -> list[str]:
    """Full TCP scan of `address` from the outsider container; the open ports found."""
    scan = outsider.check_output(
        f"nmap -Pn -n -p- -T4 --max-retries 1 --min-rate 20000 -oG - {address}"
    )
    ports = scan.split("Ports: ", 1)[1].split("\t")[0] if "Ports: " in scan else ""
    return [entry for entry in ports.split(", ") if "/open/" in entry]


@pytest.mark.parametrize("node", NODES)
def test_outsider_finds_no_open_port(outsider, cluster, node) -> None:
    address = cluster.head_ip if node == "rc-head" else cluster.worker_ips[node]
    assert open_ports(outsider, address) == []


def test_controller_reaches_dashboard_and_gcs(cluster) -> None:
    with urllib.request.urlopen(f"{cluster.dashboard}/api/version", timeout=10) as response:
        assert response.status == 200
    socket.create_connection((cluster.head_ip, int(cluster.ports["gcs"])), timeout=5).close()


@pytest.mark.parametrize("node", NODES)
def test_firewall_table_is_our_own(host_of, node) -> None:
    host = host_of(node)
    assert host.service("ray-firewall").is_enabled
    tables = host.check_output("nft list tables")
    assert "table inet ray_cluster" in tables
    # prepare.yml loaded a table of the operator's; ours must leave it alone.
    assert "table inet site_rules" in tables
