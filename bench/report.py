"""docs/benchmarks.md and docs/benchmarks.png from the samples of one `make bench` run,
docs/benchmarks.jsonl: the page is a function of the samples alone (a unit test renders it
again from them), so every figure in it can be traced to the samples it came from."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
DOC = PROJECT / "docs/benchmarks.md"
SAMPLES = PROJECT / "docs/benchmarks.jsonl"
PLOT = PROJECT / "docs/benchmarks.png"


@dataclass(frozen=True)
class Stat:
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def cell(self) -> str:
        low, high = min(self.samples), max(self.samples)
        return f"{self.median:.0f} s ({low:.0f}-{high:.0f}, n={len(self.samples)})"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stat(rows: list[dict], **match: object) -> Stat:
    samples = [row["seconds"] for row in rows if matches(row, **match)]
    if not samples:
        raise ValueError(f"no samples for {match}")
    return Stat(samples)


def measured(rows: list[dict], key: str, **match: object) -> Stat:
    """Another measure than seconds (`sent_mb`, `cpu_s`) of the samples that match."""
    return Stat([row[key] for row in rows if matches(row, **match)])


def slope(values: dict[int, Stat]) -> float:
    """What each unit more adds, from the medians at the smallest and the largest count."""
    low, high = min(values), max(values)
    return (values[high].median - values[low].median) / (high - low)


def where_the_time_goes(rows: list[dict]) -> list[str]:
    """The first repeat's cold run, no-op and switch, task by task (profile_tasks)."""
    profiles = {row["of"]: row for row in rows if row["what"] == "profile"}
    lines = [
        "## Where the time goes: the first repeat's runs, task by task",
        "",
        "Each task's wall time for all nodes together (`ansible.posix.profile_tasks`). A task",
        "that reaches the nodes costs 0.25 s or more here; most shorter ones run on the",
        "controller alone (asserts, facts, validation).",
        "",
        "| run | tasks of 0.25 s or more | shorter tasks |",
        "|---|---|---|",
    ]
    for of, row in profiles.items():
        long = [seconds for _, seconds in row["tasks"] if seconds >= 0.25]
        short = [seconds for _, seconds in row["tasks"] if seconds < 0.25]
        lines.append(
            f"| {of} ({row['seconds']:.0f} s) | {len(long)} tasks, {sum(long):.0f} s "
            f"| {len(short)} tasks, {sum(short):.1f} s |"
        )
    for of, row in profiles.items():
        lines += ["", f"The longest tasks of the {of}:", "", "| task | s |", "|---|---|"]
        lines += [f"| {name} | {seconds:.1f} |" for name, seconds in row["tasks"][:8]]
    return [*lines, ""]


def scale_runs(rows: list[dict]) -> list[str]:
    """Each scale run with its nodes' CPU and longest tasks: what a slow sample spent its
    time on (older samples keep neither)."""
    runs = sorted((row for row in rows if row["what"] == "scale" and "tasks" in row),
                  key=lambda row: (row["workers"], row["at"]))  # fmt: skip
    if not runs:
        return []
    lines = [
        "Each run: the CPU seconds all nodes' containers spent, and its three longest tasks",
        "(wall time for all nodes together):",
        "",
        "| workers | run | nodes' CPU | longest tasks |",
        "|---|---|---|---|",
    ]
    for row in runs:
        longest = ", ".join(
            f"{name.rpartition(' : ')[2]} {seconds:.1f} s" for name, seconds in row["tasks"][:3]
        )
        cpu = sum(row["node_cpu_s"].values())
        lines.append(f"| {row['workers']} | {row['seconds']:.0f} s | {cpu:.0f} s | {longest} |")
    return [*lines, ""]


def node_cpu(rows: list[dict], **match: object) -> str:
    """The median of the CPU seconds all nodes' containers spent in the matching runs."""
    totals = [sum(row["node_cpu_s"].values()) for row in rows
              if "node_cpu_s" in row and matches(row, **match)]  # fmt: skip
    return f"{statistics.median(totals):.0f} s" if totals else ""


