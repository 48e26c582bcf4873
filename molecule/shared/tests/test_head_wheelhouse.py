"""Offline installs: the controller sends the wheelhouse to the head alone, and every node
installs from the head's server inside the cluster (marker `offline`: the online scenario
deselects these).

Named to run before test_teardown.py purges the cluster: "the server is gone" must be read on
a cluster that installed from it and runs."""

from __future__ import annotations

import pytest
from conftest import Cluster, fetched_ray_from_head
from nodes import HEAD, NODES

pytestmark = pytest.mark.offline
testinfra_hosts = [f"ansible://{HEAD}"]


def test_every_worker_fetched_its_wheels_from_the_head(host, cluster: Cluster) -> None:
    for name, address in cluster.worker_ips.items():
        assert fetched_ray_from_head(host, address), f"{name} ({address}) never fetched Ray"


def test_the_wheelhouse_server_is_gone_once_nodes_installed(host, host_of) -> None:
    for name in NODES:
        assert host_of(name).service("ray").is_running, f"{name}: runs no Ray it installed"
    assert not host.service("ray-wheelhouse").is_running
    assert not host.file("/var/cache/ray-cluster/wheelhouse").exists


def listen_overflows(host) -> int:
    """Connections the kernel dropped in the node's network namespace because a listening
    socket's queue was full (TcpExt ListenOverflows), since the node started."""
    names, values = (
        line.split()[1:]
        for line in host.file("/proc/net/netstat").content_string.splitlines()
        if line.startswith("TcpExt:")
    )
    return int(dict(zip(names, values, strict=True))["ListenOverflows"])


def test_no_download_waited_on_the_servers_listen_queue(host) -> None:
    """Every node's uv opens dozens of downloads at once: with `python -m http.server`'s queue
    of 5, this scenario's converge alone overflowed it, and each dropped connection waited
    out TCP's retransmission backoff (1, 2, 4, 8, 16 s)."""
    assert listen_overflows(host) == 0
