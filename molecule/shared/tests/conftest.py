"""Fixtures for the molecule verifier: the cluster as the controller sees it.

Ports come from the one port table in roles/ray_defaults/defaults/main.yml; addresses and the
debug mode from the molecule inventory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra
import yaml
from nodes import HEAD, OUTSIDER, WORKERS
from ray._private.authentication.http_token_authentication import (
    get_auth_headers_if_auth_enabled,
)
from ray.job_submission import JobStatus, JobSubmissionClient

PROJECT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(PROJECT / "tests"))
from bounded import PLAYBOOK_LIMIT_S, run_bounded  # noqa: E402
from doc_commands import ran  # noqa: E402

JOBS = Path(__file__).parent / "jobs"


@dataclass(frozen=True)
class Cluster:
    mode: str
    head_ip: str
    worker_ips: dict[str, str]
    ports: dict[str, int | str]
    debugger_range: range
    artifacts: Path
    # None when the scenario does not install verl.
    verl_version: str | None
    # The nodes' Python (major, minor): one version cluster-wide.
    python: tuple[int, int]

    @property
    def dashboard(self) -> str:
        return f"http://{self.head_ip}:{self.ports['dashboard']}"

    @property
    def gcs(self) -> str:
        return f"{self.head_ip}:{self.ports['gcs']}"


def record(cluster: Cluster, what: str, seconds: float) -> None:
    """A timing beside the runbook (artifacts' timings.jsonl): measured, never asserted."""
    with Path(cluster.artifacts, "timings.jsonl").open("a") as timings:
        timings.write(json.dumps({"what": what, "seconds": round(seconds, 1)}) + "\n")


# The mode switch leaves the cluster in the other debug mode: it runs after every test that
# needs the scenario's own, just before the teardown takes the cluster down.
SWITCH_FILE, TEARDOWN_FILE = "test_mode_switch.py", "test_teardown.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    switch = [item for item in items if item.path.name == SWITCH_FILE]
    rest = [item for item in items if item.path.name != SWITCH_FILE]
    at = next((i for i, item in enumerate(rest) if item.path.name == TEARDOWN_FILE), len(rest))
    items[:] = rest[:at] + switch + rest[at:]


def _host(name: str) -> testinfra.host.Host:
    return testinfra.get_host(
        f"ansible://{name}", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"]
    )


def _address(host: testinfra.host.Host) -> str:
    facts = host.ansible("setup", "gather_subset=network", check=False)["ansible_facts"]
    return facts["ansible_default_ipv4"]["address"]


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    head = _host(HEAD)
    variables = head.ansible.get_variables()
    defaults = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())
    low, high = (int(port) for port in variables["ray_debugger_port_range"].split("-"))
    return Cluster(
        mode=variables["debug_mode"],
        head_ip=_address(head),
        worker_ips={name: _address(_host(name)) for name in WORKERS},
        ports=defaults["ray_ports"],
        debugger_range=range(low, high + 1),
        artifacts=Path(variables["ray_artifacts_dir"]),
        verl_version=defaults["verl_version"] if variables.get("verl_install", True) else None,
        python=tuple(
            int(part)
            for part in head.check_output(
                "python3 -c 'import sys; print(*sys.version_info[:2])'"
            ).split()
        ),
    )


@pytest.fixture(scope="session")
def host_of() -> Callable[[str], testinfra.host.Host]:
    return _host


@pytest.fixture(scope="session")
def outsider() -> testinfra.host.Host:
    return _host(OUTSIDER)


def alive_nodes(cluster: Cluster) -> dict[str, str]:
    """{ip: node_id} of ALIVE nodes from the head's state API; {} while it does not answer.
    Where a restarted Ray's old node is not marked dead yet, one of the two."""
    return {ip: min(ids) for ip, ids in alive_node_ids(cluster).items()}


