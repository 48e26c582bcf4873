"""Tests of roles/ray_debug_hooks/files/ray_stack_readable.py: what each Python under the Ray
service declares so that the dashboard agent's py-spy may read it under Yama."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import ray_stack_readable

YAMA = Path("/proc/sys/kernel/yama")


def test_outside_the_ray_service_nothing_is_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ray_stack_readable.ENV_VAR, raising=False)
    assert ray_stack_readable.declare() is False


def test_under_the_ray_service_the_kernel_takes_the_declaration_where_it_has_yama() -> None:
    """In a fresh interpreter, as the .pth runs it: the prctl succeeds exactly where Yama is
    built in; without Yama (these containers' kernel) there is nothing to relax."""
    declared = subprocess.run(
        [sys.executable, "-c", "import ray_stack_readable as r; print(r.declare())"],
        env={"PYTHONPATH": str(Path(ray_stack_readable.__file__).parent),
             ray_stack_readable.ENV_VAR: "1"},
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert declared.stdout.strip() == str(YAMA.exists())
