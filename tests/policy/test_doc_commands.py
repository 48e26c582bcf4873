"""Every command README.md and the runbook print is run by a test, by its text."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.render import render

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import doc_commands
from doc_commands import (
    NOT_RUN,
    POLICY,
    PROJECT,
    README,
    RUNBOOK,
    Check,
    Covered,
    alternatives,
    check,
    commands,
    derived,
    main,
    ran,
)

# Its module-scoped fixtures render once: every test of the module on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_doc_commands")

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
    # `make setup` runs it, as the README's line, in every make test.
    ran(install)
    activate = next(text for text in readme if text.endswith("/bin/activate") and text[0] == ".")
    ran(activate)
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
    ran(copy)
    subprocess.run(["bash", "-c", copy], cwd=tmp_path, check=True, timeout=60)
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
    # CI runs it, by .ci/run, in every make test.
    ran("make test")


def test_only_the_benchmark_goes_unrun() -> None:
    assert set(NOT_RUN) == {"make bench"}
    assert "make bench" in commands((PROJECT / "README.md").read_text())


# A test a document cites: `test_name`, `test_file.py` or `path/test_file.py::test_name`.
CITED_TEST = re.compile(r"(?:([\w/.-]*test_\w+\.py)::)?\b(test_\w+)\b(?!\.py)")
CITED_FILE = re.compile(r"[\w/.-]*test_\w+\.py")


def documents() -> list[Path]:
    """What an operator or a contributor reads: README, docs/, the runbook's template."""
    return [
        PROJECT / "README.md",
        *sorted((PROJECT / "docs").glob("*.md")),
        PROJECT / "roles/runbook/templates/RUNBOOK.md.j2",
    ]


def python_of_tests() -> list[Path]:
    return [*PROJECT.glob("tests/**/*.py"), *PROJECT.glob("molecule/**/*.py")]


def is_cited(path: str, file: str) -> bool:
    """Whether `file`, as a document cites it, is the test file at `path`: the same path, or its
    tail from a directory on (`test_auth.py`, `shared/tests/test_auth.py`). A cited directory
    must match too, so a file moved to another directory leaves its citations red."""
    return path == file or path.endswith("/" + file)


def test_every_test_a_document_names_exists() -> None:
    """A document that says "tested by X" names an X that exists: the function (a test or the
    fixture that runs it) in the file it names, and every test file it names."""
    defined: dict[str, set[str]] = {}
    for path in python_of_tests():
        for name in re.findall(r"^(?:async )?def (\w+)\(", path.read_text(), re.MULTILINE):
            defined.setdefault(name, set()).add(path.relative_to(PROJECT).as_posix())
    paths = [path.relative_to(PROJECT).as_posix() for path in python_of_tests()]
    missing = []
    for document in documents():
        text = document.read_text()
        where = document.relative_to(PROJECT)
        for cited in CITED_TEST.finditer(text):
            file, function = cited.groups()
            homes = defined.get(function, set())
            if not homes or (file and not any(is_cited(home, file) for home in homes)):
                missing.append(f"{where}: {cited.group(0)}")
        missing += [
            f"{where}: {file}"
            for file in CITED_FILE.findall(text)
            if not any(is_cited(path, file) for path in paths)
        ]
    assert missing == []


def test_a_test_file_cited_in_the_wrong_directory_is_not_found() -> None:
    assert is_cited("molecule/shared/tests/test_auth.py", "test_auth.py")
    assert is_cited("molecule/shared/tests/test_auth.py", "molecule/shared/tests/test_auth.py")
    assert not is_cited("tests/integration/test_probe.py", "tests/sandbox/test_probe.py")
    assert not is_cited("tests/unit/my_test_probe.py", "test_probe.py")


def write_records(directory: Path, runs: list[dict]) -> None:
    (directory / "1.jsonl").write_text("".join(json.dumps(run) + "\n" for run in runs))