def header(rows: list[dict]) -> list[str]:
    """When, on what and where the samples were taken: read from the samples themselves."""
    times = sorted(row["at"] for row in rows)
    span = datetime.fromisoformat(times[-1]) - datetime.fromisoformat(times[0])
    machines = list(dict.fromkeys(row["machine"] for row in rows))
    repeats = stat(rows, what="cold", method="cluster-up", strategy=None).samples
    return [
        f"- Samples: {len(rows)}, taken {times[0]} to {times[-1]} UTC"
        f" ({span.total_seconds() / 60:.0f} min), {len(repeats)} repeats of cluster-up's cold run",
        provenance(rows),
        *(f"- Machine: {machine}" for machine in machines),
    ]


def provenance(rows: list[dict]) -> str:
    """The commit the samples were taken on; where parts were retaken on another commit
    (`bench.run --resume --retake`), which parts each commit measured."""
    parts: dict[str, set[str]] = {}
    for row in rows:
        kind = row["what"] if row["what"].startswith(("scale", "light")) else (
            row.get("strategy") or row["method"]
        )  # fmt: skip
        parts.setdefault(row["commit"], set()).add(kind.removesuffix(" no-op"))
    if len(parts) == 1:
        return f"- Commit: {next(iter(parts))}"
    return "- Commits: " + "; ".join(
        f"{commit} ({', '.join(sorted(kinds))})" for commit, kinds in parts.items()
    )


def matches(row: dict, **match: object) -> bool:
    return all(row.get(key) == value for key, value in match.items())


def within(actual: float, limit: float, unit: str) -> str:
    """Whether actual is at most limit, with actual in unit."""
    return f"{'met' if actual <= limit else '**not met**'} ({actual:.2f} {unit})"


def verdict(value: Stat, base: Stat, factor: float) -> str:
    """Whether value's median is within factor x base's, with the actual factor."""
    return within(value.median / base.median, factor, "x")


def noop_verdict(noop: Stat, cold: Stat, changes: list[int]) -> str:
    """A no-op meets its target only fast and changing nothing in every sample."""
    if changes != [0]:
        return f"**not met** (tasks changed: {changes})"
    return verdict(noop, cold, 0.1)


def mitogen_table(rows: list[dict], linear: dict[str, Stat], mitogen: dict[str, Stat]) -> list[str]:
    """Mitogen against the default strategy, compared only where both ran on one commit."""
    commits = {
        strategy: {row["commit"] for row in rows if row["what"] == "cold"
                   and row["method"] == "cluster-up"
                   and row.get("strategy") == strategy}
        for strategy in (None, "mitogen")
    }  # fmt: skip
    same = commits[None] == commits["mitogen"]
    note = [] if same else [
        f"Not compared: the Mitogen runs are of {', '.join(sorted(commits['mitogen']))}, the "
        f"default's of {', '.join(sorted(commits[None]))} (a part retaken alone).",
        "",
    ]  # fmt: skip
    return [
        *note,
        "| measurement | linear (default) | Mitogen | Mitogen / linear |",
        "|---|---|---|---|",
        *(
            f"| {what} | {linear[what].cell()} | {mitogen[what].cell()} "
            f"| {f'{mitogen[what].median / linear[what].median:.2f}' if same else '-'} |"
            for what in linear
        ),
    ]


def plot(rows: list[dict], path: Path) -> None:
    # Only `make bench` installs matplotlib; rendering the page again needs none.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted({row["workers"] for row in rows if row["what"] == "scale"})
    stats = [stat(rows, what="scale", workers=count) for count in counts]
    medians = [s.median for s in stats]
    low = [s.median - min(s.samples) for s in stats]
    high = [max(s.samples) - s.median for s in stats]
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.errorbar(counts, medians, yerr=[low, high], marker="o", capsize=4, label="cluster-up.yml")
    axes.set_xlabel("workers (plus one head)")
    axes.set_ylabel("cold cluster-up, seconds (median, min-max)")
    axes.set_xticks(counts)
    axes.set_ylim(bottom=0)
    axes.set_title("Ray + debugpy, bare nodes to debug-ready")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


