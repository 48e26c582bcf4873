"""verl-debug breakpoints: parsing and formatting against captured Ray answers, then real heads.

The fixtures are raw answers of a real Ray 2.60 head, written by
tests/fixtures/capture_ray_responses.py (its docstring says how to rerun it).
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

from ray_debug_tools import endpoints, finder, pause_views, pauses
from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.endpoints import Endpoints
from ray_debug_tools.pauses import (
    Pause,
    legacy_breakpoints,
    legacy_record,
    paused_workers,
    paused_workers_from_rows,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"


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
    legacy = pauses.legacy_pauses(captured["breakpoints"], captured["nodes"])
    workers = paused_workers_from_rows(captured["worker_rows"])
    debugpy = pauses.post_mortem_pauses(workers, captured["tasks"], captured["now"])
    return pauses.numbered(legacy + debugpy)


# ---- parsing real answers ------------------------------------------------------------------


def test_legacy_row_from_registry_entry(captured: dict[str, Any]) -> None:
    [entry] = fixture("legacy_registry.json")
    [row] = pauses.legacy_pauses(captured["breakpoints"], captured["nodes"])
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
    rows = pauses.post_mortem_pauses(workers, captured["tasks"], captured["now"])
    by_name = {row.name: row for row in rows}
    assert set(by_name) == {"post_mortem_task", "Trainer.step"}
    for worker in workers:
        [task] = [t for t in captured["tasks"][worker.worker_id] if t["state"] == "RUNNING"]
        row = by_name[task["name"]]
        assert (row.host, row.port, row.node_ip) == (worker.ip, worker.port, worker.ip)
        assert row.waited_from == "task_start"
        assert row.waited_s == pytest.approx(captured["now"] - task["start_time_ms"] / 1000)


def test_post_mortem_rows_say_where_and_what_the_task_raised(captured: dict[str, Any]) -> None:
    workers = paused_workers_from_rows(captured["worker_rows"])
    rows = pauses.post_mortem_pauses(workers, captured["tasks"], captured["now"])
    driver = captured["meta"]["driver_path"]
    # The capture's driver raises these on its lines 19 and 26, below Ray's own frames.
    assert {(row.name, row.location, row.exception) for row in rows} == {
        ("post_mortem_task", f"{driver}:19", "ValueError: boom"),
        ("Trainer.step", f"{driver}:26", "FloatingPointError: loss is nan"),
    }


def test_breakpoint_pause_has_no_exception(captured: dict[str, Any]) -> None:
    [[task], *_] = captured["tasks"].values()
    # At a breakpoint() the task's execute span is still open, so only earlier spans exist.
    events = [e for e in task["profiling_data"]["events"] if e["event_name"] != "task:execute"]
    paused = task | {"profiling_data": {"events": events}}
    assert pauses.task_raised(paused) == pauses.Raised(None, None, None)
    assert pauses.task_raised(None) == pauses.Raised(None, None, None)


def test_running_task_ignores_finished_attempts(captured: dict[str, Any]) -> None:
    [task] = captured["tasks"][captured["meta"]["paused_worker_ids"][0]]
    older = task | {"state": "FINISHED", "name": "earlier_task"}
    assert pauses.running_task([older, task]) is task
    assert pauses.running_task([older]) is None


def test_pause_without_task_row_yet_is_named_by_pid(captured: dict[str, Any]) -> None:
    [worker, *_] = paused_workers_from_rows(captured["worker_rows"])
    [row] = pauses.post_mortem_pauses([worker], {}, captured["now"])
    assert row.name == f"worker pid {worker.pid}"
    assert (row.waited_s, pause_views.format_duration(row.waited_s)) == (None, "-")


# ---- formatting ----------------------------------------------------------------------------


def test_numbered_oldest_first(captured_pauses: list[Pause]) -> None:
    assert [p.number for p in captured_pauses] == [1, 2, 3]
    waited = [p.waited_s for p in captured_pauses]
    assert waited == sorted(waited, reverse=True)


def test_table_lists_every_pause_and_how_to_attach(captured_pauses: list[Pause]) -> None:
    table = pause_views.format_table(
        captured_pauses, "verl-debug breakpoints --head h"
    ).splitlines()
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
    assert "verl-debug breakpoints --head h --attach N" in table[-1]
    assert "verl-debug breakpoints --head h --vscode N" in table[-1]
    assert any(line.startswith("* since the task started") for line in table)
    assert any(line.startswith("localhost:") for line in table)


def test_json_holds_the_table_rows(captured_pauses: list[Pause]) -> None:
    rows = json.loads(pause_views.pauses_json(captured_pauses))
    assert [(r["number"], r["mode"], r["address"]) for r in rows] == [
        (p.number, p.mode, p.address) for p in captured_pauses
    ]


def test_launch_config_attaches_to_the_debugpy_port(captured_pauses: list[Pause]) -> None:
    pause = next(p for p in captured_pauses if p.mode == "post_mortem")
    config = json.loads(json.dumps(pause_views.launch_config([pause])))
    assert config["version"] == "0.2.0"
    assert config["configurations"] == [
        {
            "name": f"Ray: {pause.name} on {pause.address}",
            "type": "debugpy",
            "request": "attach",
            "connect": {"host": pause.host, "port": pause.port},
            "justMyCode": False,
        }
    ]
    assert "compounds" not in config


SESSION = "/var/tmp/ray/session_2026-12-04_10-00-00_1_2"


@pytest.mark.parametrize(
    ("task", "raised_file", "root"),
    [
        # A crash names the unpacked copy in its traceback.
        (None, f"{SESSION}/runtime_resources/working_dir_files/_ray_pkg_ab12/sub/job.py",
         f"{SESSION}/runtime_resources/working_dir_files/_ray_pkg_ab12"),
        # A breakpoint() pause: the task's runtime env names the package, its log the session.
        ({"runtime_env_info": {"serialized_runtime_env": '{"working_dir": "gcs://_ray_pkg_ab12.zip"}'},
          "task_log_info": {"stdout_file": f"{SESSION}/logs/worker-1.out"}},
         None, f"{SESSION}/runtime_resources/working_dir_files/_ray_pkg_ab12"),
        # No working_dir, or a task row not there yet: nothing to map.
        ({"runtime_env_info": {"serialized_runtime_env": "{}"},
          "task_log_info": {"stdout_file": f"{SESSION}/logs/worker-1.out"}}, None, None),
        (None, "/home/me/driver.py", None),
    ],
)  # fmt: skip
def test_job_root_is_where_the_node_unpacked_the_working_dir(
    task: dict[str, Any] | None, raised_file: str | None, root: str | None
) -> None:
    assert pauses.job_root(task, raised_file) == root


def test_launch_config_maps_a_known_working_dir_to_the_local_root() -> None:
    pause = rank(1, "10.0.0.11", 52000, remote_root=f"{SESSION}/x/_ray_pkg_ab12")
    [config] = pause_views.launch_config([pause])["configurations"]
    assert config["pathMappings"] == [
        {"localRoot": "${workspaceFolder}", "remoteRoot": f"{SESSION}/x/_ray_pkg_ab12"}
    ]


# ---- a crowd: every rank of a step paused at once ------------------------------------------


def rank(number: int, node_ip: str, port: int, **fields: Any) -> Pause:
    """A verl rank paused post-mortem in the actor's update, as the finder lists it."""
    defaults = {
        "mode": "post_mortem",
        "name": "WorkerDict.update_actor",
        "file": "/verl/dp_actor.py",
        "line": 312,
        "waited_s": 600.0 - number,
        "waited_from": "task_start",
        "exception": "FloatingPointError: loss is nan",
    }
    return Pause(number=number, node_ip=node_ip, host=node_ip, port=port, **(defaults | fields))


