"""The port-range grammar, and the readers of ray_debugger_port_range that share it.

Validation (the ray_ports filters), the probe and the node hook once parsed the range each their own
way: "52000" passed validation and then crashed the probe. Validation and the hook now read
it with plugins/module_utils/ray_port_range.py, and the probe takes each node's range as that
node's hook read it, so the tests here hold every end to one answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import ray_debugger_port_range as hook
import ray_port_range as grammar
import ray_ports as filters
from ansible.errors import AnsibleFilterError
from ray_heads import NODE_HOOKS_PATH

from ray_debug_tools import probe, probe_job
from ray_debug_tools.probe import NodeReport

SINGLE_PORT = "'52000' is a single port; write it as a range, e.g. 52000-52000"
MALFORMED = "port range {!r} is malformed: expected {}, e.g. '52000-52099'"
A_PORT_OR_RANGE, A_RANGE = "a port or 'LOW-HIGH'", "'LOW-HIGH'"
BAD = "52000:52099"


@pytest.mark.parametrize(
    ("value", "span"),
    [
        (6379, (6379, 6379)),
        ("6379", (6379, 6379)),
        ("52000", (52000, 52000)),
        ("52000-52099", (52000, 52099)),
        ("10002-19999", (10002, 19999)),
        (" 1-1\n", (1, 1)),
        ("1-65535", (1, 65535)),
    ],
)
def test_port_span_reads_ports_and_ranges(value: int | str, span: tuple[int, int]) -> None:
    assert grammar.port_span(value) == span


@pytest.mark.parametrize(
    ("value", "ports"),
    [
        ("52000-52099", range(52000, 52100)),
        ("52000-52000", range(52000, 52001)),
        (" 1-1\n", range(1, 2)),
        ("1-65535", range(1, 65536)),
    ],
)
def test_port_range_reads_low_high(value: str, ports: range) -> None:
    assert grammar.port_range(value) == ports
    assert grammar.port_span(value) == (ports.start, ports.stop - 1)


@pytest.mark.parametrize("value", ["52000", " 52000 ", 52000])
def test_a_single_port_is_a_span_but_not_a_range(value: int | str) -> None:
    assert grammar.port_span(value) == (52000, 52000)
    with pytest.raises(ValueError) as raised:
        grammar.port_range(value)
    assert str(raised.value) == SINGLE_PORT


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("52099-52000", "port range '52099-52000' is reversed: the low port must come first, "
                        "e.g. '52000-52099'"),
        ("0-10", "port range '0-10' is outside 1-65535"),
        ("65000-70000", "port range '65000-70000' is outside 1-65535"),
        # Out of bounds before single: the port itself is what to fix.
        ("70000", "port range '70000' is outside 1-65535"),
        ("0", "port range '0' is outside 1-65535"),
    ],
)  # fmt: skip
def test_both_readers_refuse_reversed_and_outside_alike(value: str, message: str) -> None:
    for parse in (grammar.port_span, grammar.port_range):
        with pytest.raises(ValueError) as raised:
            parse(value)
        assert str(raised.value) == message


@pytest.mark.parametrize(
    "value",
    ["", "-", "52000:52099", "52000_52099", "a-b", "52000-52099-1", "-52000", "52000-",
     "+52000-52099", "52_000-52099", "\uff15\uff12\uff10\uff10\uff10-52099", "52000-52099,52200"],
)  # fmt: skip
def test_malformed_values_name_the_form_each_reader_expects(value: str) -> None:
    with pytest.raises(ValueError) as span_error:
        grammar.port_span(value)
    assert str(span_error.value) == MALFORMED.format(value, A_PORT_OR_RANGE)
    with pytest.raises(ValueError) as range_error:
        grammar.port_range(value)
    assert str(range_error.value) == MALFORMED.format(value, A_RANGE)


def test_format_port_range_reads_back() -> None:
    assert grammar.format_port_range(range(52000, 52100)) == "52000-52099"
    assert grammar.port_range(grammar.format_port_range(range(52000, 52001))) == range(52000, 52001)


def test_port_lists_read_and_write_as_the_kernel_does() -> None:
    assert grammar.parse_port_list("8080,52000-52002\n") == {8080, 52000, 52001, 52002}
    assert grammar.parse_port_list("\n") == set()
    assert grammar.format_port_list({52002, 8080, 52000, 52001, 9000}) == "8080,9000,52000-52002"
    assert grammar.format_port_list(set()) == ""


def imported_by(module: str) -> list[str]:
    """Modules a fresh interpreter newly imports with `module`, as site does from a .pth."""
    code = (
        f"import sys; sys.path[:0] = {NODE_HOOKS_PATH.split(os.pathsep)!r}\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.split()


def test_grammar_and_hook_stay_cheap_to_import() -> None:
    # The hook runs at start-up of every interpreter on a node.
    assert set(imported_by("ray_port_range")) <= {"ray_port_range", "__future__"}
    hook_imports = imported_by("ray_debugger_port_range")
    assert "ray_port_range" in hook_imports
    assert "typing" not in hook_imports


# ---- the validation end: the ray_ports filters ----------------------------------------------


def test_filters_speak_the_grammars_words() -> None:
    assert filters.port_span("52000") == (52000, 52000)
    assert filters.port_range_error("52000") == ""
    assert filters.port_range_error("52000-52099") == ""
    assert filters.port_range_error(BAD) == MALFORMED.format(BAD, A_PORT_OR_RANGE)
    assert filters.debugger_port_range_error("52000-52099") == ""
    assert filters.debugger_port_range_error("52000") == SINGLE_PORT
    assert filters.debugger_port_range_error(BAD) == MALFORMED.format(BAD, A_RANGE)


def test_filter_port_span_fails_the_task_with_the_grammars_message() -> None:
    with pytest.raises(AnsibleFilterError) as raised:
        filters.port_span("52099-52000")
    assert str(raised.value) == (
        "port range '52099-52000' is reversed: the low port must come first, e.g. '52000-52099'"
    )


def test_validation_can_name_the_debugger_range_filter() -> None:
    available = filters.FilterModule().filters()
    assert available["ray_debugger_port_range_error"]("52000") == SINGLE_PORT
    assert available["ray_port_range_error"]("52000") == ""


# ---- the node end: the debugger port-range hook ---------------------------------------------


def test_hook_ignores_a_single_port_and_says_how_to_write_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(hook.ENV_VAR, "52000")
    meta_path = list(sys.meta_path)
    hook.install()
    assert sys.meta_path == meta_path
    assert capsys.readouterr().err == (
        "ray_debugger_port_range: ignoring RAY_DEBUGGER_PORT_RANGE (debugger ports stay random): "
        f"{SINGLE_PORT}\n"
    )


def test_hook_finds_its_grammar_beside_it_at_start_up(tmp_path: Path) -> None:
    # As on a node: both files in one directory (site-packages), the .pth line run first.
    for module in (hook, grammar):
        shutil.copy(module.__file__, tmp_path)
    code = (
        "import ray_debugger_port_range; ray_debugger_port_range.install()\n"
        "import debugpy\n"
        f"print(hasattr(debugpy.listen, {hook._WRAPPED!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(tmp_path), hook.ENV_VAR: BAD},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "False\n"), result.stderr
    assert result.stderr.splitlines() == [
        "ray_debugger_port_range: ignoring RAY_DEBUGGER_PORT_RANGE (debugger ports stay random): "
        + MALFORMED.format(BAD, A_RANGE)
    ]


def test_reserve_refuses_a_single_port_with_the_grammars_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kernel = tmp_path / "ip_local_reserved_ports"
    kernel.write_text("40000\n")
    monkeypatch.setattr(hook, "RESERVED_PORTS", str(kernel))
    monkeypatch.setenv(hook.ENV_VAR, "52000")
    assert hook.main(["reserve"]) == 2
    assert capsys.readouterr().err == (
        f"ray_debugger_port_range: RAY_DEBUGGER_PORT_RANGE: {SINGLE_PORT}\n"
    )
    assert kernel.read_text() == "40000\n"


# ---- the operator's end: the debug-readiness probe ------------------------------------------

PROBE_ARGS = ["--head", "head", "--nodes", "n1=10.0.0.5", "--runtime-env", "env.yaml"]


def test_the_probe_job_reads_each_nodes_range_with_the_grammar() -> None:
    # The job runs in the node's venv, where the grammar is installed beside the hook.
    assert probe_job.debugger_ports("52000-52099") == [52000, 52099]
    assert probe_job.debugger_ports("52000") == f"RAY_DEBUGGER_PORT_RANGE: {SINGLE_PORT}"
    assert probe_job.debugger_ports(None) == "the Ray service does not set RAY_DEBUGGER_PORT_RANGE"


@pytest.mark.parametrize(
    ("node_range", "read", "port", "problem"),
    [
        ("52000-52099", [52000, 52099], 52010, ""),
        ("52000-52099", [52000, 52099], 40000,
         "debugger 10.0.0.5:40000 is outside ray_debugger_port_range 52000-52099: "
         "the port-range hook is not active on this node"),
        ("53000-53099", [53000, 53099], 53010,
         "the node's Ray runs with RAY_DEBUGGER_PORT_RANGE=53000-53099, not "
         "ray_debugger_port_range 52000-52099: run cluster-up.yml again"),
        (None, "the debugger hooks are not installed in this node's venv", 40000,
         "no debugger port range on this node: "
         "the debugger hooks are not installed in this node's venv"),
    ],
)  # fmt: skip
def test_the_probe_holds_each_node_to_the_inventorys_range(
    node_range: str | None, read: list[int] | str, port: int, problem: str
) -> None:
    report = NodeReport("n1", "10.0.0.5", port_range=node_range, debugger_ports=read)
    assert probe.port_range_problem(report, port, "52000-52099") == problem