def alive_node_ids(cluster: Cluster) -> dict[str, set[str]]:
    """{ip: ids of its ALIVE nodes}: two where Ray restarted and the head has not yet marked
    the old node dead; {} while the head does not answer."""
    request = urllib.request.Request(
        f"{cluster.dashboard}/api/v0/nodes?limit=10000&detail=true",
        # The token the runbook's environment names, as Ray's own clients send it.
        headers=get_auth_headers_if_auth_enabled({}),
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            rows = json.load(response)["data"]["result"]["result"]
    except OSError:
        return {}
    ids: dict[str, set[str]] = {}
    for row in rows:
        if row["state"] == "ALIVE":
            ids.setdefault(row["node_ip"], set()).add(row["node_id"])
    return ids


@pytest.fixture(scope="session")
def jobs(cluster: Cluster) -> JobSubmissionClient:
    return JobSubmissionClient(cluster.dashboard)


def wait_for_log(jobs: JobSubmissionClient, job_id: str, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in jobs.get_job_logs(job_id):
        assert time.monotonic() < deadline, f"job {job_id} never printed {text!r}"
        time.sleep(1)


@pytest.fixture
def submit(jobs: JobSubmissionClient, cluster: Cluster) -> Iterator:
    """Submit a job script from jobs/ with the cluster's runtime_env.yaml; stop it afterwards."""
    submitted: list[str] = []

    def _submit(script: str, *args: str) -> str:
        runtime_env = yaml.safe_load((cluster.artifacts / "runtime_env.yaml").read_text())
        runtime_env["working_dir"] = str(JOBS)
        job_id = jobs.submit_job(
            entrypoint=" ".join(["python", script, *args]), runtime_env=runtime_env
        )
        submitted.append(job_id)
        return job_id

    yield _submit
    for job_id in submitted:
        # A head restarted by a mode switch no longer knows the job.
        with contextlib.suppress(RuntimeError):
            jobs.stop_job(job_id)


def wait_for_job(jobs: JobSubmissionClient, job_id: str, timeout: float = 180) -> JobStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = jobs.get_job_status(job_id)
        if status.is_terminal():
            return status
        time.sleep(1)
    raise TimeoutError(
        f"job {job_id} still {status} after {timeout} s: {jobs.get_job_logs(job_id)}"
    )


def run_playbook(
    command: str, *extra: str, cwd: Path | None = PROJECT, **env: str
) -> subprocess.CompletedProcess[str]:
    """An ansible-playbook command line with `extra` arguments, run by bash as an operator
    would type it, with `env` over this environment. Its output is captured and its exit status
    left to the caller: some tests expect the run to fail. A run past PLAYBOOK_LIMIT_S fails
    the test, naming the task it hung in."""
    ran(command)
    return run_bounded(
        ["bash", "-c", " ".join([command, *map(shlex.quote, extra)])],
        PLAYBOOK_LIMIT_S,
        env=dict(os.environ, **env),
        cwd=cwd,
    )


def fetched_ray_from_head(head: testinfra.host.Host, address: str, since: str = "") -> bool:
    """Whether the node at `address` fetched Ray's wheel from the head's wheelhouse server (its
    access log in the journal: client address, request line, status), since a journalctl
    `--since` time if given."""
    window = f"--since {shlex.quote(since)}" if since else ""
    log = head.check_output(f"journalctl -u ray-wheelhouse --no-pager -o cat {window}")
    ray_version = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())[
        "ray_version"
    ]
    request = rf'"GET /\w+/ray-{re.escape(ray_version)}-\S+\.whl HTTP/1\.[01]" 200'
    return re.search(rf"^{re.escape(address)} .*{request}", log, re.MULTILINE) is not None


def trusts(host: testinfra.host.Host, address: str) -> bool:
    """Whether the node's firewall trusts `address` (nft merges the set into ranges, so ask)."""
    family = "trusted_v6" if ":" in address else "trusted_v4"
    return host.run(f"nft get element inet ray_cluster {family} '{{ {address} }}'").rc == 0