@pytest.fixture
def crowd() -> list[Pause]:
    """Six ranks on two nodes crashed at one line, two at another, and one legacy pdb pause."""
    return [
        *(rank(n, f"10.0.0.{1 + (n - 1) // 3}", 52000 + (n - 1) % 3) for n in range(1, 7)),
        rank(7, "10.0.0.1", 52003, line=400),
        rank(8, "10.0.0.2", 52003, line=400),
        rank(9, "10.0.0.3", 52010, mode="legacy", waited_from="pause", exception=None),
    ]


def group_rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line) for line in text.splitlines() if re.match(r"\d", line)]


def test_a_crowd_at_one_line_is_one_table_line(crowd: list[Pause]) -> None:
    text = pause_views.format_groups(crowd, "verl-debug breakpoints --head h")
    lines = text.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == list(pause_views.GROUP_HEADER)
    nodes, task, at = "2 nodes: 10.0.0.1, 10.0.0.2", "WorkerDict.update_actor", "/verl/dp_actor.py"
    assert group_rows(text) == [
        ["1-6", "post_mortem", "6", nodes, task, f"{at}:312", "ports 52000-52002", "9m 59s*"],
        ["7-8", "post_mortem", "2", nodes, task, f"{at}:400", "port 52003", "9m 53s*"],
        ["9", "legacy", "1", "10.0.0.3", task, f"{at}:312", "10.0.0.3:52010", "9m 51s"],
    ]
    # The exception sits under its line's mode column.
    assert lines[2] == " " * lines[0].index("mode") + "raised FloatingPointError: loss is nan"
    assert "`verl-debug breakpoints --head h --all`" in text
    assert "`verl-debug breakpoints --head h --vscode-group N > .vscode/launch.json`" in text


