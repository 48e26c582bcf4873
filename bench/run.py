"""`make bench`: cluster-up.yml against `ray up` and a manual SSH sequence, on the same bare
sandbox nodes with the same warm wheelhouse. Every sample lands in docs/benchmarks.jsonl as it
is taken, with the commit, machine and time it was taken on; docs/benchmarks.md and its plot
are written from that file at the end (`python -m bench.report` rewrites them alone), and
both are committed."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from bench import report
from bench.methods import (
    Run,
    cluster_up,
    controller_cpu,
    forget_locks,
    keep_lock_and_archive,
    keep_locks,
    manual,
    ray_up,
    restore_locks,
)
from bench.nodes import RESULTS, Nodes, run

SAMPLES = report.SAMPLES
T = TypeVar("T")
RAY_UP_STATE = Path("/tmp/ray/cluster-bench-ray-up.state")
LEVERS_OFF = {
    "SSH pipelining": {"ANSIBLE_PIPELINING": "False"},
    "ControlPersist": {"ANSIBLE_SSH_ARGS": "-o ControlMaster=no"},
}
# Nodes, the head included, of the light runs: what the controller pays per node.
LIGHT_NODES = (1, 4, 8, 16)
# The longest tasks a scale sample keeps.
SCALE_TASKS = 5
# Each repeat switches once, alternating, so the switches are split between directions.
SWITCH_TO = ("post_mortem", "legacy")


@functools.cache
def machine() -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")), platform.processor(),
    )  # fmt: skip
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    docker = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {memory_kib / 2**20:.0f} GiB memory, "
        f"Linux {platform.release()}, Docker {docker}, Python {sys.version.split()[0]}"
    )


@functools.cache
def commit() -> str:
    """The commit measured, marked when the tree differs from it (the bench's own files aside)."""
    head = run("git", "rev-parse", "--short", "HEAD").strip()
    changed = run("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs")
    return f"{head}+changes" if changed.strip() else head


def record(what: str, seconds: float, **details: object) -> None:
    taken = {"commit": commit(), "machine": machine(), "at": f"{datetime.now(UTC):%Y-%m-%d %H:%M}"}
    with SAMPLES.open("a") as samples:
        sample = {"what": what, "seconds": round(seconds, 1), **details, **taken}
        samples.write(json.dumps(sample) + "\n")
    shown = {key: value for key, value in details.items() if not isinstance(value, list)}
    print(f"{what}: {seconds:.1f} s {shown or ''}", flush=True)


def on_fresh_nodes(nodes: Nodes, measure: Callable[[Nodes], None]) -> None:
    """Bare containers for one measurement, removed afterwards whatever happens."""
    nodes.destroy()
    nodes.create()
    restore_locks()
    settle_disk()
    try:
        measure(nodes)
    finally:
        nodes.destroy()


def settle_disk() -> None:
    """Before the clock starts, no trace of the last cluster's removal: its writes reach the
    disk, and then its blocks leave the page cache. On ext4 without a journal (this machine's
    Docker root) a new inode skips every free one deleted in the last minutes whose block is
    still cached: after a removal, a node's `uv pip sync` spent 16-40 s in the kernel where it
    spends 9 s once the cache is dropped (docs/performance.md)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as error:
        raise SystemExit(f"the bench drops the page cache, as root: {error}") from error


def warm_up(nodes: Nodes) -> None:
    """Untimed: resolve the lock and build the wheelhouse every timed run then finds warm."""
    cluster_up("-e", "debug_mode=legacy")
    keep_locks()
    if nodes.verl:
        keep_lock_and_archive()


def mitogen() -> dict[str, str]:
    """Mitogen for Ansible as the strategy: one Python interpreter kept per node for the run."""
    [package] = importlib.util.find_spec("ansible_mitogen").submodule_search_locations
    return {
        "ANSIBLE_STRATEGY_PLUGINS": str(Path(package) / "plugins/strategy"),
        "ANSIBLE_STRATEGY": "mitogen_linear",
        # Mitogen's own SSH client checks host keys unless told here: it does not read the
        # inventory's StrictHostKeyChecking=no (the bench's nodes get new keys every time).
        "ANSIBLE_HOST_KEY_CHECKING": "False",
    }


def with_node_cpu(nodes: Nodes, take: Callable[[], T]) -> tuple[T, dict[str, float]]:
    """What take returns, and the CPU seconds each node's container spent meanwhile."""
    before = nodes.cpu_seconds()
    return take(), nodes.cpu_since(before)


def ours(nodes: Nodes, repeat: int, strategy: str | None = None) -> None:
    """Cold, then on the same cluster: a no-op and a mode switch; with the default strategy,
    levers off and one worker more too."""
    start, mode = SWITCH_TO[(repeat + 1) % 2], SWITCH_TO[repeat % 2]
    strategy_env = mitogen() if strategy == "mitogen" else None
    tag = {"strategy": strategy} if strategy else {}

    def up(debug_mode: str) -> tuple[Run, dict[str, float]]:
        return with_node_cpu(
            nodes, lambda: cluster_up("-e", f"debug_mode={debug_mode}", env=strategy_env)
        )

    cold, cpu = up(start)
    record("cold", cold.seconds, method="cluster-up", workers=nodes.workers, mode=start,
           node_cpu_s=cpu, **tag)  # fmt: skip
    noop, cpu = up(start)
    record("no-op", noop.seconds, method="cluster-up", changed=noop.changed, node_cpu_s=cpu, **tag)
    switch, cpu = up(mode)
    record("mode switch", switch.seconds, method="cluster-up", to=mode, node_cpu_s=cpu, **tag)
    if strategy:
        return
    # Where the time goes, from the first repeat: docs/performance.md reads it.
    if repeat == 0:
        for what, measured in (("cold", cold), ("no-op", noop), ("mode switch", switch)):
            record("profile", measured.seconds, method="cluster-up", of=what, tasks=measured.tasks)
    # Levers, each measured once by turning it off for a no-op run.
    for lever, env in LEVERS_OFF.items() if repeat == 0 else ():
        off = cluster_up("-e", f"debug_mode={mode}", env=env)
        record("no-op", off.seconds, method="cluster-up", without=lever, changed=off.changed)
    bigger = Nodes(nodes.workers + 1, nodes.verl)
    bigger.create()
    record("add a worker", cluster_up("-e", f"debug_mode={mode}").seconds, method="cluster-up",
           workers=bigger.workers)  # fmt: skip


def theirs(nodes: Nodes, repeat: int) -> None:
    # The local provider keeps node state on this machine: bare nodes must not look set up.
    RAY_UP_STATE.unlink(missing_ok=True)
    seconds, cpu = with_node_cpu(nodes, lambda: ray_up(nodes))
    record("cold", seconds, method="ray up", workers=nodes.workers, node_cpu_s=cpu)
    # What an operator re-running `ray up` gets: setup again and Ray restarted.
    seconds, cpu = with_node_cpu(nodes, lambda: ray_up(nodes))
    record("re-run", seconds, method="ray up", node_cpu_s=cpu)


def by_hand(nodes: Nodes, repeat: int) -> None:
    seconds, cpu = with_node_cpu(nodes, lambda: manual(nodes))
    record("cold", seconds, method="manual", workers=nodes.workers, node_cpu_s=cpu)


def floor(nodes: Nodes, repeat: int) -> None:
    seconds, cpu = with_node_cpu(nodes, lambda: manual(nodes, all_at_once=True))
    record("cold", seconds, method="floor", workers=nodes.workers, node_cpu_s=cpu)


def limit(nodes: Nodes, repeat: int) -> None:
    seconds, cpu = with_node_cpu(nodes, lambda: manual(nodes, head_alone=True))
    record("cold", seconds, method="limit", workers=0, node_cpu_s=cpu)


# The parts that start with a cold run on the full nodes: what measures each, and what its
# samples carry (a taken cold run tells --resume the repeat is done).
ON_FULL_NODES: dict[str, tuple[Callable[[Nodes, int], None], dict[str, object]]] = {
    "ours": (ours, {"method": "cluster-up", "strategy": None}),
    "mitogen": (functools.partial(ours, strategy="mitogen"), {"strategy": "mitogen"}),
    "ray up": (theirs, {"method": "ray up"}),
    "manual": (by_hand, {"method": "manual"}),
    "floor": (floor, {"method": "floor"}),
    "limit": (limit, {"method": "limit"}),
}
# The samples of the parts on nodes of their own, by what they record.
ON_OWN_NODES = {"scale": ("scale",), "light": ("light", "light no-op")}
PARTS = (*ON_FULL_NODES, *ON_OWN_NODES)


def scale(nodes: Nodes) -> None:
    """A cold run on N workers: its seconds, bytes sent, and what tells a slow run from a
    fast one (the nodes' CPU, its longest tasks)."""
    sent = nodes.bytes_sent()
    measured, cpu = with_node_cpu(nodes, lambda: cluster_up("-e", "debug_mode=legacy"))
    sent_mb = round((nodes.bytes_sent() - sent) / 2**20, 1)
    record("scale", measured.seconds, method="cluster-up", workers=nodes.workers, sent_mb=sent_mb,
           node_cpu_s=cpu, tasks=measured.tasks[:SCALE_TASKS])  # fmt: skip


def light(nodes: Nodes) -> None:
    """cluster-up's plays that install nothing (bench/light.yml) on nodes with nothing but
    systemd and sshd, cold and then again: wall time, controller CPU, bytes sent."""
    for what in ("light", "light no-op"):
        sent, cpu = nodes.bytes_sent(), controller_cpu()
        seconds = cluster_up("-e", "debug_mode=legacy", playbook="bench/light.yml").seconds
        record(
            what, seconds, method="cluster-up", nodes=len(nodes.names),
            cpu_s=round(controller_cpu() - cpu, 1),
            sent_mb=round((nodes.bytes_sent() - sent) / 2**20, 1),
        )  # fmt: skip


def part_of(row: dict) -> str:
    for part, whats in ON_OWN_NODES.items():
        if row["what"] in whats:
            return part
    return next(
        part for part, (_, carries) in ON_FULL_NODES.items() if report.matches(row, **carries)
    )


def taken(what: str, **details: object) -> int:
    """How many samples like this the results file already holds (for --resume)."""
    return sum(report.matches(row, what=what, **details) for row in report.load(SAMPLES))


def retake(parts: list[str]) -> None:
    """Drop these parts' samples, so that a resumed run measures them again (each sample names
    its own commit, so the report shows where every part was taken)."""
    kept = [row for row in report.load(SAMPLES) if part_of(row) not in parts]
    SAMPLES.write_text("".join(json.dumps(row) + "\n" for row in kept))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=int, nargs="+", default=[1, 2, 4], metavar="WORKERS")
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=PARTS,
        help="measure only these; docs/benchmarks.md is written when every part has samples",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true",
        help="keep the samples taken and take only the missing ones (after a failed run)",
    )  # fmt: skip
    parser.add_argument(
        "--retake", nargs="+", choices=PARTS, default=[],
        help="with --resume: measure these parts again, dropping their samples",
    )  # fmt: skip
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.retake and not args.resume:
        parser.error("--retake measures parts again in a run that keeps the others: add --resume")
    if not args.resume:
        SAMPLES.write_text("")
        forget_locks()
    elif args.retake:
        retake(args.retake)
    started = time.monotonic()

    full = Nodes(workers=2, verl=True)
    if not args.resume:
        if set(args.parts) & set(ON_FULL_NODES):
            on_fresh_nodes(full, warm_up)
        if "scale" in args.parts:
            on_fresh_nodes(Nodes(workers=1, verl=False), warm_up)
    for repeat in range(args.repeats):
        for part, (measure, carries) in ON_FULL_NODES.items():
            if part in args.parts and taken("cold", **carries) <= repeat:
                on_fresh_nodes(full, functools.partial(measure, repeat=repeat))
    for repeat in range(args.repeats if "scale" in args.parts else 0):
        for workers in args.scale:
            if taken("scale", method="cluster-up", workers=workers) <= repeat:
                on_fresh_nodes(Nodes(workers=workers, verl=False), scale)

    for repeat in range(args.repeats if "light" in args.parts else 0):
        for count in LIGHT_NODES:
            if taken("light", nodes=count) <= repeat:
                on_fresh_nodes(Nodes(workers=count - 1, verl=False), light)

    print(f"benchmark took {(time.monotonic() - started) / 60:.0f} min", flush=True)
    if set(args.parts) == set(PARTS):
        report.write(SAMPLES)


if __name__ == "__main__":
    main()