# Cluster sizes beyond the bench's, projected from the light runs' slopes.
PROJECTED_NODES = (50, 256)
CONTROLLER_CORES = (4, 16)
# Issue 31's targets for the controller's CPU seconds per light node beyond the first.
CPU_PER_NODE = {"first run": 1.0, "again": 0.3}


def light_nodes(rows: list[dict], ray_one_worker_mb: float, ray_per_worker_mb: float) -> list[str]:
    """What the controller pays per node (bench/light.yml on light nodes), and what that
    comes to for clusters larger than this machine holds: arithmetic, labelled as such."""
    sizes = sorted({row["nodes"] for row in rows if row["what"] == "light"})
    runs = {"first run": "light", "again": "light no-op"}
    wall = {run: {n: stat(rows, what=what, nodes=n) for n in sizes} for run, what in runs.items()}
    cpu = {
        run: {n: measured(rows, "cpu_s", what=what, nodes=n) for n in sizes}
        for run, what in runs.items()
    }
    sent = {
        run: {n: measured(rows, "sent_mb", what=what, nodes=n) for n in sizes}
        for run, what in runs.items()
    }

    cpu_verdict = {run: within(slope(cpu[run]), CPU_PER_NODE[run], "s") for run in runs}

    def projected(values: dict[int, Stat], nodes: int) -> float:
        return values[sizes[0]].median + (nodes - sizes[0]) * slope(values)

    lines = [
        "## Scale without Ray: light nodes, systemd and sshd only",
        "",
        "cluster-up's plays that install nothing (`bench/light.yml`: validation, facts, the",
        "firewall, Ray's units and token), from bare nodes and then again. Controller CPU:",
        "user and system seconds of `ansible-playbook` and its forks.",
        "",
        "| nodes | wall, first run | wall, again | controller CPU, first run "
        "| controller CPU, again | MB sent, first run | MB sent, again |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {n} | {wall['first run'][n].cell()} | {wall['again'][n].cell()} "
            f"| {cpu['first run'][n].median:.1f} s | {cpu['again'][n].median:.1f} s "
            f"| {sent['first run'][n].median:.1f} | {sent['again'][n].median:.1f} |"
            for n in sizes
        ),
        "",
        *(
            f"Each node beyond the first adds, {run}: {slope(wall[run]):.2f} s of wall time, "
            f"{slope(cpu[run]):.2f} s of controller CPU and {slope(sent[run]):.2f} MB sent."
            for run in runs
        ),
        "",
        "Target (issue 31): each node beyond the first costs the controller at most"
        f" {CPU_PER_NODE['first run']} s of CPU on a first run, {cpu_verdict['first run']},"
        f" and at most {CPU_PER_NODE['again']} s again, {cpu_verdict['again']}.",
        "",
        "[scale.md](scale.md) reads these figures.",
        "",
        "Projected, not measured: the medians at the smallest light size plus the slopes",
        "above; the least wall time is the controller CPU spread over all its cores; a cold",
        f"cluster-up with Ray sends the 1-worker run's {ray_one_worker_mb:.0f} MB plus"
        f" {ray_per_worker_mb:.0f} MB per further worker.",
        "",
        "| nodes | controller CPU, first run | controller CPU, again "
        + "".join(f"| least wall, {cores} cores " for cores in CONTROLLER_CORES)
        + "| MB sent, first run | MB sent, again | MB sent, cold cluster-up with Ray |",
        "|---|---|---|" + "---|" * len(CONTROLLER_CORES) + "---|---|---|",
        *(
            f"| {n} | {projected(cpu['first run'], n):.0f} s | {projected(cpu['again'], n):.0f} s "
            + "".join(f"| {projected(cpu['first run'], n) / c:.0f} s " for c in CONTROLLER_CORES)
            + f"| {projected(sent['first run'], n):.0f} | {projected(sent['again'], n):.0f} "
            f"| {ray_one_worker_mb + (n - 2) * ray_per_worker_mb:.0f} |"
            for n in PROJECTED_NODES
        ),
        "",
    ]
    return lines


