"""Make the cluster venv with the uv of the wheelhouse the head serves, as root.

The wheelhouse holds uv's wheel anyway (the lock pins uv): taking the binary out of it and
running `uv venv` costs a fraction of a second, where `python -m venv` and pip installing uv
into it took 8.2 s of a cold cluster-up (docs/performance.md). The binary is left in the
venv's bin/ until the sync installs uv's package there over it.

    python ray_uv_venv.py WHEELHOUSE_URL UV_VERSION VENV
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path


def wheel_url(wheelhouse: str, version: str) -> str:
    """The URL of uv's wheel in the wheelhouse's listing (the head's wheelhouse_server.py)."""
    with urllib.request.urlopen(wheelhouse, timeout=30) as answer:
        listing = answer.read().decode()
    names = re.findall(rf'href="(uv-{re.escape(version)}-[^"/]+\.whl)"', listing)
    if not names:
        sys.exit(f"no wheel of uv {version} in the wheelhouse at {wheelhouse}")
    return wheelhouse.rstrip("/") + "/" + names[0]


def main(wheelhouse: str, version: str, venv: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        wheel = Path(scratch, "uv.whl")
        url = wheel_url(wheelhouse, version)
        with urllib.request.urlopen(url, timeout=300) as answer, wheel.open("wb") as out:
            shutil.copyfileobj(answer, out)
        with zipfile.ZipFile(wheel) as archive:
            uv = Path(archive.extract(f"uv-{version}.data/scripts/uv", scratch))
        uv.chmod(0o755)
        # A venv an interrupted run left behind is kept; the sync makes its packages right.
        subprocess.run(
            [uv, "venv", "--quiet", "--allow-existing", "--python", sys.executable, venv],
            check=True,
        )
        shutil.copy2(uv, Path(venv, "bin", "uv"))


if __name__ == "__main__":
    main(*sys.argv[1:])
