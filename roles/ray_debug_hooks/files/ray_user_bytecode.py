"""Bytecode for the venv's modules where the user may not write it: an operator's own driver.

The venv is root's: root's imports write their bytecode into it, and Ray's processes write
theirs in Ray's home (PYTHONPYCACHEPREFIX in its unit). Anyone else, an operator starting a
verl driver by hand, could write none and compiled every module of Ray, verl and torch again
at each start. Such a process keeps its bytecode in its own cache instead, once per module
and user, as Python would with PYTHONPYCACHEPREFIX set there; no other Python of the user's
changes. Imported at every start of the venv's Python by a .pth line, like the debugger
hooks.
"""

from __future__ import annotations

import os
import sys

SITE_PACKAGES = os.path.dirname(os.path.abspath(__file__))


def install() -> str | None:
    """Where this process now writes bytecode; None where Python decides as it would
    anyway: a prefix already chosen (Ray's unit), no bytecode wanted (-B), a venv this user
    may write to (root)."""
    if sys.pycache_prefix is not None or sys.dont_write_bytecode:
        return None
    if os.access(SITE_PACKAGES, os.W_OK):
        return None
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    sys.pycache_prefix = os.path.join(cache, "ray-cluster", "bytecode")
    return sys.pycache_prefix
