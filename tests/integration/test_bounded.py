"""A hung playbook run fails within its limit and names the task it hung in (tests/bounded.py,
which every molecule and sandbox playbook run goes through)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bounded import RunTimedOut, run_bounded, run_until_cut

HUNG = """\
- name: A play that hangs
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Return at once
      ansible.builtin.debug:
        msg: fine
    - name: Wait for a rank that never comes
      ansible.builtin.command: sleep 300
      changed_when: false
"""


def test_a_hung_playbook_fails_naming_its_task(tmp_path: Path) -> None:
    playbook = tmp_path / "hung.yml"
    playbook.write_text(HUNG)
    started = time.monotonic()
    with pytest.raises(RunTimedOut, match="A play that hangs : Wait for a rank that never comes"):
        run_bounded(["bash", "-c", f"ansible-playbook {playbook}"], timeout=15, cwd=tmp_path)
    # The whole process group went, the sleep under ansible-playbook under bash included.
    assert time.monotonic() - started < 30


def test_a_finished_run_returns_its_output_and_status(tmp_path: Path) -> None:
    run = run_bounded(["bash", "-c", "echo out; echo err >&2; exit 3"], timeout=15)
    assert (run.returncode, run.stdout, run.stderr) == (3, "out\n", "err\n")


def test_a_run_is_cut_at_its_marker_and_not_after(tmp_path: Path) -> None:
    """What the interrupted mode switch relies on: nothing after the marker runs."""
    after = tmp_path / "after"
    script = f"echo one; echo 'TASK [cut here]'; sleep 2; touch {after}; echo three"
    output = run_until_cut(["bash", "-c", script], "cut here", timeout=30)
    assert output.splitlines() == ["one", "TASK [cut here]"]
    time.sleep(3)
    assert not after.exists()


def test_a_run_that_ends_before_its_marker_fails() -> None:
    with pytest.raises(AssertionError, match="before printing 'never'"):
        run_until_cut(["bash", "-c", "echo done"], "never", timeout=30)


def test_a_run_that_hangs_before_its_marker_fails_at_its_limit() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match="ran past 3 s"):
        run_until_cut(["bash", "-c", "sleep 300"], "never", timeout=3)
    assert time.monotonic() - started < 30


def test_a_bounded_run_keeps_the_checkouts_callbacks(tmp_path: Path) -> None:
    """ANSIBLE_CALLBACKS_ENABLED replaces ansible.cfg's list: run_bounded's own callback is
    added to that list, and the checkout's (warm_forks) still loads."""
    playbook = tmp_path / "empty.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks: []\n")
    run = run_bounded(
        ["ansible-playbook", "-vvvv", "-i", "localhost,", str(playbook)],
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    for callback in ("last_task", "verl_debug.cluster.warm_forks"):
        assert f"Loading callback plugin {callback}" in run.stdout, callback
