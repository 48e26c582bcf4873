#!/usr/bin/env python3
"""Fill a wheelhouse with every wheel a lock needs, for the nodes' Python and platform.

pip resolves nothing here: the lock pins every package. Packages published only as source
are built into wheels on the controller; a built wheel that is not pure Python must match
the nodes' platform, or the nodes could not install it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

SOURCE_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2")


def manylinux_tags(machine: str, glibc: str) -> list[str]:
    """Every manylinux platform tag a node with this glibc accepts, newest first."""
    major, minor = (int(part) for part in glibc.split(".")[:2])
    tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{machine}" for floor, name in legacy.items() if minor >= floor]
    return tags


def download(lock: Path, dest: Path, python: str, tags: list[str], pip_args: list[str]) -> None:
    """Download wheels for the nodes; pip falls back to an sdist where no wheel fits."""
    abi = "cp" + python.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest)]
    command += ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "none"]
    command += [arg for tag in tags for arg in ("--platform", tag)] + ["--platform", "any"]
    subprocess.run([*command, *pip_args, "-r", str(lock)], check=True)


def node_tags(python: str, tags: list[str]) -> set[Tag]:
    """Every wheel tag the nodes' interpreter accepts."""
    version = tuple(int(part) for part in python.split("."))
    interpreter = "cp" + python.replace(".", "")
    return set(cpython_tags(version, platforms=tags)) | set(
        compatible_tags(version, interpreter=interpreter, platforms=[*tags, "any"])
    )


def wheel_fits(name: str, accepted: set[Tag]) -> bool:
    """Whether a wheel filename's tags install on the nodes."""
    return not parse_wheel_filename(name)[3].isdisjoint(accepted)


def build_sources(dest: Path, pip_args: list[str]) -> None:
    """Turn downloaded sdists into wheels and drop the sdists."""
    sources = [path for path in dest.iterdir() if path.name.endswith(SOURCE_SUFFIXES)]
    if not sources:
        return
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dest)]
    subprocess.run([*command, *pip_args, *map(str, sources)], check=True)
    for path in sources:
        path.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--dest", type=Path, required=True, help="directory for the wheels")
    parser.add_argument("--archive", type=Path, required=True, help="tar written when done")
    parser.add_argument("--python", required=True, help="the nodes' Python, e.g. 3.11")
    parser.add_argument("--machine", required=True, help="e.g. x86_64")
    parser.add_argument("--glibc", required=True, help="the oldest glibc on the nodes, e.g. 2.36")
    parser.add_argument("pip_args", nargs="*", help="extra pip options (index, find-links)")
    args = parser.parse_args(argv)

    tags = manylinux_tags(args.machine, args.glibc)
    args.dest.mkdir(parents=True, exist_ok=True)
    download(args.lock, args.dest, args.python, tags, args.pip_args)
    build_sources(args.dest, args.pip_args)
    accepted = node_tags(args.python, tags)
    misfits = sorted(p.name for p in args.dest.glob("*.whl") if not wheel_fits(p.name, accepted))
    if misfits:
        print(
            f"these wheels do not install on Python {args.python} {args.machine} glibc "
            f"{args.glibc}: {', '.join(misfits)}; put matching wheels in ray_lock_find_links",
            file=sys.stderr,
        )
        return 1
    partial = args.archive.with_suffix(".partial")
    with tarfile.open(partial, "w") as archive:
        for wheel in sorted(args.dest.glob("*.whl")):
            archive.add(wheel, arcname=wheel.name)
    partial.rename(args.archive)
    # The archive is what ships; keeping the loose wheels would double the disk used.
    shutil.rmtree(args.dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
