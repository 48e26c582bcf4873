"""A node's venv made with the uv of the wheelhouse the head serves: a real uv binary in a wheel,
in an archive served by the head's own server (roles/wheelhouse/files/wheelhouse_server.py),
and a real `uv venv`."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray_uv_venv
import yaml
from ray_heads import free_port

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "roles/ray_python/files/ray_uv_venv.py"
SERVER = PROJECT / "roles/wheelhouse/files/wheelhouse_server.py"
# The controller's own uv: requirements.txt pins the version the nodes' lock does.
UV = Path(sys.executable).parent / "uv"
VERSION = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())[
    "ray_uv_version"
]


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Iterator[str]:
    """A wheelhouse archive, served as the head serves it, holding uv's wheel and another."""
    wheels, served = tmp_path / "wheels", tmp_path / "served"
    wheels.mkdir()
    served.mkdir()
    wheel = wheels / f"uv-{VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(UV, f"uv-{VERSION}.data/scripts/uv")
    (wheels / "uvicorn-0.30.0-py3-none-any.whl").write_bytes(b"not this one")
    digest = "0123456789abcdef"
    with tarfile.open(served / f"{digest}.tar", "w") as archive:
        for path in wheels.iterdir():
            archive.add(path, arcname=path.name)
    port = free_port()
    serve = [SERVER, "--bind", "127.0.0.1", "--directory", served, str(port)]
    server = subprocess.Popen(
        [sys.executable, *serve],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/{digest}/"
        wait_until_served(url)
        yield url
    finally:
        server.kill()
        server.wait(timeout=10)


def wait_until_served(url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"{url} never answered"
            time.sleep(0.1)


def test_makes_the_venv_with_the_wheelhouse_uv(wheelhouse: str, tmp_path: Path) -> None:
    # Under a directory a new node lacks: ray_python makes no install directory first.
    venv = tmp_path / "opt/ray-cluster/venv"
    subprocess.run(
        [sys.executable, str(SCRIPT), wheelhouse, VERSION, str(venv)], check=True, timeout=120
    )
    ran = subprocess.run(
        [str(venv / "bin/python"), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert ran.stdout.strip() == str(venv)
    # The sync that follows runs the venv's own uv.
    version = subprocess.run(
        [str(venv / "bin/uv"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.stdout.split()[:2] == ["uv", VERSION]
    # A venv an interrupted run left behind is made again in place, not refused.
    (venv / "bin/uv").unlink()
    subprocess.run(
        [sys.executable, str(SCRIPT), wheelhouse, VERSION, str(venv)], check=True, timeout=120
    )
    assert (venv / "bin/uv").is_file()


def test_a_wheelhouse_without_that_uv_is_named(wheelhouse: str) -> None:
    with pytest.raises(SystemExit) as refused:
        ray_uv_venv.wheel_url(wheelhouse, "0.0.1")
    assert str(refused.value) == f"no wheel of uv 0.0.1 in the wheelhouse at {wheelhouse}"
