"""The bench's figures trace back to its committed samples (docs/benchmarks.jsonl):
benchmarks.md is rendered from them alone, and every figure that performance.md, scale.md
and the README quote from a run is one the report of those samples states. A section that
quotes something else (an earlier run, a measurement by hand) says so in its heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import report

PROJECT = Path(__file__).resolve().parents[2]
DOCS = PROJECT / "docs"
# A figure with its unit: "115 s", "1.81 x", "150 MB", "74-83 s", "58 min", "2.4 GB".
FIGURE = re.compile(
    r"(?<![\w.-])(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? ?(?P<unit>s|x|MB|GB|KB|min)\b"
)
NUMBER = r"\d+(?:\.\d+)?"
# A median's spread in a cell of the report, "65 s (62-66, n=3)": in the median's unit.
SPREAD = re.compile(rf"\(({NUMBER})-({NUMBER}), n=\d+\)")
# A column of bare numbers names their unit in its header: "| task | s |", "MB sent, again",
# "/ 1 worker" (a ratio).
COLUMN_UNIT = re.compile(r"^(?P<unit>s|MB)$|^(?P<mb>MB) | / |^/ ")
NOT_FROM_THE_SAMPLES = "not from the samples"
VERDICT = re.compile(r"\bmet\*{0,2} \((\d+\.\d\d) [xs]\)")


def samples() -> list[dict]:
    return report.load(report.SAMPLES)


def rendered() -> str:
    return report.render(samples())


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for each section of a markdown page, the text above the first heading
    under the page's title."""
    parts = re.split(r"^(#{1,3} .*)$", text, flags=re.MULTILINE)
    return list(zip(["", *parts[1::2]], parts[0::2], strict=True))


Figure = tuple[str, str]


def figures(text: str) -> set[Figure]:
    """(number, unit) for each figure of a text, both ends of a range."""
    return {
        (number, match["unit"])
        for match in FIGURE.finditer(text)
        for number in match.groups()[:2]
        if number
    }


def column_unit(header: str) -> str | None:
    match = COLUMN_UNIT.search(header)
    if not match:
        return None
    return match["unit"] or match["mb"] or "x"


def cell_figures(cell: str, unit: str | None) -> set[Figure]:
    """A table cell's figures: those it writes with their unit, its median's spread in the
    median's unit, and a bare number in its column's unit."""
    stated = figures(cell)
    if stated and (spread := SPREAD.search(cell)):
        median_unit = next(FIGURE.finditer(cell))["unit"]
        stated |= {(number, median_unit) for number in spread.groups()}
    if unit and re.fullmatch(NUMBER, cell):
        stated.add((cell, unit))
    return stated


def cells(line: str) -> list[str]:
    """The cells of a markdown table row."""
    return [cell.strip() for cell in line.strip("|").split("|")]


def report_figures(report_text: str) -> set[Figure]:
    """Every (number, unit) a report states, in its prose and in its tables' cells."""
    stated: set[Figure] = set()
    units: list[str | None] = []
    for line in report_text.splitlines():
        if not line.startswith("|"):
            stated |= figures(line)
            units = []
        elif not units:
            units = [column_unit(header) for header in cells(line)]
        else:
            for cell, unit in zip(cells(line), units, strict=False):
                stated |= cell_figures(cell, unit)
    return stated


def unbacked_figures(text: str, stated: set[Figure]) -> list[str]:
    """The figures of text, outside sections marked as not from the samples, that the
    report does not state with the same unit."""
    missing = []
    for heading, body in sections(text):
        if NOT_FROM_THE_SAMPLES in heading:
            continue
        for match in FIGURE.finditer(body):
            if not figures(match.group(0)) <= stated:
                missing.append(f"{heading or '(top)'}: {match.group(0)!r}")
    return missing


def stated_figures() -> set[Figure]:
    return report_figures(rendered())


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of the table whose header row starts with header_start."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return rows


def test_every_sample_names_its_commit_machine_and_minute() -> None:
    rows = samples()
    assert rows, f"{report.SAMPLES} holds no samples"
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{7,40}(\+changes)?", row["commit"]), row
        assert re.fullmatch(r"\d+ CPUs \(.+\), \d+ GiB memory, .+", row["machine"]), row
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row["at"]), row


