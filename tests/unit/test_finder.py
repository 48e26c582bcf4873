"""ray-breakpoints: parsing and formatting against captured Ray answers, then real heads.

The fixtures are raw answers of a real Ray 2.60 head, written by
tests/unit/fixtures/capture_ray_responses.py (its docstring says how to rerun it).
"""

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from ray_heads import (
    BREAKPOINT_DRIVER,
    BREAKPOINT_LINE,
    FAILING_DRIVER,
    RayHead,
    finish,
    free_port,
    ray_head,
    start_driver,
    wait_for_pauses,
)

from ray_debug_tools import finder
from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.finder import Endpoints, Pause
from ray_debug_tools.pauses import (
    legacy_breakpoints,
    legacy_record,
    paused_workers,
    paused_workers_from_rows,
)

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def state_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return answer["data"]["result"]["result"]


@pytest.fixture(scope="module")
def captured() -> dict[str, Any]:
    meta = fixture("capture_meta.json")
    now = meta["captured_at"]
    return {
        "meta": meta,
        "now": now,
        "breakpoints": [legacy_record(value, now) for value in fixture("legacy_registry.json")],
        "nodes": fixture("gcs_nodes.json"),
        "worker_rows": state_rows(fixture("state_workers.json")),
        "tasks": {wid: state_rows(answer) for wid, answer in fixture("state_tasks.json").items()},
    }


@pytest.fixture(scope="module")
def captured_pauses(captured: dict[str, Any]) -> list[Pause]:
    legacy = finder.legacy_pauses(captured["breakpoints"], captured["nodes"])
    workers = paused_workers_from_rows(captured["worker_rows"])
    debugpy = finder.post_mortem_pauses(workers, captured["tasks"], captured["now"])
    return finder.numbered(legacy + debugpy)


# ---- parsing real answers ------------------------------------------------------------------


def test_legacy_row_from_registry_entry(captured: dict[str, Any]) -> None:
    [entry] = fixture("legacy_registry.json")
    [row] = finder.legacy_pauses(captured["breakpoints"], captured["nodes"])
    host, _, port = entry["pdb_address"].rpartition(":")
    assert (row.mode, row.name) == ("legacy", "legacy_paused_task")
    assert (row.host, row.port) == (host, int(port))
    # The registry holds the node id only; the IP comes from the GCS node table.
    assert row.node_ip == captured["nodes"][entry["node_id"]]
    assert row.location == f"{captured['meta']['driver_path']}:{captured['meta']['legacy_line']}"
    assert row.waited_s == pytest.approx(captured["now"] - entry["timestamp"])


def test_only_workers_with_paused_threads_count(captured: dict[str, Any]) -> None:
    workers = paused_workers_from_rows(captured["worker_rows"])
    # The capture also holds the driver and the legacy worker, neither waiting in debugpy.
    assert len(captured["worker_rows"]) > len(workers)
    assert sorted(w.worker_id for w in workers) == sorted(captured["meta"]["paused_worker_ids"])


def test_post_mortem_rows_named_after_the_running_task(captured: dict[str, Any]) -> None:
    workers = paused_workers_from_rows(captured["worker_rows"])
    rows = finder.post_mortem_pauses(workers, captured["tasks"], captured["now"])
    by_name = {row.name: row for row in rows}
    assert set(by_name) == {"post_mortem_task", "Trainer.step"}
    for worker in workers:
        [task] = [t for t in captured["tasks"][worker.worker_id] if t["state"] == "RUNNING"]
        row = by_name[task["name"]]
        assert (row.host, row.port, row.node_ip) == (worker.ip, worker.port, worker.ip)
        assert row.location == "-"
        assert row.waited_from == "task_start"
        assert row.waited_s == pytest.approx(captured["now"] - task["start_time_ms"] / 1000)


def test_running_task_ignores_finished_attempts(captured: dict[str, Any]) -> None:
    [task] = captured["tasks"][captured["meta"]["paused_worker_ids"][0]]
    older = task | {"state": "FINISHED", "name": "earlier_task"}
    assert finder.running_task([older, task]) is task
    assert finder.running_task([older]) is None


def test_pause_without_task_row_yet_is_named_by_pid(captured: dict[str, Any]) -> None:
    [worker, *_] = paused_workers_from_rows(captured["worker_rows"])
    [row] = finder.post_mortem_pauses([worker], {}, captured["now"])
    assert row.name == f"worker pid {worker.pid}"
    assert (row.waited_s, finder.format_duration(row.waited_s)) == (None, "-")


# ---- formatting ----------------------------------------------------------------------------


def test_numbered_oldest_first(captured_pauses: list[Pause]) -> None:
    assert [p.number for p in captured_pauses] == [1, 2, 3]
    waited = [p.waited_s for p in captured_pauses]
    assert waited == sorted(waited, reverse=True)


def test_table_lists_every_pause_and_how_to_attach(captured_pauses: list[Pause]) -> None:
    table = finder.format_table(captured_pauses, "ray-breakpoints --head h").splitlines()
    header = ["#", "mode", "node ip", "task/actor", "file:line", "debugger", "waited"]
    assert re.split(r"\s{2,}", table[0]) == header
    for pause in captured_pauses:
        [line] = [line for line in table if line.startswith(f"{pause.number} ")]
        assert line.split()[1:6] == [
            pause.mode,
            pause.node_ip,
            pause.name,
            pause.location,
            pause.address,
        ]
    assert "ray-breakpoints --head h --attach N" in table[-1]
    assert "ray-breakpoints --head h --vscode N" in table[-1]
    assert any(line.startswith("* since the task started") for line in table)
    assert any(line.startswith("localhost:") for line in table)


