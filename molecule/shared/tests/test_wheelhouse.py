"""Offline installs: the controller sends the wheelhouse to the head alone, and every node
installs from the head's server inside the cluster (the online scenario deselects these)."""

from __future__ import annotations

from conftest import Cluster, fetched_ray_from_head

testinfra_hosts = ["ansible://rc-head"]


def test_every_worker_fetched_its_wheels_from_the_head(host, cluster: Cluster) -> None:
    for name, address in cluster.worker_ips.items():
        assert fetched_ray_from_head(host, address), f"{name} ({address}) never fetched Ray"


def test_the_wheelhouse_server_is_gone_once_nodes_installed(host) -> None:
    assert not host.service("ray-wheelhouse").is_running
    assert not host.file("/var/cache/ray-cluster/wheelhouse").exists
