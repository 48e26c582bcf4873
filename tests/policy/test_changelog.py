"""Every change to what the collection ships comes with a changelog fragment, the version has
one home, and CHANGELOG.md is what antsibull-changelog generates from the releases."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[2]
FRAGMENTS = "changelogs/fragments/"
# What a change of behaviour touches: the collection's content.
SHIPPED = ("roles/", "plugins/", "playbooks/", "meta/", "galaxy.yml")


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=PROJECT, capture_output=True, text=True, check=True
    ).stdout


def commits_since_release() -> list[str]:
    """The commits after the one that last released (wrote changelogs/changelog.yaml). Not
    merges: each commit a merge brings is checked on its own."""
    release = git("log", "-1", "--format=%H", "--", "changelogs/changelog.yaml").strip()
    if not release:
        # A shallow clone without the release commit: what it holds, HEAD at least.
        return git("rev-list", "--no-merges", "HEAD").split()
    return git("rev-list", "--no-merges", f"{release}..HEAD").split()


def without_fragment(commit: str) -> list[str]:
    """The shipped paths `commit` changes, when it adds no fragment and updates none (a fix to
    a change not yet released may correct that change's own fragment)."""
    changes = [
        line.split("\t") for line in git("show", "--name-status", "--format=", commit).splitlines()
    ]
    paths = [change[-1] for change in changes]
    if any(change[0] in ("A", "M") and change[-1].startswith(FRAGMENTS) for change in changes):
        return []
    return [path for path in paths if path.startswith(SHIPPED)]


def test_every_change_since_the_release_adds_a_fragment() -> None:
    missing = {
        git("log", "-1", "--format=%h %s", commit)[:80]: paths
        for commit in commits_since_release()
        if (paths := without_fragment(commit))
    }
    assert missing == {}, f"add a fragment under {FRAGMENTS} (see changelogs/config.yaml)"


def test_the_version_has_one_home() -> None:
    galaxy = yaml.safe_load((PROJECT / "galaxy.yml").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", galaxy["version"])
    assert 'dynamic = ["version"]' in (PROJECT / "pyproject.toml").read_text()
    metadata = subprocess.run(
        [sys.executable, "setup.py", "--version"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert metadata.stdout.strip().splitlines()[-1] == galaxy["version"]


def test_changelog_is_generated_and_names_the_version(tmp_path: Path) -> None:
    """CHANGELOG.md is antsibull-changelog's rendering of changelogs/changelog.yaml (the
    releases), which names the version galaxy.yml has; the pending fragments lint clean."""
    antsibull = str(Path(sys.executable).parent / "antsibull-changelog")
    subprocess.run([antsibull, "lint"], cwd=PROJECT, check=True)
    shutil.copy(PROJECT / "galaxy.yml", tmp_path)
    shutil.copytree(PROJECT / "changelogs", tmp_path / "changelogs")
    subprocess.run([antsibull, "generate"], cwd=tmp_path, check=True)
    assert (PROJECT / "CHANGELOG.md").read_text() == (tmp_path / "CHANGELOG.md").read_text(), (
        "run `antsibull-changelog generate` and commit CHANGELOG.md"
    )
    version = yaml.safe_load((PROJECT / "galaxy.yml").read_text())["version"]
    releases = yaml.safe_load((PROJECT / "changelogs/changelog.yaml").read_text())["releases"]
    assert version in releases
