"""The commands README.md and the runbook tell an operator to type, read from the documents.

Both show commands as indented code blocks. Tests run them by their text, so a command cannot
change in the docs without its test running the new text. COVERAGE names, for each command,
the test that runs it; tests/policy/test_doc_commands.py fails on a command the docs print that
no entry covers, and on an entry whose test does not exist.

And a test must still run what it claims: where a test runs a documented command (or one it
made from it: the reader's paths, the test's inventory and mode), it calls ran(), which
records the documented text and the functions on the stack under artifacts/doc-commands/.
At the end of `make test`, `python3 tests/doc_commands.py --all-stages` fails for every entry
whose test ran no command matching each alternative of its pattern; without --all-stages (a
partial run) an entry whose test file ran nothing is only reported, as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
RECORDS = Path(os.environ.get("DOC_COMMANDS_RECORDS", PROJECT / "artifacts/doc-commands"))
# The documented command each text a test holds was made from: commands() and derived() note
# it, ran() reads it back.
ORIGINS: dict[str, str] = {}
TRAILING_COMMENT = re.compile(r"\s{2,}#.*$")


def commands(markdown: str) -> list[str]:
    """Every command in the document's indented code blocks.

    A code block is a run of lines indented by four or more spaces after a blank line, outside
    fenced blocks (diagrams, listings). Lines ending in a backslash continue on the next line;
    a trailing comment (two spaces, then #) is dropped.
    """
    found: list[str] = []
    fenced = in_block = False
    previous_blank = True
    pending = ""
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        blank = not line.strip()
        indented = line.startswith("    ") and not blank
        in_block = indented and (in_block or previous_blank or bool(pending))
        previous_blank = blank
        if not in_block:
            continue
        text = TRAILING_COMMENT.sub("", line.strip())
        if text.startswith("#"):
            continue
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        found.append(pending + text)
        ORIGINS.setdefault(pending + text, pending + text)
        pending = ""
    return found


def derived(documented: str, text: str) -> str:
    """`text`, which a test made from the documented command `documented`; returns `text`."""
    ORIGINS[text] = ORIGINS.get(documented, documented)
    return text


def ran(text: str) -> None:
    """Record that the calling test runs `text` now, if it comes from a document (extra
    arguments after it included), with every function of this project on the stack."""
    made_from = [known for known in ORIGINS if text == known or text.startswith(known + " ")]
    if not made_from:
        return
    frames, frame = [], sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        # The project's own code, not the venv's (pytest, pluggy) inside the checkout.
        if path.is_relative_to(PROJECT) and not path.relative_to(PROJECT).parts[0].startswith("."):
            frames.append(f"{path.relative_to(PROJECT).as_posix()}::{frame.f_code.co_name}")
        frame = frame.f_back
    record = {"documented": ORIGINS[max(made_from, key=len)], "ran": text, "frames": frames}
    RECORDS.mkdir(parents=True, exist_ok=True)
    with (RECORDS / f"{os.getpid()}.jsonl").open("a") as records:
        records.write(json.dumps(record) + "\n")


@dataclass(frozen=True)
class Covered:
    """Commands matching `pattern` (from their start) are run, by their text, by `test`
    ('file::function', a test or the fixture that runs it for its tests)."""

    pattern: str
    test: str

    def covers(self, text: str) -> bool:
        return re.match(self.pattern, text) is not None


POLICY = "tests/policy/test_doc_commands.py"
MOLECULE = "molecule/shared/tests"
SANDBOX_JOB = "tests/sandbox/test_make_up.py::test_readme_debugs_a_job"

# Every command block of README.md. /path/to/ray-cluster, inventory/mycluster/hosts.yml and
# my_job.py are the reader's own: the tests put the checkout, the test inventory and a job
# of theirs there, and run the rest as printed.
README = [
    # The headline: the inventory comes from ansible.cfg or ANSIBLE_INVENTORY.
    Covered(
        r"ansible-playbook cluster-up.yml -e debug_mode=",
        f"{MOLECULE}/test_mode_switch.py::test_mode_switch_restarts_only_ray_and_debugs_in_the_new_mode",
    ),
    Covered(r"make up$", "tests/sandbox/test_make_up.py::sandbox"),
    Covered(r"make probe$", "tests/sandbox/test_make_up.py::test_probe_passes_on_a_fresh_sandbox"),
    Covered(r"make down$", "tests/sandbox/test_make_up.py::test_make_down_removes_the_sandbox"),
    Covered(
        r"source |export RAY_AUTH_MODE=|ray job submit |"
        r"verl-debug breakpoints |verl-debug forward ",
        SANDBOX_JOB,
    ),
    Covered(
        r"ansible-playbook -i artifacts/ray-sandbox/hosts.yml playbooks/collective_check.yml$",
        "tests/sandbox/test_make_up.py::test_readme_collective_check",
    ),
    Covered(
        r"python3 -m venv \.venv|\. \.venv/bin/activate$", f"{POLICY}::test_setup_is_the_readmes"
    ),
    Covered(r"cp -r inventory/sample ", f"{POLICY}::test_sample_inventory"),
    Covered(
        r"ansible-playbook -i inventory/mycluster/hosts.yml cluster-up.yml -e debug_mode=",
        f"{MOLECULE}/test_mode_switch.py::test_mode_switch_restarts_only_ray_and_debugs_in_the_new_mode",
    ),
    Covered(
        r"ansible-playbook -i inventory/mycluster/hosts.yml cluster-up.yml$",
        f"{MOLECULE}/test_teardown.py::test_purge_then_up_in_one_run",
    ),
    Covered(
        r"ansible-playbook -i inventory/mycluster/hosts.yml cluster-down.yml",
        f"{MOLECULE}/test_teardown.py::downed",
    ),
    Covered(
        r"ansible-playbook -i inventory/mycluster/hosts.yml cluster-up.yml --tags ",
        f"{MOLECULE}/test_tags.py::test_a_tagged_run_repairs_its_slice_and_restarts_nothing",
    ),
    Covered(r"make test$", f"{POLICY}::test_ci_runs_make_test"),
    # The collection's way in: the online scenario's converge runs these from outside.
    Covered(
        r"ansible-galaxy collection (build|install) |"
        r"ansible-playbook -i inventory/mycluster/hosts.yml site.yml$",
        "molecule/online/outside.py::up_from_outside",
    ),
]

# Every command block of a rendered RUNBOOK.md, in either debug mode; its commands name this
# cluster's real addresses, paths and inventory, and run from the checkout as printed.
RUNBOOK = [
    Covered(r"export RAY_AUTH_MODE=", f"{MOLECULE}/test_runbook.py::run_printed"),
    Covered(r"cd /", f"{MOLECULE}/test_runbook.py::run_printed"),
    Covered(
        r"ansible-playbook -i \S+ playbooks/debug_probe.yml$",
        f"{MOLECULE}/test_runbook.py::test_probe_as_printed",
    ),
    Covered(
        r"ansible-playbook -i \S+ playbooks/collective_check.yml$",
        f"{MOLECULE}/test_data_path.py::collective_check",
    ),
    Covered(
        r"ansible-playbook -i \S+ cluster-up.yml -e debug_mode=",
        f"{MOLECULE}/test_mode_switch.py::test_mode_switch_restarts_only_ray_and_debugs_in_the_new_mode",
    ),
    Covered(r"ansible-playbook -i \S+ cluster-down.yml", f"{MOLECULE}/test_teardown.py::downed"),
    Covered(
        r"verl-debug breakpoints |curl -s |ssh |ray debug$|verl-debug forward ",
        f"{MOLECULE}/test_runbook.py::test_find_and_attach",
    ),
    Covered(r"ray status$", f"{MOLECULE}/test_runbook.py::test_ray_status_as_the_login_user"),
    Covered(
        r"verl-debug stacks |ray job submit .*runtime_env\.nccl-debug\.yaml |"
        r"ansible-playbook -i \S+ playbooks/evidence\.yml -e ray_evidence_job=",
        f"{MOLECULE}/test_hang.py::test_a_hung_job_names_its_odd_rank_and_leaves_its_evidence",
    ),
    Covered(r"verl-debug rank ", f"{MOLECULE}/test_hang.py::debug_a_waiting_rank"),
    Covered(
        r"ansible-playbook -i \S+ playbooks/evidence\.yml",
        f"{MOLECULE}/test_faults.py::test_worker_down_is_named_in_the_evidence_then_comes_back",
    ),
    Covered(r"ray job (submit|logs) ", f"{MOLECULE}/test_runbook.py::test_submit_and_read_logs"),
]

# Not run by any test, and why.
NOT_RUN = {
    "make bench": "takes over an hour; its figures are docs/benchmarks.md, never test asserts",
}


def alternatives(pattern: str) -> list[str]:
    """`pattern`'s top-level alternatives, each a command of its own that its test must run:
    'a |b(c|d) ' -> ['a ', 'b(c|d) ']."""
    found, depth, start, escaped, in_class = [], 0, 0, False, False
    for index, char in enumerate(pattern):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            found.append(pattern[start:index])
            start = index + 1
    return [*found, pattern[start:]]


@dataclass(frozen=True)
class Check:
    """What the records under one directory prove."""

    # An alternative of an entry that its test, run, never ran: the claim is false.
    unproven: list[str]
    # An entry none of whose test file's functions ran a documented command: its stage did not
    # run, or ran none of its tests. A full run has none (--all-stages).
    not_run: list[str]


def check(records: Path = RECORDS, entries: list[Covered] | None = None) -> Check:
    """Each entry (README's and the runbook's by default) against the runs recorded under
    `records`: every top-level alternative of its pattern must be a documented command its
    test ran, so an entry that claims two commands fails when its test stops running one."""
    seen = [
        json.loads(line)
        for path in sorted(records.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    files = {frame.partition("::")[0] for run in seen for frame in run["frames"]}
    unproven, not_run = [], []
    for entry in README + RUNBOOK if entries is None else entries:
        if entry.test.partition("::")[0] not in files:
            not_run.append(f"{entry.test} (for {entry.pattern!r})")
            continue
        unproven += [
            f"{entry.test} ran no documented command matching {alternative!r}"
            for alternative in alternatives(entry.pattern)
            if not any(
                re.match(alternative, run["documented"]) and entry.test in run["frames"]
                for run in seen
            )
        ]
    return Check(unproven, not_run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Every covering test ran the documented commands it claims."
    )
    parser.add_argument("records", nargs="?", type=Path, default=RECORDS)
    parser.add_argument(
        "--all-stages",
        action="store_true",
        help="every stage ran (a full make test): an entry whose test file ran nothing fails",
    )
    args = parser.parse_args(argv)
    found = check(args.records)
    for line in found.unproven:
        print(line)
    for line in found.not_run:
        print(f"not run in this run: {line}")
    failed = bool(found.unproven or (args.all_stages and found.not_run))
    if not failed:
        print(f"every covering test that ran ran its documented commands ({args.records})")
    return 1 if failed else 0


if __name__ == "__main__":
    # The last stage of `make test` (tools/ci.py), after every stage:
    # python3 tests/doc_commands.py --all-stages
    sys.exit(main())