def test_lone_pauses_list_as_they_did(captured_pauses: list[Pause]) -> None:
    text = pause_views.format_groups(captured_pauses, "verl-debug breakpoints --head h")
    assert [(row[0], row[6]) for row in group_rows(text)] == [
        (str(p.number), p.address) for p in captured_pauses
    ]
    assert "--all" not in text and "--vscode-group" not in text


def test_many_nodes_are_counted_and_cut_short() -> None:
    ranks = [rank(n, f"10.0.0.{n}", 52000) for n in range(1, 4)]
    [row] = group_rows(pause_views.format_groups(ranks, "verl-debug breakpoints --head h"))
    assert row[3] == "3 nodes: 10.0.0.1, 10.0.0.2, ..."
    assert row[6] == "port 52000"


def test_one_exception_type_is_one_line_whatever_the_messages() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. GPU {} has 1.2 GiB free"
    ranks = [
        rank(1, "10.0.0.1", 52000, exception=oom.format(0)),
        rank(2, "10.0.0.1", 52001, exception=oom.format(1)),
        rank(3, "10.0.0.1", 52002, exception="ValueError: boom"),
    ]
    text = pause_views.format_groups(ranks, "verl-debug breakpoints --head h")
    assert [row[0] for row in group_rows(text)] == ["1-2", "3"]
    assert "raised torch.OutOfMemoryError (messages differ; --json has each)" in text
    assert "raised ValueError: boom" in text


def test_legacy_and_debugpy_pauses_never_share_a_line() -> None:
    # Same task, file:line and (no) exception: only the debugger differs.
    debugpy = rank(1, "10.0.0.1", 52000, exception=None)
    legacy = rank(2, "10.0.0.1", 52001, mode="legacy", exception=None, waited_from="pause")
    assert pause_views.grouped([debugpy, legacy]) == [[debugpy], [legacy]]


def test_json_keeps_one_object_per_pause_with_its_group(crowd: list[Pause]) -> None:
    rows = json.loads(pause_views.pauses_json(crowd))
    assert [row["number"] for row in rows] == list(range(1, 10))
    assert [row["group"] for row in rows] == [1] * 6 + [7, 7, 9]
    assert rows[0]["exception"] == "FloatingPointError: loss is nan"


