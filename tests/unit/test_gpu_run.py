"""The real-GPU run stops before touching the machine when what it needs is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tests/gpu/run-single-node.sh"


def test_missing_prerequisite_is_named_before_anything_runs() -> None:
    # This machine has no NVIDIA driver (and the test may not run as root): either way the
    # script must name the first missing piece and start nothing.
    run = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, check=False, timeout=60
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith("MISSING: "), run.stderr
    assert "MISSING: nvidia-smi: install the NVIDIA driver" in run.stderr or "root" in run.stderr
    assert "==" not in run.stdout
