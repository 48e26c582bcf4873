"""`verl-debug`, the one entry point: every command it names answers under its own name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ray_debug_tools.cli import COMMANDS, main


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_answers_help_under_its_name(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: verl-debug {name} ")


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listed = [
        line.split()[0] for line in capsys.readouterr().out.split("commands:\n")[1].splitlines()
    ]
    assert listed == list(COMMANDS)


def test_an_unknown_command_names_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["breakpoint"]) == 2
    error = capsys.readouterr().err
    assert "no command 'breakpoint'" in error
    assert all(name in error for name in COMMANDS)


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().out.startswith("usage: verl-debug COMMAND")


def test_the_console_script_and_python_m_are_one_entry_point() -> None:
    """The playbooks run `python -m ray_debug_tools COMMAND`; operators run `verl-debug`."""
    bin_dir = sys.executable.rsplit("/", 1)[0]
    for argv in ([f"{bin_dir}/verl-debug"], [sys.executable, "-m", "ray_debug_tools"]):
        shown = subprocess.run(
            [*argv, "stacks", "--help"], capture_output=True, text=True, timeout=60, check=True
        )
        assert shown.stdout.startswith("usage: verl-debug stacks ")
