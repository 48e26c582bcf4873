"""Every command README.md and the runbook print is run by a test, by its text."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_templates import render

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from doc_commands import NOT_RUN, PROJECT, README, RUNBOOK, Covered, commands

RUNBOOK_TEMPLATE = ["runbook/templates/RUNBOOK.md.j2"]


def uncovered(texts: list[str], coverage: list[Covered]) -> list[str]:
    return [
        text
        for text in texts
        if text not in NOT_RUN and not any(entry.covers(text) for entry in coverage)
    ]


def test_every_readme_command_is_run_by_a_test() -> None:
    assert uncovered(commands((PROJECT / "README.md").read_text()), README) == []


@pytest.fixture(scope="module", params=["token", "disabled"])
def runbooks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RUNBOOK.md rendered for every debug mode, with and without token auth."""
    out = tmp_path_factory.mktemp(f"runbook-{request.param}")
    return render(out, render_templates=RUNBOOK_TEMPLATE, ray_auth_mode=request.param)


@pytest.mark.parametrize("mode", ["post_mortem", "legacy", "off"])
def test_every_runbook_command_is_run_by_a_test(runbooks: Path, mode: str) -> None:
    runbook = (runbooks / mode / "RUNBOOK.md").read_text()
    printed = commands(runbook)
    assert any(text.startswith("ansible-playbook -i ") for text in printed), printed
    assert uncovered(printed, RUNBOOK) == []


@pytest.mark.parametrize("entry", README + RUNBOOK, ids=lambda entry: entry.pattern)
def test_each_covering_test_exists(entry: Covered) -> None:
    path, _, function = entry.test.partition("::")
    source = (PROJECT / path).read_text()
    assert re.search(rf"^def {re.escape(function)}\(", source, re.MULTILINE), entry.test


def test_setup_is_the_readmes() -> None:
    """`make setup`, which CI runs first, is the README's install line; its activate line
    puts the venv's tools first on PATH."""
    readme = commands((PROJECT / "README.md").read_text())
    makefile = (PROJECT / "Makefile").read_text()
    recipe = re.split(r"^\$\(VENV\)/\.installed:.*\n", makefile, flags=re.MULTILINE)[1]
    install = recipe.splitlines()[0].strip().replace("$(VENV)", ".venv")
    assert install in readme
    activate = next(text for text in readme if text.endswith("/bin/activate") and text[0] == ".")
    found = subprocess.run(
        ["bash", "-c", f"{activate} && command -v ansible-playbook"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == str(PROJECT / ".venv/bin/ansible-playbook")


def test_sample_inventory(tmp_path: Path) -> None:
    """The README's copy of the sample inventory is an inventory Ansible reads as a cluster."""
    shutil.copytree(PROJECT / "inventory", tmp_path / "inventory")
    copy = next(
        text for text in commands((PROJECT / "README.md").read_text()) if text.startswith("cp ")
    )
    subprocess.run(["bash", "-c", copy], cwd=tmp_path, check=True)
    listed = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-inventory"),
            "-i",
            "inventory/mycluster/hosts.yml",
            "--list",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    groups = json.loads(listed.stdout)
    assert groups["ray_head"]["hosts"] == ["head1"]
    assert groups["ray_workers"]["hosts"] == ["gpu1", "gpu2"]
    assert groups["_meta"]["hostvars"]["gpu1"]["cluster_name"] == "verl-debug"


def test_ci_runs_make_test() -> None:
    """CI runs the README's command and nothing besides: what a fresh machine lacks, make
    installs itself (tools/prerequisites.sh)."""
    assert "make test" in commands((PROJECT / "README.md").read_text())
    steps = [
        line
        for line in (PROJECT / ".ci/run").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert steps == ["exec make test"]


def test_only_the_benchmark_goes_unrun() -> None:
    assert set(NOT_RUN) == {"make bench"}
    assert "make bench" in commands((PROJECT / "README.md").read_text())