def test_launch_config_for_a_crowd_attaches_to_every_rank(crowd: list[Pause]) -> None:
    ranks = crowd[:6]
    config = json.loads(json.dumps(pause_views.launch_config(ranks)))
    configurations = config["configurations"]
    assert [c["connect"] for c in configurations] == [
        {"host": p.host, "port": p.port} for p in ranks
    ]
    names = [c["name"] for c in configurations]
    assert names[0] == "Ray: WorkerDict.update_actor on 10.0.0.1:52000"
    assert len(set(names)) == len(ranks)
    [compound] = config["compounds"]
    assert compound["configurations"] == names
    assert compound["name"] == "Ray: all 6 pauses of WorkerDict.update_actor"


@pytest.mark.parametrize(
    ("numbers", "text"), [([], ""), ([3], "3"), ([5, 1, 2, 3, 7, 8], "1-3,5,7-8")]
)
def test_number_spans(numbers: list[int], text: str) -> None:
    assert pause_views.number_spans(numbers) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (-3, "0s"), (59.9, "59s"), (61, "1m 01s"), (3725, "1h 02m"), (90000, "1d 1h")],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert pause_views.format_duration(seconds) == text


def test_endpoints_from_head_and_overrides() -> None:
    assert endpoints.resolve_endpoints("10.0.0.1", None, None) == Endpoints(
        "10.0.0.1:6379", "http://10.0.0.1:8265"
    )
    assert endpoints.resolve_endpoints("fd00::1", "h:9000/", "g:1") == Endpoints(
        "g:1", "http://h:9000"
    )
    assert endpoints.resolve_endpoints("fd00::1", None, None).gcs == "[fd00::1]:6379"


# ---- main() on captured pauses, without a cluster ------------------------------------------


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch, captured_pauses: list[Pause]) -> list[Pause]:
    monkeypatch.setattr(finder, "find_pauses", lambda *_: captured_pauses)
    return captured_pauses


@pytest.fixture
def crowd_listed(monkeypatch: pytest.MonkeyPatch, crowd: list[Pause]) -> list[Pause]:
    monkeypatch.setattr(finder, "find_pauses", lambda *_: crowd)
    return crowd


def test_list_shows_groups_and_all_shows_pauses(
    crowd_listed: list[Pause], capsys: pytest.CaptureFixture[str]
) -> None:
    assert finder.main(["--head", "h"]) == 0
    assert [row[0] for row in group_rows(capsys.readouterr().out)] == ["1-6", "7-8", "9"]
    assert finder.main(["--head", "h", "--all"]) == 0
    assert [row[0] for row in group_rows(capsys.readouterr().out)] == [str(n) for n in range(1, 10)]


