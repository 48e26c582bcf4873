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


def test_a_failed_stage_says_why_from_its_failure_lines() -> None:
    script = (
        "echo 'collected 3 items'; echo '  \u2502 FAILED - RETRYING: [head]: Wait (9 left)';"
        'echo \'  \u2502 fatal: [head]: FAILED! => {"msg": "no head"}\';'
        "echo 'FAILED tests/unit/test_x.py::test_y - AssertionError'; exit 1"
    )
    ci.schedule([unit := shell("unit", script)])
    assert ci.why(unit).splitlines() == [
        "why unit failed (unit.log):",
        '  fatal: [head]: FAILED! => {"msg": "no head"}',
        "  FAILED tests/unit/test_x.py::test_y - AssertionError",
    ]


def test_a_fatal_result_comes_with_its_task_and_the_start_of_its_yaml() -> None:
    # As molecule frames ansible-core 2.19's output with callback_result_format = yaml.
    framed = [
        "/venv/ansible/_ssh_agent.py:18: CryptographyDeprecationWarning: DSA is deprecated",
        "TASK [verl_debug.cluster.wheelhouse : Download every wheel the nodes need, once] ***",
        "[ERROR]: Task failed: Module failed: non-zero return code",
        "fatal: [rc-head -> localhost]: FAILED! => ",
        "    changed: true",
        "    msg: non-zero return code",
        "    rc: 1",
        *[f"    stderr_lines: line {n}" for n in range(1, 10)],
        "",
        "PLAY RECAP ****",
        "rc-head : ok=3 changed=1 failed=1",
    ]
    script = "".join(f"echo '  \u2502 {line}';" for line in framed) + "exit 2"
    ci.schedule([scenario := shell("post_mortem", script)])
    assert ci.why(scenario).splitlines() == [
        "why post_mortem failed (post_mortem.log):",
        "  [ERROR]: Task failed: Module failed: non-zero return code",
        "  in TASK [verl_debug.cluster.wheelhouse : Download every wheel the nodes need, once]:",
        "  fatal: [rc-head -> localhost]: FAILED! =>",
        "      changed: true",
        "      msg: non-zero return code",
        "      rc: 1",
        *[f"      stderr_lines: line {n}" for n in range(1, 6)],
    ]


def test_a_failure_without_a_known_line_shows_the_logs_end() -> None:
    ci.schedule([stage := shell("host", "seq 1 30; exit 2")])
    assert ci.why(stage).splitlines()[1:] == [f"  {n}" for n in range(21, 31)]


def test_main_prints_each_failed_stages_reason_after_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stages = [shell("lint", "echo 'roles/x.yml:3:1: [error] bad'; exit 1"), shell("ok", "true")]
    monkeypatch.setattr(ci, "pipeline", lambda: stages)
    assert ci.main(["lint", "ok"]) == 1
    # CI keeps only the end of the output.
    tail = capsys.readouterr().out.rstrip().splitlines()[-2:]
    assert tail == ["why lint failed (lint.log):", "  roles/x.yml:3:1: [error] bad"]
