"""Token auth: every Ray API wants the cluster's token, which only root, Ray and the operators
(ray_operators, in Ray's group) can read.

The verifier runs with the operator's environment from the runbook (RAY_AUTH_MODE,
RAY_AUTH_TOKEN_PATH; see the molecule config), so every other test proves the authorised
paths: job submission, the state API, the GCS (legacy breakpoints), DAP and pdb attach.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import Cluster
from nodes import NODES

token_mode = pytest.mark.skipif(
    os.environ.get("RAY_AUTH_MODE") != "token", reason="this scenario runs without token auth"
)


def dashboard_status(
    cluster: Cluster, token: str | None, path: str = "/api/v0/nodes?limit=1"
) -> int:
    request = urllib.request.Request(f"{cluster.dashboard}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def without_token() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH_")}


def controller_token() -> str:
    return Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()


@token_mode
def test_dashboard_wants_the_token(cluster: Cluster) -> None:
    assert dashboard_status(cluster, None) == 401
    assert dashboard_status(cluster, "not-" + controller_token()) == 403
    assert dashboard_status(cluster, controller_token()) == 200
    # Workers' stacks (profiling is on where the token guards it) too: cluster-up's proof reads
    # one with the token on every node.
    stack = f"/worker/traceback?ip={cluster.head_ip}&pid=1"
    assert dashboard_status(cluster, None, stack) == 401


@token_mode
def test_gcs_refuses_a_client_without_the_token(cluster: Cluster) -> None:
    """A driver or `ray debug` without the token cannot read the GCS (legacy breakpoints)."""
    probe = (
        "from ray._raylet import GcsClient\n"
        f"GcsClient(address={cluster.gcs!r}).get_all_node_info(timeout=5)\n"
    )
    refused = subprocess.run(
        [sys.executable, "-c", probe],
        env=without_token(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0
    assert "Authentication" in refused.stderr, refused.stderr[-2000:]
    allowed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert allowed.returncode == 0, allowed.stderr[-2000:]


@token_mode
@pytest.mark.parametrize("node", NODES)
def test_token_file_is_readable_by_ray_and_operators_only(host_of, node) -> None:
    host = host_of(node)
    token_file = host.file("/etc/ray-cluster/auth_token")
    assert (token_file.user, token_file.group, token_file.mode) == ("ray", "ray", 0o640)
    assert token_file.content_string.strip() == controller_token()
    assert host.run("runuser -u operator -- cat /etc/ray-cluster/auth_token").rc == 0
    assert host.run("runuser -u nobody -- cat /etc/ray-cluster/auth_token").rc != 0
    assert Path(os.environ["RAY_AUTH_TOKEN_PATH"]).stat().st_mode & 0o777 == 0o600


@token_mode
def test_finder_without_the_token_says_how_to_get_it(cluster: Cluster) -> None:
    finder = subprocess.run(
        ["verl-debug", "breakpoints", "--head", cluster.head_ip, "--mode", "post_mortem"],
        env=without_token(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finder.returncode != 0
    assert "HTTP 401" in finder.stderr and "RAY_AUTH_TOKEN_PATH" in finder.stderr, finder.stderr


def test_without_token_mode_the_apis_are_open(cluster: Cluster) -> None:
    if os.environ.get("RAY_AUTH_MODE") == "token":
        pytest.skip("covered by the token tests")
    assert dashboard_status(cluster, None) == 200
