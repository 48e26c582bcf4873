"""The bench's command runner: a failed playbook is reported by its failures, not by the task
timings profile_tasks prints last, and its whole output is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import nodes

FAILING_PLAYBOOK = (
    "echo 'FAILED - RETRYING: [head]: Ask the head for its nodes (9 retries left).';"
    ' echo \'fatal: [head]: FAILED! => {"msg": "the head is gone"}\';'
    ' for i in $(seq 400); do echo "task $i ------------- 0.01s"; done; exit 2'
)


def test_a_failure_is_named_and_its_whole_output_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = tmp_path / "failed.log"
    monkeypatch.setattr(nodes, "FAILED_LOG", kept)
    with pytest.raises(RuntimeError) as failed:
        nodes.run("sh", "-c", FAILING_PLAYBOOK)
    message = str(failed.value)
    assert 'fatal: [head]: FAILED! => {"msg": "the head is gone"}' in message
    assert "RETRYING" not in message.split("\n", 2)[1]
    assert str(kept) in message
    assert "task 1 ---" in kept.read_text()
    assert "task 1 ---" not in message


def test_a_success_returns_its_output() -> None:
    assert nodes.run("echo", "up") == "up\n"