def test_vscode_group_attaches_to_every_pause_on_the_line(
    crowd_listed: list[Pause], capsys: pytest.CaptureFixture[str]
) -> None:
    assert finder.main(["--head", "h", "--vscode-group", "4"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert [c["connect"]["port"] for c in config["configurations"]] == [
        p.port for p in crowd_listed[:6]
    ]
    assert finder.main(["--head", "h", "--vscode-group", "8"]) == 0
    assert len(json.loads(capsys.readouterr().out)["configurations"]) == 2


def test_vscode_group_errors_name_the_value_and_the_valid_ones(
    crowd_listed: list[Pause], capsys: pytest.CaptureFixture[str]
) -> None:
    assert finder.main(["--head", "h", "--vscode-group", "10"]) == 1
    assert "no pause #10 (9 paused now: 1-9)" in capsys.readouterr().err
    assert finder.main(["--head", "h", "--vscode-group", "9"]) == 2
    err = capsys.readouterr().err
    assert "#9 is a legacy pdb pause" in err and "--attach 9" in err
    assert "(debugpy pauses: 1-8)" in err
    for argv, message in [
        (["--vscode-group", "all"], "argument --vscode-group: invalid int value: 'all'"),
        (["--vscode-group", "1", "--all"], "argument --all: not allowed with argument"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            finder.main(["--head", "h", *argv])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


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
    assert (
        err.count("\n") == 1 and address in err and err.startswith("verl-debug breakpoints: error:")
    )


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
        [row] = group_rows(out)
        assert [row[i] for i in (0, 1, 2, 4, 5)] == [
            "1",
            "legacy",
            "1",
            "paused_task",
            f"{script}:{BREAKPOINT_LINE}",
        ]
        assert row[6] == f"{pause.ip}:{pause.port}"
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
        driver, script = start_driver(FAILING_DRIVER, tmp_path, head)
        raise_line = FAILING_DRIVER.splitlines().index('    raise ValueError("boom")') + 1
        [worker] = wait_for_pauses(lambda: paused_workers(head.dashboard_url), driver)
        endpoints = Endpoints(head.gcs_address, head.dashboard_url)
        # The task row and its traceback trail the pause by a task-event flush (about a second).
        wait_for_pauses(
            lambda: [p for p in pauses.find_pauses(endpoints, "auto", 10) if p.exception], driver
        )
        code, out = run_main(capsys, head)
        assert code == 0
        [row] = group_rows(out)
        assert row[1:7] == [
            "post_mortem",
            "1",
            worker.ip,
            "failing_task",
            f"{script}:{raise_line}",
            f"{worker.ip}:{worker.port}",
        ]
        assert out.splitlines()[2].strip() == "raised ValueError: boom"
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


# A job whose code travels in its working_dir: the task imports it on the worker, from Ray's
# unpacked copy there.
CRASH_JOB = """\
def fail():
    answer = 42
    raise ValueError("boom")
"""
WORKING_DIR_DRIVER = """\
import sys

import ray

ray.init(address=sys.argv[1], runtime_env={"working_dir": sys.argv[2]})


@ray.remote(max_retries=0)
def failing_task():
    from crash_job import fail

    fail()


try:
    ray.get(failing_task.remote())
except ValueError as exc:
    print("FAILED", type(exc).__name__, exc, flush=True)
"""


def test_vscode_config_maps_the_working_dir_to_the_operators_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through launch.json's pathMappings a DAP client sees the operator's own file in the
    paused frame, and a breakpoint set in that file binds on the node's copy. The operator's
    copy lies elsewhere than the directory the job was submitted from, as on a laptop."""
    job, checkout = tmp_path / "job", tmp_path / "operator"
    for folder in (job, checkout):
        folder.mkdir()
        (folder / "crash_job.py").write_text(CRASH_JOB)
    local_file = checkout / "crash_job.py"
    raise_line = CRASH_JOB.splitlines().index('    raise ValueError("boom")') + 1
    with ray_head({"RAY_DEBUG_POST_MORTEM": "1"}, tmp_path / "ray-start.log") as head:
        driver, _ = start_driver(WORKING_DIR_DRIVER, tmp_path, head, str(job))
        endpoints = Endpoints(head.gcs_address, head.dashboard_url)
        # The task row, which names the working_dir, trails the pause by a task-event flush.
        [pause] = wait_for_pauses(
            lambda: [p for p in pauses.find_pauses(endpoints, "auto", 10) if p.remote_root],
            driver,
        )
        assert re.fullmatch(rf"/.+/{pauses.WORKING_DIR_FILES}/_ray_pkg_\w+", pause.remote_root)
        code, out = run_main(capsys, head, "--vscode", "1", "--local-root", str(checkout))
        assert code == 0
        [config] = json.loads(out)["configurations"]
        mappings = [{"localRoot": str(checkout), "remoteRoot": pause.remote_root}]
        assert config["pathMappings"] == mappings
        with DapSession.connect(pause.host, pause.port, timeout=30) as dap:
            thread = dap.attach_for_post_mortem(mappings)["body"]["threadId"]
            frame = next(f for f in dap.stack_trace(thread) if f["name"] == "fail")
            assert (frame["source"]["path"], frame["line"]) == (str(local_file), raise_line)
            answer = dap.request(
                "setBreakpoints",
                {"source": {"path": str(local_file)}, "breakpoints": [{"line": raise_line - 1}]},
            )
            assert [found["verified"] for found in answer["breakpoints"]] == [True]
            dap.continue_(thread)
            dap.disconnect()
        assert "FAILED" in finish(driver)
