"""tools/prerequisites.sh's install path, run for real: as root in a bare Debian 12 container
whose apt reaches deb.debian.org, every piece that installs without privileges is installed by
its Debian package, and a second run, installing nothing, finds each piece's proof command.

tests/unit/test_prerequisites.py forces "do not install" (PREREQUISITES_INSTALL=0); CI's
machines usually have the pieces already, so without this test a wrong package name or a
proof command its package does not provide would first show on a newcomer's machine.

The docker piece is left out: after installing docker.io the script starts dockerd, which
needs privileges (cgroups, mounts, iptables) a plain container lacks, and a privileged one
would test Docker in Docker, not apt.

Needs Docker and the network; not part of the controller's tests (`make controller`).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "tools/prerequisites.sh"
# Every piece but docker (above).
PIECES = ["curl", "nmap", "ssh", "rsync", "venv", "debootstrap", "gcc"]
# A bare Debian 12: molecule/image/build.sh's debootstrapped base where no registry answers.
IMAGES = ["ray-cluster-base:bookworm", "debian:bookworm"]
# apt-get update and the packages (gcc and python3 are most of it) on a slow mirror.
INSTALL_TIMEOUT_S = 900


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("docker") is None or docker("info").returncode != 0:
        pytest.fail("Docker is needed: tools/prerequisites.sh docker")
    for name in IMAGES:
        if docker("image", "inspect", name).returncode == 0:
            return name
    pytest.fail(f"none of {IMAGES} is here: molecule/image/build.sh bookworm builds the first")


def run_as_root(image: str, script: str, timeout: float) -> subprocess.CompletedProcess:
    """`script` in bash, as root in a fresh container of `image` with the script mounted."""
    name = f"prerequisites-apt-{uuid.uuid4().hex[:8]}"
    try:
        return docker(
            "run", "--rm", "--name", name,
            "-v", f"{SCRIPT}:/prerequisites.sh:ro",
            image, "bash", "-c", script,
            timeout=timeout,
        )  # fmt: skip
    finally:
        # A run cut off by its timeout leaves its container behind.
        docker("rm", "-f", name)


def test_every_piece_installs_from_apt_and_then_passes(image: str) -> None:
    pieces = " ".join(PIECES)
    done = run_as_root(
        image,
        # Installing, then naming what is still missing: nothing, if each package provides
        # its piece's proof command.
        f"bash /prerequisites.sh {pieces} && echo AGAIN >&2 && "
        f"PREREQUISITES_INSTALL=0 bash /prerequisites.sh {pieces}",
        timeout=INSTALL_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installing, again = done.stderr.split("AGAIN\n")
    # The first run installed every piece (the image has none; apt's debconf may add a note).
    packages = "curl nmap openssh-client rsync python3-venv debootstrap gcc"
    assert installing.splitlines()[0] == f"installing {packages}", installing[-3000:]
    # The second found them all: it says nothing.
    assert again == ""


def test_the_bare_image_lacks_every_piece(image: str) -> None:
    """What the test above proves holds only if the image starts without the pieces."""
    done = run_as_root(
        image, f"PREREQUISITES_INSTALL=0 bash /prerequisites.sh {' '.join(PIECES)}", timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.startswith(
        "missing: curl nmap openssh-client rsync python3-venv debootstrap gcc;"
    ), done.stderr
