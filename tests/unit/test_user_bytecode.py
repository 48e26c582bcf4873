"""Tests of roles/ray_debug_hooks/files/ray_user_bytecode.py: who keeps the venv's bytecode
where (molecule's test_nodes.py runs it as an operator on every node)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import ray_user_bytecode


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A process as Python starts it without PYTHONPYCACHEPREFIX or -B, caching in tmp_path."""
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_a_user_who_may_not_write_the_venv_caches_its_own(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_user_bytecode.os, "access", lambda path, mode: False)
    assert ray_user_bytecode.install() == str(fresh / "ray-cluster" / "bytecode")
    assert sys.pycache_prefix == str(fresh / "ray-cluster" / "bytecode")


def test_root_writes_into_the_venv(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_user_bytecode.os, "access", lambda path, mode: True)
    assert ray_user_bytecode.install() is None
    assert sys.pycache_prefix is None


def test_a_prefix_already_chosen_or_no_bytecode_is_left_alone(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_user_bytecode.os, "access", lambda path, mode: False)
    # Ray's unit sets PYTHONPYCACHEPREFIX to Ray's home; its hooks run with -B.
    monkeypatch.setattr(sys, "pycache_prefix", "/var/lib/ray/bytecode")
    assert ray_user_bytecode.install() is None
    assert sys.pycache_prefix == "/var/lib/ray/bytecode"
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert ray_user_bytecode.install() is None
    assert sys.pycache_prefix is None
