"""`make test`: every stage of the suite under its own time limit, then a table of wall times.

Stages run as soon as what they need has passed and what they follow has ended, so the node
images build while lint and the controller's tests run; the molecule scenarios then run one after
another: on two cores, two at once took three times as long each (converge 9 min, not 3) and
both ran past their limits. A stage that fails or runs past its limit is reported, with the
last Ansible task it printed, and the stages that do not need it go on. The lines that say
why a stage failed are repeated after the table, where a log cut to its end still shows them.
Each stage's output goes to artifacts/ci/STAGE.log and, prefixed with its name, to stdout.

    python -m tools.ci                 # every stage
    python -m tools.ci lint controller # these stages alone (their needs must pass first)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.bounded import kill_tree
from tests.doc_commands import RECORDS

PROJECT = Path(__file__).resolve().parents[1]
LOGS = PROJECT / "artifacts/ci"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Molecule announces each action of a scenario: "post_mortem ➜ converge: Executing".
MOLECULE_ACTION = re.compile(r"\w+ ➜ (\w+): Executing\s*$")
# Molecule indents the playbook's output and may wrap a long task name: its first line will do.
ANSIBLE_TASK = re.compile(r"TASK \[([^\]]+)")
# The lines that say why a stage failed: pytest's summary, Ansible's errors and fatal results,
# make's and the linters' errors. CI keeps only the end of the output, so they are repeated there.
WHY = re.compile(
    r"^(FAILED (?!- RETRYING)|ERROR |\[ERROR\]: |fatal: |make: \*\*\*|\S+:\d+:\d*:? |E  )"
)
# What Python warns of at every ansible-playbook's start: it matches WHY's file:line, says nothing.
WARNING = re.compile(r"^\S+:\d+: \w*Warning: ")
# A fatal result's YAML (its msg, rc, stderr) is indented below it: its first lines come with it.
FATAL = re.compile(r"^fatal: ")
FATAL_BODY_LINES = 8
# Molecule frames the playbook's output: "  │ fatal: [head]: ...".
FRAME = re.compile(r"^\s*│ ?")
WHY_LINES = 40


@dataclass
class Stage:
    name: str
    command: list[str]
    limit_s: int
    # Stages that must pass before this one starts.
    needs: tuple[str, ...] = ()
    # Stages that must have ended, passed or not: scenarios share container names.
    follows: tuple[str, ...] = ()
    status: str = "pending"
    started: float = 0.0
    ended: float = 0.0
    last_task: str = ""
    # (molecule action, seconds), in the order they ran.
    actions: list[tuple[str, float]] = field(default_factory=list)


def make(target: str) -> list[str]:
    return ["make", "--no-print-directory", target]


def scenario(name: str, limit_s: int, follows: tuple[str, ...]) -> Stage:
    """A molecule scenario, after the stage before it whatever its result: one failed
    controller test or scenario still leaves the other scenarios' verdicts to be had."""
    return Stage(name, make(f"scenario-{name}"), limit_s, ("setup", "images"), follows)


def pipeline() -> list[Stage]:
    """The suite, in the order a reader would run it. Limits are about twice a quiet run."""
    return [
        Stage("setup", make("setup"), 900),
        Stage("images", make("images"), 1200),
        Stage("lint", make("lint"), 600, ("setup",)),
        # Not beside lint: on two cores the pair took as long as the two in turn, and Ray
        # heads the integration tests start had 30 s to register under that load.
        Stage("controller", make("controller"), 1200, ("setup",), ("lint",)),
        Stage("host", make("host"), 900, ("setup", "images"), ("controller",)),
        scenario("post_mortem", 1500, ("host",)),
        scenario("online", 1500, ("post_mortem",)),
        scenario("faults", 1500, ("online",)),
        Stage("sandbox", make("sandbox"), 900, ("setup", "images"), ("faults",)),
        # Every covering test ran the documented commands it claims (tests/doc_commands.py):
        # after every stage, whatever became of them; a full run only, so every stage ran.
        Stage(
            "doc-commands",
            ["python3", "tests/doc_commands.py", "--all-stages"],
            60,
            follows=("lint", "controller", "post_mortem", "online", "faults", "sandbox"),
        ),
    ]