def test_json_holds_the_table_rows(captured_pauses: list[Pause]) -> None:
    rows = json.loads(finder.pauses_json(captured_pauses))
    assert [(r["number"], r["mode"], r["address"]) for r in rows] == [
        (p.number, p.mode, p.address) for p in captured_pauses
    ]


def test_launch_config_attaches_to_the_debugpy_port(captured_pauses: list[Pause]) -> None:
    pause = next(p for p in captured_pauses if p.mode == "post_mortem")
    config = json.loads(json.dumps(finder.launch_config(pause)))
    assert config["version"] == "0.2.0"
    assert config["configurations"] == [
        {
            "name": f"Ray: {pause.name} on {pause.node_ip}",
            "type": "debugpy",
            "request": "attach",
            "connect": {"host": pause.host, "port": pause.port},
            "justMyCode": False,
        }
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (-3, "0s"), (59.9, "59s"), (61, "1m 01s"), (3725, "1h 02m"), (90000, "1d 1h")],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert finder.format_duration(seconds) == text


def test_endpoints_from_head_and_overrides() -> None:
    assert finder.resolve_endpoints("10.0.0.1", None, None) == Endpoints(
        "10.0.0.1:6379", "http://10.0.0.1:8265"
    )
    assert finder.resolve_endpoints("fd00::1", "h:9000/", "g:1") == Endpoints(
        "g:1", "http://h:9000"
    )
    assert finder.resolve_endpoints("fd00::1", None, None).gcs == "[fd00::1]:6379"


# ---- main() on captured pauses, without a cluster ------------------------------------------


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch, captured_pauses: list[Pause]) -> list[Pause]:
    monkeypatch.setattr(finder, "find_pauses", lambda *_: captured_pauses)
    return captured_pauses


def test_vscode_and_attach_refuse_the_other_kind_of_pause(
    listed: list[Pause], capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = next(p.number for p in listed if p.mode == "legacy")
    debugpy = next(p.number for p in listed if p.mode == "post_mortem")
    assert finder.main(["--head", "h", "--vscode", str(legacy)]) == 2
    assert f"--attach {legacy}" in capsys.readouterr().err
    assert finder.main(["--head", "h", "--attach", str(debugpy)]) == 2
    assert f"--vscode {debugpy}" in capsys.readouterr().err
    assert finder.main(["--head", "h", "--vscode", "9"]) == 1
    assert "no pause #9" in capsys.readouterr().err


def test_nothing_paused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(finder, "find_pauses", lambda *_: [])
    assert finder.main(["--head", "h"]) == 0
    assert capsys.readouterr().out == "No paused tasks.\n"


@pytest.mark.parametrize("flag", ["--gcs", "--dashboard"])
def test_unreachable_address_is_one_error_line(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{free_port()}"
    assert finder.main([flag, address, "--timeout", "2"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and address in err and err.startswith("ray-breakpoints: error:")


# ---- end to end against real heads ---------------------------------------------------------


def run_main(capsys: pytest.CaptureFixture[str], head: RayHead, *flags: str) -> tuple[int, str]:
    code = finder.main(["--gcs", head.gcs_address, "--dashboard", head.dashboard_url, *flags])
    return code, capsys.readouterr().out


def test_legacy_pause_listed_and_attached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ray_head({"RAY_DEBUG": "legacy"}, tmp_path / "ray-start.log") as head:
        driver, script = start_driver(BREAKPOINT_DRIVER, tmp_path, head)
        [pause] = wait_for_pauses(lambda: legacy_breakpoints(head.gcs_address), driver)
        code, out = run_main(capsys, head)
        assert code == 0
        row = next(line for line in out.splitlines() if line.startswith("1 "))
        assert [row.split()[i] for i in (1, 3)] == ["legacy", "paused_task"]
        assert f"{script}:{BREAKPOINT_LINE}" in row and f"{pause.ip}:{pause.port}" in row
        assert finder.main(["--gcs", head.gcs_address, "--vscode", "1"]) == 2
        monkeypatch.setattr(sys, "stdin", io.StringIO("p answer\nc\n"))
        code, out = run_main(capsys, head, "--attach", "1")
        assert code == 0
        assert "(Pdb) 42\r\n" in out  # the worker echoes no input and ends lines with CRLF
        assert "RESULT 43" in finish(driver)


def test_post_mortem_pause_listed_with_vscode_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ray_head({"RAY_DEBUG_POST_MORTEM": "1"}, tmp_path / "ray-start.log") as head:
        driver, _ = start_driver(FAILING_DRIVER, tmp_path, head)
        [worker] = wait_for_pauses(lambda: paused_workers(head.dashboard_url), driver)
        endpoints = Endpoints(head.gcs_address, head.dashboard_url)
        # The task row trails the pause by a task-event flush (about a second).
        wait_for_pauses(
            lambda: [
                p for p in finder.find_pauses(endpoints, "auto", 10) if p.name == "failing_task"
            ],
            driver,
        )
        code, out = run_main(capsys, head)
        assert code == 0
        row = next(line for line in out.splitlines() if line.startswith("1 "))
        assert row.split()[1:6] == [
            "post_mortem",
            worker.ip,
            "failing_task",
            "-",
            f"{worker.ip}:{worker.port}",
        ]
        code, out = run_main(capsys, head, "--vscode", "1")
        assert code == 0
        [config] = json.loads(out)["configurations"]
        assert config["connect"] == {"host": worker.ip, "port": worker.port}
        # Listing must not use up the pause: a debugger can still attach afterwards.
        with DapSession.connect(worker.ip, worker.port, timeout=30) as dap:
            stopped = dap.attach_for_post_mortem()
            assert stopped["body"]["reason"] == "exception"
            dap.continue_(stopped["body"]["threadId"])
            dap.disconnect()
        assert "FAILED" in finish(driver)
