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
FIGURE = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? ?(?:s|x|MB|GB|KB|min)\b")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
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


def unbacked_figures(text: str, stated: set[str]) -> list[str]:
    """The figures of text, outside sections marked as not from the samples, that the
    report does not state."""
    missing = []
    for heading, body in sections(text):
        if NOT_FROM_THE_SAMPLES in heading:
            continue
        for match in FIGURE.finditer(body):
            numbers = [number for number in match.groups() if number]
            if any(number not in stated for number in numbers):
                missing.append(f"{heading or '(top)'}: {match.group(0)!r}")
    return missing


def stated_numbers() -> set[str]:
    return set(NUMBER.findall(rendered()))


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
    missing = unbacked_figures((PROJECT / page).read_text(), stated_numbers())
    assert not missing, (
        f"{page} quotes figures the report of docs/benchmarks.jsonl does not state (quote the"
        f" new run, or put them under a heading that says '{NOT_FROM_THE_SAMPLES}'): {missing}"
    )


def test_a_figure_changed_by_hand_is_caught() -> None:
    """The check above on a page whose quoted cold run was edited, and on the same figure
    under a heading that says where it is from."""
    stated = stated_numbers()
    assert unbacked_figures("## Cold\n\ncluster-up took 999.5 s.\n", stated)
    assert not unbacked_figures(f"## Cold ({NOT_FROM_THE_SAMPLES})\n\n999.5 s\n", stated)


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