def run(stage: Stage, started_at: float, console: threading.Lock) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    stage.status, stage.started = "running", time.monotonic()
    action, action_started = "", stage.started
    with (LOGS / f"{stage.name}.log").open("w") as log:
        process = subprocess.Popen(
            stage.command,
            cwd=PROJECT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        # The stage's whole tree: molecule, pytest, ansible-playbook and its modules, ssh.
        timer = threading.Timer(stage.limit_s, kill_tree, (process.pid,))
        timer.start()
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            plain = ANSI.sub("", line)
            if task := ANSIBLE_TASK.search(plain):
                stage.last_task = task.group(1)
            if found := MOLECULE_ACTION.search(plain):
                now = time.monotonic()
                if action:
                    stage.actions.append((action, now - action_started))
                action, action_started = found.group(1), now
            with console:
                print(f"[{stage.name} {elapsed(time.monotonic() - started_at)}] {plain}", end="")
        returncode = process.wait()
        timed_out = not timer.is_alive() and returncode < 0
        timer.cancel()
    stage.ended = time.monotonic()
    if action:
        stage.actions.append((action, stage.ended - action_started))
    stage.status = "passed" if returncode == 0 else "timed out" if timed_out else "failed"


def elapsed(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def schedule(stages: list[Stage]) -> None:
    """Start each stage once its needs passed and what it follows ended; skip it if a need
    did not pass. Returns when every stage has ended or been skipped."""
    by_name = {stage.name: stage for stage in stages}
    started_at, console = time.monotonic(), threading.Lock()
    threads: list[threading.Thread] = []
    while any(stage.status in ("pending", "running") for stage in stages):
        for stage in stages:
            if stage.status != "pending":
                continue
            needed = [by_name[name] for name in stage.needs if name in by_name]
            followed = [by_name[name] for name in stage.follows if name in by_name]
            if any(need.status in ("failed", "timed out", "skipped") for need in needed):
                stage.status = "skipped"
            elif all(need.status == "passed" for need in needed) and all(
                other.status not in ("pending", "running") for other in followed
            ):
                thread = threading.Thread(target=run, args=(stage, started_at, console))
                stage.status = "running"
                thread.start()
                threads.append(thread)
        time.sleep(0.5)
    for thread in threads:
        thread.join()


def table(stages: list[Stage], started_at: float) -> str:
    rows = [f"{'stage':<24}{'result':<11}{'start':>7}{'wall':>7}"]
    for stage in stages:
        if stage.status == "skipped":
            rows.append(f"{stage.name:<24}{'skipped':<11}")
            continue
        rows.append(
            f"{stage.name:<24}{stage.status:<11}{elapsed(stage.started - started_at):>7}"
            f"{elapsed(stage.ended - stage.started):>7}"
        )
        rows += [
            f"  {action:<22}{'':<11}{'':>7}{elapsed(seconds):>7}"
            for action, seconds in stage.actions
        ]
        if stage.status == "timed out":
            rows.append(f"  past its {stage.limit_s} s limit in task: {stage.last_task or '?'}")
    return "\n".join(rows)


def failure_lines(lines: list[str]) -> list[str]:
    """The lines that say why, each fatal result with its task's name and the start of its YAML."""
    found: list[str] = []
    task, body_left = "", 0
    for line in lines:
        text = line.lstrip()
        if body_left and line.startswith(" ") and text:
            found.append(line)
            body_left -= 1
            continue
        body_left = 0
        if named := ANSIBLE_TASK.search(text):
            task = named.group(1)
        elif WHY.match(text) and not WARNING.match(text):
            fatal = FATAL.match(text) is not None
            if fatal and task:
                found.append(f"in TASK [{task}]:")
            found.append(text)
            body_left = FATAL_BODY_LINES if fatal else 0
    return found


def why(stage: Stage) -> str:
    """What a failed stage's log says of its failure: the matching lines, else its tail."""
    log = LOGS / f"{stage.name}.log"
    text = ANSI.sub("", log.read_text(errors="replace")) if log.exists() else ""
    lines = [FRAME.sub("", line).rstrip() for line in text.splitlines()]
    reasons = failure_lines(lines) or [line.lstrip() for line in lines[-10:]]
    return "\n".join(
        [f"why {stage.name} {stage.status} ({stage.name}.log):"]
        + [f"  {line[:300]}" for line in reasons[-WHY_LINES:]]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="*", help="stage names (default: all)")
    chosen = parser.parse_args(argv).stages
    stages = pipeline()
    unknown = sorted(set(chosen) - {stage.name for stage in stages})
    if unknown:
        valid = ", ".join(stage.name for stage in stages)
        parser.error(f"unknown stage(s) {', '.join(unknown)}; valid: {valid}")
    if chosen:
        stages = [stage for stage in stages if stage.name in chosen]
    else:
        # The records of this run alone.
        shutil.rmtree(RECORDS, ignore_errors=True)
    started_at = time.monotonic()
    schedule(stages)
    total = time.monotonic() - started_at
    report = f"{table(stages, started_at)}\n{'total':<35}{'':>7}{elapsed(total):>7}\n"
    report += "".join(
        f"{why(stage)}\n" for stage in stages if stage.status in ("failed", "timed out")
    )
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / "stages.txt").write_text(report)
    print(f"\n{report}", end="")
    return 0 if all(stage.status == "passed" for stage in stages) else 1


if __name__ == "__main__":
    sys.exit(main())