def render(rows: list[dict]) -> str:
    ours = stat(rows, what="cold", method="cluster-up", strategy=None)
    ray_up = stat(rows, what="cold", method="ray up")
    manual = stat(rows, what="cold", method="manual")
    limit = stat(rows, what="cold", method="limit")
    floor = stat(rows, what="cold", method="floor")
    noop = stat(rows, what="no-op", without=None, strategy=None)
    switch = stat(rows, what="mode switch", strategy=None)
    mitogen = {
        what: stat(rows, what=what, strategy="mitogen") for what in ("cold", "no-op", "mode switch")
    }
    add = stat(rows, what="add a worker")
    rerun = stat(rows, what="re-run", method="ray up")
    counts = sorted({row["workers"] for row in rows if row["what"] == "scale"})
    scale = {count: stat(rows, what="scale", workers=count) for count in counts}
    sent = {count: measured(rows, "sent_mb", what="scale", workers=count) for count in counts}
    per_worker = Stat([slope(sent)])
    one = scale[counts[0]]
    levers = sorted({row["without"] for row in rows if row.get("without")})
    noop_changes = sorted({row["changed"] for row in rows if row["what"] == "no-op"})

    def ratio(value: Stat) -> str:
        return f"{value.median / ray_up.median:.2f}"

    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`bench/`) from the samples of one run,",
        "[benchmarks.jsonl](benchmarks.jsonl), committed beside this page: each sample names",
        "the commit, machine and minute it was taken on, and `python -m bench.report` writes",
        "this page from them again. Timings live here, never in tests.",
        "",
        *header(rows),
        "- Nodes: systemd containers of the sandbox image on one Docker network, reached over",
        "  SSH by every method (ControlPersist and pipelining for Ansible, per `ansible.cfg`).",
        "  All nodes share the machine's CPUs.",
        "- Installed: Ray 2.60.0 + debugpy + verl 0.9.1 (CPU torch) from the same lock and the",
        "  same warm wheelhouse archive: cluster-up sends it to the head, which serves the",
        "  workers; `ray up` and the manual sequence copy it to every node. All three install",
        "  with uv (`uv pip sync`); `ray up` and the manual sequence take uv out of the",
        "  wheelhouse's own wheel and make the venv with it. They start Ray in legacy debug",
        "  mode; cluster-up's cold runs alternate legacy and post_mortem, and each is followed",
        "  by a switch to the other mode. Every method writes bytecode on first import: the",
        "  others run Ray as root, in the venv; cluster-up's Ray, whose user may not write to",
        "  the root-owned venv, in its home (`PYTHONPYCACHEPREFIX`).",
        "- cluster-up's lock is kept as its archive is: a timed run starts where the controller",
        "  of a cluster whose nodes were made anew starts, holding both. Samples taken before",
        "  2026-12-07 15:00 UTC come from runs that resolved the lock again in every timed cold",
        "  run (about 3 s).",
        "- The floor: the manual sequence on every node at once, one SSH session per node that",
        "  streams the archive in, installs with uv and starts Ray: what the cluster costs",
        "  with no orchestration at all. The limit: the same on the head alone, one node.",
        "- Nodes' CPU: the CPU seconds all nodes' containers spent during the run (their",
        "  cgroups' accounts), beside the wall time; the controller's are not in it.",
        "- Every time runs from bare, booted nodes (or, for re-runs, from the cluster the",
        "  previous step left) until every node is ALIVE in the head's state API; for",
        "  cluster-up that is the end of the play, which waits for it. Before each cold run",
        "  the disk is synced and the page cache dropped: the last cluster's removal costs",
        "  the next one's file creation nothing (docs/performance.md).",
        "- cluster-up also installs and loads the nftables table, the systemd units, token auth",
        "  and the runbook; `ray up` and the manual sequence do none of that.",
        "",
        "## 1 head + 2 workers",
        "",
        "| measurement | median (min-max, n) | nodes' CPU | / `ray up` cold | target | |",
        "|---|---|---|---|---|---|",
        f"| `cluster-up.yml`, bare nodes to debug-ready | {ours.cell()} "
        f"| {node_cpu(rows, what='cold', method='cluster-up', strategy=None)} | {ratio(ours)} "
        f"| <= 1.0 x `ray up` | {verdict(ours, ray_up, 1.0)} |",
        f"| `ray up` (local provider, `bench/ray-up.yaml`) | {ray_up.cell()} "
        f"| {node_cpu(rows, what='cold', method='ray up')} | 1.00 | | |",
        f"| manual sequence over SSH, node by node (`bench/manual.sh`) | {manual.cell()} "
        f"| {node_cpu(rows, what='cold', method='manual')} | {ratio(manual)} | | |",
        f"| the floor: the manual sequence on every node at once | {floor.cell()} "
        f"| {node_cpu(rows, what='cold', method='floor')} | {ratio(floor)} "
        f"| cluster-up cold <= 1.3 x this | {verdict(ours, floor, 1.3)} |",
        f"| the limit: the manual sequence on the head alone | {limit.cell()} "
        f"| {node_cpu(rows, what='cold', method='limit')} | {ratio(limit)} | | |",
        f"| no-op re-run of `cluster-up.yml` (tasks changed: {noop_changes}) | {noop.cell()} "
        f"| {node_cpu(rows, what='no-op', without=None, strategy=None)} | {ratio(noop)} "
        f"| <= 0.1 x cold, changing nothing | {noop_verdict(noop, ours, noop_changes)} |",
        f"| re-run of `ray up` (re-runs setup, restarts Ray) | {rerun.cell()} "
        f"| {node_cpu(rows, what='re-run', method='ray up')} | {ratio(rerun)} | | |",
        f"| mode switch legacy <-> post_mortem | {switch.cell()} "
        f"| {node_cpu(rows, what='mode switch', strategy=None)} | {ratio(switch)} "
        f"| <= 0.25 x cold | {verdict(switch, ours, 0.25)} |",
        f"| add one worker to a running cluster | {add.cell()} | | {ratio(add)} | | |",
        "",
        "## Levers: the no-op re-run with one of them turned off",
        "",
        "| turned off | median (min-max, n) | / with it |",
        "|---|---|---|",
        *(
            f"| {lever} | {stat(rows, what='no-op', without=lever).cell()} "
            f"| {stat(rows, what='no-op', without=lever).median / noop.median:.2f} |"
            for lever in levers
        ),
        "",
        *where_the_time_goes(rows),
        "## Strategy: Mitogen for Ansible (`mitogen_linear`), the same nodes and sequence",
        "",
        "Not the default: [performance.md](performance.md) says why and how to turn it on.",
        "",
        *mitogen_table(rows, {"cold": ours, "no-op": noop, "mode switch": switch}, mitogen),
        "",
        "## Scale: Ray + debugpy, 1 head + N workers, cold",
        "",
        "MB from the controller: what it sent into the nodes' network during the run (the",
        "bridge's transmit counter; traffic between nodes does not cross it).",
        "",
        "| workers | median (min-max, n) | / 1 worker | MB from the controller (median) |",
        "|---|---|---|---|",
        *(
            f"| {count} | {scale[count].cell()} | {scale[count].median / one.median:.2f} "
            f"| {sent[count].median:.0f} |"
            for count in counts
        ),
        "",
        f"Target: {counts[-1]} workers <= 1.3 x 1 worker: {verdict(scale[counts[-1]], one, 1.3)}.",
        "",
        *scale_runs(rows),
        "Target: bytes from the controller independent of the worker count, the archive sent",
        "once: each worker beyond the first adds at most 0.1 x the 1-worker run's bytes (what",
        "remains per node is Ansible's own module traffic):",
        f"{verdict(per_worker, sent[counts[0]], 0.1)}, {per_worker.median:.0f} MB per worker.",
        "",
        "![cold cluster-up time against worker count](benchmarks.png)",
        "",
        *light_nodes(rows, sent[counts[0]].median, per_worker.median),
    ]
    return "\n".join(lines)


def write(samples: Path) -> None:
    rows = load(samples)
    DOC.write_text(render(rows))
    plot(rows, PLOT)
    print(f"wrote {DOC} and {PLOT}")


if __name__ == "__main__":
    write(SAMPLES)
