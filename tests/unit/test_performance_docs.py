"""performance.md and scale.md quote docs/benchmarks.md by hand: a `make bench` that rewrites
benchmarks.md without them fails here until they read the new run."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
VERDICT = re.compile(r"\bmet\*{0,2} \((\d+\.\d\d) x\)")


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of the table whose header row starts with header_start."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_performance_md_quotes_the_run_of_benchmarks_md() -> None:
    """The ratio column of performance.md's newest run is the target verdicts, in order."""
    verdicts = VERDICT.findall((DOCS / "benchmarks.md").read_text())
    rows = table_rows((DOCS / "performance.md").read_text(), "| ratio |")
    newest = [row[-2].split()[0] for row in rows]
    assert newest == verdicts, (
        f"performance.md's newest column says {newest}, benchmarks.md's targets {verdicts}"
    )


def test_scale_md_quotes_the_light_runs_of_benchmarks_md() -> None:
    benchmarks = (DOCS / "benchmarks.md").read_text()
    measured = {
        row[0]: (row[1].split(" (")[0], row[2].split(" (")[0], row[3], row[4])
        for row in table_rows(benchmarks, "| nodes | first run |")
    }
    scale = (DOCS / "scale.md").read_text()
    quoted = {
        row[0]: (row[1], row[2], row[3], row[5])
        for row in table_rows(scale, "| nodes | wall, first run |")
    }
    assert quoted == measured
    slopes = re.search(
        r"adds ([\d.]+) s of wall time, ([\d.]+) s of controller CPU\s+and ([\d.]+) MB", benchmarks
    )
    assert slopes, "benchmarks.md no longer states what each node adds"
    wall, cpu, sent = slopes.groups()
    per_node = re.search(
        r"first run: ([\d.]+) s of controller CPU, ([\d.]+) MB sent,\s+([\d.]+) s", scale
    )
    assert per_node, "scale.md no longer states what each node adds"
    assert per_node.groups() == (cpu, sent, f"{float(wall):.1f}")
