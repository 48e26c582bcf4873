"""Offline installs: the controller sends the wheelhouse to the head alone, and every node
installs from the head's server inside the cluster (the online scenario deselects these)."""

from __future__ import annotations

import re

import yaml
from conftest import PROJECT, Cluster

testinfra_hosts = ["ansible://rc-head"]

RAY_VERSION = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())[
    "ray_version"
]


def test_every_worker_fetched_its_wheels_from_the_head(host, cluster: Cluster) -> None:
    # http.server's access log: client address, then the request line and the status.
    log = host.check_output("journalctl -u ray-wheelhouse --no-pager -o cat")
    ray_wheel = rf'"GET /\w+/ray-{re.escape(RAY_VERSION)}-\S+\.whl HTTP/1\.[01]" 200'
    for name, address in cluster.worker_ips.items():
        fetched = rf"^{re.escape(address)} .*{ray_wheel}"
        assert re.search(fetched, log, re.MULTILINE), f"{name} ({address}) never fetched Ray"


def test_the_wheelhouse_server_is_gone_once_nodes_installed(host) -> None:
    assert not host.service("ray-wheelhouse").is_running
    assert not host.file("/var/cache/ray-cluster/wheelhouse").exists
