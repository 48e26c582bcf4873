"""`make test`'s stage driver (tools/ci.py): limits, order, and the table it ends with."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tools import ci


@pytest.fixture(autouse=True)
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(ci, "LOGS", tmp_path)
    return tmp_path


def shell(name: str, script: str, limit_s: int = 30, **order: tuple[str, ...]) -> ci.Stage:
    return ci.Stage(name, ["bash", "-c", script], limit_s, **order)


def test_a_stage_past_its_limit_is_stopped_and_names_its_last_task(logs: Path) -> None:
    hung = shell("hung", "echo '  | TASK [ray_service : Wait for the head]'; sleep 60", limit_s=2)
    started = time.monotonic()
    ci.schedule([hung])
    assert time.monotonic() - started < 15
    assert hung.status == "timed out"
    assert "Wait for the head" in ci.table([hung], started)
    assert "TASK [ray_service" in (logs / "hung.log").read_text()


def test_a_failed_need_skips_its_dependents_and_the_rest_go_on() -> None:
    setup = shell("setup", "exit 1")
    lint = shell("lint", "true", needs=("setup",))
    images = shell("images", "true")
    after = shell("after", "true", needs=("images",), follows=("lint",))
    ci.schedule([setup, lint, images, after])
    assert [stage.status for stage in (setup, lint, images, after)] == [
        "failed",
        "skipped",
        "passed",
        "passed",
    ]


def test_followers_start_after_the_followed_stage_ends() -> None:
    first = shell("first", "sleep 1")
    second = shell("second", "true", follows=("first",))
    beside = shell("beside", "sleep 1")
    ci.schedule([first, second, beside])
    assert second.started >= first.ended
    # Stages that neither need nor follow each other run at once.
    assert beside.started < first.ended


def test_molecule_actions_are_timed_in_the_table() -> None:
    script = (
        "echo 'INFO     post_mortem \u279c create: Executing'; sleep 1; "
        "echo 'INFO     post_mortem \u279c converge: Executing'; "
        "echo 'INFO     post_mortem \u279c converge: Executing Testinfra tests'; sleep 1"
    )
    scenario = shell("post_mortem", script)
    started = time.monotonic()
    ci.schedule([scenario])
    assert [action for action, _ in scenario.actions] == ["create", "converge"]
    assert all(seconds >= 0.9 for _, seconds in scenario.actions)
    assert "  converge" in ci.table([scenario], started)


def test_unknown_stage_names_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        ci.main(["nosuch"])
    assert "unknown stage(s) nosuch; valid: setup, images, lint" in capsys.readouterr().err
