"""The controller-side wheelhouse builder: platform tags, wheel fit, and a real download."""

from __future__ import annotations

import tarfile
from pathlib import Path

import build_wheelhouse as wheelhouse
import pytest

NODE_TAGS = wheelhouse.manylinux_tags("x86_64", "2.36")


def test_manylinux_tags_cover_every_older_glibc() -> None:
    assert NODE_TAGS[0] == "manylinux_2_36_x86_64"
    assert "manylinux_2_17_x86_64" in NODE_TAGS
    assert "manylinux2014_x86_64" in NODE_TAGS
    assert "manylinux1_x86_64" in NODE_TAGS
    assert "manylinux_2_37_x86_64" not in NODE_TAGS


@pytest.mark.parametrize(
    ("name", "fits"),
    [
        ("six-1.16.0-py2.py3-none-any.whl", True),
        ("ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl", True),
        ("hf_xet-1.8.0-cp38-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", True),
        ("debugpy-1.8.22-cp311-cp311-manylinux_2_34_x86_64.whl", True),
        ("ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl", False),
        ("numpy-2.3.0-cp311-cp311-manylinux_2_38_x86_64.whl", False),
        ("numpy-2.3.0-cp311-cp311-manylinux_2_28_aarch64.whl", False),
        ("thing-1.0-cp311-cp311-linux_x86_64.whl", False),
    ],
)
def test_wheel_fits_the_nodes(name: str, fits: bool) -> None:
    assert wheelhouse.wheel_fits(name, wheelhouse.node_tags("3.11", NODE_TAGS)) is fits


def test_builds_an_archive_from_wheels_and_sdists(tmp_path: Path) -> None:
    """A real download: six has a wheel, antlr4-python3-runtime 4.9.3 only an sdist."""
    lock = tmp_path / "requirements.lock"
    lock.write_text("six==1.16.0\nantlr4-python3-runtime==4.9.3\n")
    archive = tmp_path / "wheels.tar"
    argv = ["--lock", str(lock), "--dest", str(tmp_path / "wheels"), "--archive", str(archive)]
    argv += ["--python", "3.11", "--machine", "x86_64", "--glibc", "2.36"]

    assert wheelhouse.main(argv) == 0

    with tarfile.open(archive) as tar:
        names = sorted(tar.getnames())
    assert names == [
        "antlr4_python3_runtime-4.9.3-py3-none-any.whl",
        "six-1.16.0-py2.py3-none-any.whl",
    ]