def test_benchmarks_md_is_the_report_of_its_samples() -> None:
    """A figure changed by hand in benchmarks.md, or samples changed without the page, fail."""
    assert (DOCS / "benchmarks.md").read_text() == rendered(), (
        "docs/benchmarks.md is not what `python -m bench.report` writes from docs/benchmarks.jsonl"
    )


@pytest.mark.parametrize("page", ["docs/performance.md", "docs/scale.md", "README.md"])
def test_quoted_figures_are_stated_by_the_samples_report(page: str) -> None:
    missing = unbacked_figures((PROJECT / page).read_text(), stated_figures())
    assert not missing, (
        f"{page} quotes figures the report of docs/benchmarks.jsonl does not state (quote the"
        f" new run, or put them under a heading that says '{NOT_FROM_THE_SAMPLES}'): {missing}"
    )


def test_a_figure_changed_by_hand_is_caught() -> None:
    """The check above on a page whose quoted cold run was edited, and on the same figure
    under a heading that says where it is from."""
    stated = stated_figures()
    assert unbacked_figures("## Cold\n\ncluster-up took 999.5 s.\n", stated)
    assert not unbacked_figures(f"## Cold ({NOT_FROM_THE_SAMPLES})\n\n999.5 s\n", stated)


def test_a_figure_is_backed_only_with_its_unit() -> None:
    """A number the report states in another unit, or as a count, backs no figure: "3 MB"
    passed when the report's only 3 was "n=3"."""
    stated = report_figures(
        "| run | median (min-max, n) | / 1 worker | task | s | MB sent, again |\n"
        "|---|---|---|---|---|---|\n"
        "| 2 | 54 s (51-69, n=3) | 1.47 | Sync 15.4 s | 0.4 | 5 |\n"
    )
    assert stated == {
        ("54", "s"), ("51", "s"), ("69", "s"), ("1.47", "x"), ("15.4", "s"), ("0.4", "s"),
        ("5", "MB"),
    }  # fmt: skip
    assert unbacked_figures("3 MB, 2 s, 1.47 s, 5 s", stated) == [
        "(top): '3 MB'", "(top): '2 s'", "(top): '1.47 s'", "(top): '5 s'",
    ]  # fmt: skip
    assert not unbacked_figures("51-69 s, 1.47 x, 0.4 s, 5 MB", stated)


def test_performance_md_judges_by_the_run_of_the_samples() -> None:
    """The ratio column of performance.md is the report's target verdicts, in order."""
    verdicts = VERDICT.findall(rendered())
    rows = table_rows((DOCS / "performance.md").read_text(), "| ratio |")
    assert [row[1].split()[0] for row in rows] == verdicts


@pytest.mark.parametrize("header", ["| nodes | wall, first run |", "| nodes | controller CPU,"])
def test_scale_md_copies_the_light_runs_and_their_projection(header: str) -> None:
    scale = (DOCS / "scale.md").read_text()
    assert table_rows(scale, header) == table_rows(rendered(), header)


def test_readme_states_the_repeats_and_span_of_the_samples() -> None:
    header = re.search(r"\((\d+) min\), (\d+) repeats", rendered())
    assert header
    minutes, repeats = header.groups()
    readme = " ".join((PROJECT / "README.md").read_text().split())
    assert f"came from {repeats} repeats whose samples span {minutes} minutes" in readme


def test_the_header_names_what_each_commit_measured() -> None:
    """A part retaken on a later commit (`bench.run --resume --retake`) is named with its
    commit in the header, beside the parts kept from the earlier one."""
    earlier = [dict(row, commit="aaaaaaa") for row in samples()]
    assert report.provenance(earlier) == "- Commit: aaaaaaa"
    retaken = [dict(row, commit="bbbbbbb") if row.get("method") == "ray up" else row
               for row in earlier]  # fmt: skip
    kept, again = report.provenance(retaken).removeprefix("- Commits: ").split("; ")
    assert again == "bbbbbbb (ray up)"
    assert kept.startswith("aaaaaaa (") and "ray up" not in kept and "scale" in kept
