"""The commands README.md and the runbook tell an operator to type, read from the documents.

Both show commands as indented code blocks. Tests run them by their text, so a command cannot
change in the docs without its test running the new text. COVERAGE names, for each command,
the test that runs it; tests/unit/test_doc_commands.py fails on a command the docs print that
no entry covers, and on an entry whose test does not exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
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
        pending = ""
    return found


@dataclass(frozen=True)
class Covered:
    """Commands matching `pattern` (from their start) are run, by their text, by `test`
    ('file::function', a test or the fixture that runs it for its tests)."""

    pattern: str
    test: str

    def covers(self, text: str) -> bool:
        return re.match(self.pattern, text) is not None


UNIT = "tests/unit/test_doc_commands.py"
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
    Covered(r"source |export RAY_AUTH_MODE=|ray job submit |ray-breakpoints ", SANDBOX_JOB),
    Covered(
        r"ansible-playbook -i artifacts/ray-sandbox/hosts.yml playbooks/collective_check.yml$",
        "tests/sandbox/test_make_up.py::test_readme_collective_check",
    ),
    Covered(
        r"python3 -m venv \.venv|\. \.venv/bin/activate$", f"{UNIT}::test_setup_is_the_readmes"
    ),
    Covered(r"cp -r inventory/sample ", f"{UNIT}::test_sample_inventory"),
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
    Covered(r"make test$", f"{UNIT}::test_ci_runs_make_test"),
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
        r"ray-breakpoints |curl -s |ssh |ray debug$|ray status$",
        f"{MOLECULE}/test_runbook.py::test_find_and_attach",
    ),
    Covered(r"ray job (submit|logs) ", f"{MOLECULE}/test_runbook.py::test_submit_and_read_logs"),
]

# Not run by any test, and why.
NOT_RUN = {
    "make bench": "takes about 90 minutes; its figures are docs/benchmarks.md, never test asserts",
}