SANDBOX = "tests/sandbox/test_make_up.py"
JOB = Covered(r"source |ray job submit ", f"{SANDBOX}::test_readme_debugs_a_job")
ENTRIES = [Covered(r"make up$", f"{SANDBOX}::sandbox"), JOB]


def test_a_covering_test_that_stops_running_its_command_is_named(tmp_path: Path) -> None:
    """The end of make test: an entry whose test recorded no matching run is named."""
    runs = [
        {"documented": "make up", "frames": [f"{SANDBOX}::sandbox"]},
        {"documented": "source /x/.venv/bin/activate", "frames": [JOB.test]},
        # The submit line, run by another test: not the claimed one.
        {"documented": "ray job submit -- python my_job.py", "frames": ["x.py::test_other"]},
    ]
    write_records(tmp_path, runs)
    assert check(tmp_path, ENTRIES) == Check(
        unproven=[f"{JOB.test} ran no documented command matching 'ray job submit '"],
        not_run=[],
    )
    runs[2]["frames"].append(JOB.test)
    write_records(tmp_path, runs)
    assert check(tmp_path, ENTRIES) == Check(unproven=[], not_run=[])


def test_an_entry_whose_stage_did_not_run_fails_a_full_run_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No function of the test's file recorded anything: its stage did not run. Reported as
    such; a failure when every stage ran (--all-stages)."""
    # A run of a test file no entry names: every entry's file ran nothing.
    write_records(tmp_path, [{"documented": "make up", "frames": ["tests/x.py::test_x"]}])
    assert check(tmp_path, ENTRIES) == Check(
        unproven=[],
        not_run=[f"{SANDBOX}::sandbox (for 'make up$')", f"{JOB.test} (for {JOB.pattern!r})"],
    )
    # The whole COVERAGE, as make test's last stage reads it.
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path), "--all-stages"]) == 1
    printed = capsys.readouterr().out
    assert f"not run in this run: {JOB.test}" in printed


def test_the_check_runs_as_make_tests_last_stage(tmp_path: Path) -> None:
    """As tools/ci.py runs it: exit 1 naming the test that stopped running its command."""
    write_records(
        tmp_path,
        [
            {"documented": "make up", "frames": [f"{SANDBOX}::sandbox"]},
            {"documented": "make probe", "frames": [f"{SANDBOX}::sandbox"]},
        ],
    )
    run = subprocess.run(
        [sys.executable, "tests/doc_commands.py", str(tmp_path), "--all-stages"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        f"{SANDBOX}::test_probe_passes_on_a_fresh_sandbox ran no documented command " in run.stdout
    )
    assert "not run in this run: molecule/" in run.stdout


def test_each_alternative_is_a_command_of_its_own() -> None:
    assert alternatives(r"verl-debug breakpoints |curl -s |ray debug$") == [
        "verl-debug breakpoints ",
        "curl -s ",
        "ray debug$",
    ]
    assert alternatives(r"ansible-galaxy collection (build|install) |x\|y[|]z") == [
        "ansible-galaxy collection (build|install) ",
        r"x\|y[|]z",
    ]
    assert all(alternatives(entry.pattern) for entry in README + RUNBOOK)


def test_a_run_is_recorded_with_its_document_and_the_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doc_commands, "RECORDS", tmp_path)
    (listing,) = commands("Find pauses:\n\n    verl-debug breakpoints --head 10.0.0.1\n")
    mine = derived(listing, listing.replace("10.0.0.1", "10.9.9.9"))
    ran(mine + " --json")
    ran("echo not from a document")
    (record,) = [
        json.loads(line) for line in next(tmp_path.glob("*.jsonl")).read_text().splitlines()
    ]
    assert record["documented"] == "verl-debug breakpoints --head 10.0.0.1"
    assert record["ran"] == "verl-debug breakpoints --head 10.9.9.9 --json"
    assert f"{POLICY}::test_a_run_is_recorded_with_its_document_and_the_stack" in record["frames"]
