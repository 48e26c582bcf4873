"""Real local Ray heads and drivers that pause a task, shared by the ray_debug_tools tests.

The tests import this as `ray_heads` (pytest puts tests/integration on sys.path); the fixture
capture script adds the folder itself.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from ray.job_submission import JobSubmissionClient

RAY_CLI = str(Path(sys.executable).with_name("ray"))
_PROJECT = Path(__file__).resolve().parents[2]
# Where a process finds the debugger hooks and their grammar, which roles/ray_debug_hooks
# installs side by side in a node venv's site-packages.
NODE_HOOKS_PATH = os.pathsep.join(
    str(_PROJECT / folder) for folder in ("roles/ray_debug_hooks/files", "plugins/module_utils")
)
STARTUP_TIMEOUT_S = 90.0
PAUSE_TIMEOUT_S = 60.0

T = TypeVar("T")

BREAKPOINT_DRIVER = """\
import sys

import ray

ray.init(address=sys.argv[1])


@ray.remote
def paused_task():
    answer = 42
    breakpoint()
    return answer + 1


print("RESULT", ray.get(paused_task.remote()), flush=True)
"""
BREAKPOINT_LINE = 11

FAILING_DRIVER = """\
import sys

import ray

ray.init(address=sys.argv[1])


@ray.remote(max_retries=0)
def failing_task():
    answer = 42
    raise ValueError("boom")


try:
    ray.get(failing_task.remote())
except ValueError as exc:
    print("FAILED", type(exc).__name__, exc, flush=True)
"""


@dataclass(frozen=True)
class RayHead:
    gcs_address: str
    dashboard_url: str


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each socket stays bound until all are picked, since the
    kernel may hand a port just closed to the next bind (a head once got its GCS and its
    dashboard on one port, and Ray refused to start)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _dashboard_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v0/workers", timeout=2) as response:
            return response.status == 200
    except urllib.error.HTTPError as refused:
        # A token cluster's dashboard answers too: it refuses a request without the token.
        return refused.code == 401
    except OSError:
        return False


def submit_job(client: JobSubmissionClient, entrypoint: str) -> str:
    """Submit once the head's job agent has registered: the dashboard answers before it does,
    and refuses a job meanwhile ("No available agent"), longer on a busy machine."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        try:
            return client.submit_job(entrypoint=entrypoint)
        except RuntimeError as refused:
            if "No available agent" not in str(refused) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextmanager
def ray_head(debug_env: dict[str, str], log_path: Path, num_cpus: int = 2) -> Iterator[RayHead]:
    """A head started with `debug_env`, which its workers inherit.

    `ray start --block` in its own session is stopped with SIGTERM instead of `ray stop`,
    which would kill every Ray process on the machine, other tests' clusters included.
    Every default port is replaced by a free one for the same reason.
    """
    gcs_port, dashboard_port, client_port, agent_port, autoscaler_metrics, dashboard_metrics = (
        free_ports(6)
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_DEBUG")}
    env |= debug_env | {
        "AUTOSCALER_METRIC_PORT": str(autoscaler_metrics),
        "DASHBOARD_METRIC_PORT": str(dashboard_metrics),
    }
    # Short on purpose: Ray puts unix sockets in here and their paths are length-limited.
    temp_dir = tempfile.mkdtemp(prefix="rdt", dir="/tmp")
    command = [
        RAY_CLI,
        "start",
        "--head",
        "--block",
        f"--port={gcs_port}",
        f"--dashboard-port={dashboard_port}",
        f"--ray-client-server-port={client_port}",
        f"--dashboard-agent-listen-port={agent_port}",
        "--include-dashboard=true",
        f"--num-cpus={num_cpus}",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
    ]
    with log_path.open("w") as log:
        head = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    dashboard_url = f"http://127.0.0.1:{dashboard_port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _dashboard_ready(dashboard_url):
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray head did not come up:\n{log_path.read_text()}")
            time.sleep(0.5)
        yield RayHead(f"127.0.0.1:{gcs_port}", dashboard_url)
    finally:
        head.terminate()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, 9)
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


def start_driver(
    source: str, tmp_path: Path, head: RayHead, *args: str
) -> tuple[subprocess.Popen[str], Path]:
    """Run `source` as a driver of `head`: its argv is the GCS address, then `args`."""
    script = tmp_path / "driver.py"
    script.write_text(source)
    driver = subprocess.Popen(
        [sys.executable, str(script), head.gcs_address, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return driver, script


def wait_for_pauses(probe: Callable[[], list[T]], driver: subprocess.Popen[str]) -> list[T]:
    deadline = time.monotonic() + PAUSE_TIMEOUT_S
    while not (found := probe()):
        if driver.poll() is not None:
            pytest.fail(f"driver exited before pausing:\n{driver.communicate()[0]}")
        if time.monotonic() > deadline:
            driver.kill()
            pytest.fail(f"no paused task within {PAUSE_TIMEOUT_S}s:\n{driver.communicate()[0]}")
        time.sleep(0.5)
    return found


def finish(driver: subprocess.Popen[str]) -> str:
    try:
        return driver.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        driver.kill()
        pytest.fail(f"driver did not finish:\n{driver.communicate()[0]}")
