"""tools/prerequisites.sh: on a machine without a piece `make` needs, it stops at once with one
line naming the piece's package and the command that installs it (or installs it, as root on
Debian or Ubuntu, which CI's fresh machines exercise on every run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "tools/prerequisites.sh"


def bare_path(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only `tools` (and what the script itself runs): a machine without the rest."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "id", *tools):
        # This interpreter itself: a python3 found on PATH may be a shim needing more PATH.
        found = Path(sys.executable).resolve() if tool == "python3" else shutil.which(tool)
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def run(tmp_path: Path, *pieces: str, tools: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("bash"), str(SCRIPT), *pieces],
        env={"PATH": bare_path(tmp_path, *tools), "PREREQUISITES_INSTALL": "0"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_missing_piece_stops_with_its_install_command(tmp_path: Path) -> None:
    done = run(tmp_path, "docker", "debootstrap", "ssh", tools=("ssh",))
    assert done.returncode == 1
    install = "sudo apt-get install -y docker.io debootstrap"
    assert done.stderr.splitlines() == [f"missing: docker.io debootstrap; install with: {install}"]


def test_present_pieces_pass_quietly(tmp_path: Path) -> None:
    done = run(tmp_path, "venv", "ssh", tools=("python3", "ssh"))
    assert (done.returncode, done.stderr) == (0, "")


def test_an_unknown_piece_names_the_known_ones(tmp_path: Path) -> None:
    done = run(tmp_path, "dockerd")
    assert done.returncode == 2
    assert "unknown piece 'dockerd'" in done.stderr and "docker" in done.stderr
