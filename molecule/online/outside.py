"""Bring the scenario's cluster up the way README.md tells a collection user to: its commands,
by their text, in an empty directory outside the checkout, with only the installed collection
and the nodes' inventory; no ansible.cfg, roles path or variable of this checkout or of
molecule's own run reaches it. The scenario's converge (and its idempotence re-run) calls this:

    outside.py DIRECTORY INVENTORY_DIRECTORY

Prints the run's output and exits with its status."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "tests"))
from doc_commands import commands, derived, ran  # noqa: E402

SECTION = "### Or as an Ansible collection"


def readme_section() -> str:
    readme = (PROJECT / "README.md").read_text()
    return readme.split(SECTION, 1)[1].split("\n#", 1)[0]


def site_playbook(section: str) -> str:
    """The README's `site.yml`: the section's one YAML block."""
    [playbook] = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    return playbook


def up_from_outside(directory: Path, inventory: Path) -> int:
    section = readme_section()
    # Empty every time: the idempotence re-run installs the collection afresh too.
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "site.yml").write_text("---\n" + site_playbook(section))
    # The reader's own paths: the checkout, and the inventory of their nodes.
    lines = [
        derived(
            command,
            command.replace("/path/to/ray-cluster", str(PROJECT)).replace(
                "inventory/mycluster/hosts.yml", str(inventory)
            ),
        )
        for command in commands(section)
    ]
    for line in lines:
        ran(line)
    script = "\n".join(lines)
    # An operator's shell on this machine (its CA settings included) without any of Ansible's
    # or molecule's variables; ~/.ansible/collections, where the collection installs, is
    # empty and inside the directory; Python and the tools are the controller's.
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANSIBLE_", "MOLECULE_"))
    }
    env.update(HOME=str(directory), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        # A hung run fails the converge with its output instead of holding the scenario.
        timeout=1200,
    )
    print(run.stdout)
    return run.returncode


if __name__ == "__main__":
    sys.exit(up_from_outside(Path(sys.argv[1]), Path(sys.argv[2])))
