"""One play on this machine, as the integration tests run a module, an action or a role's
variable the way the roles do: ansible-playbook over the local connection, this venv's Python
as the node's, under run_bounded's time limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.bounded import run_bounded

PROJECT = Path(__file__).resolve().parents[1]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def run_local_play(
    folder: Path, play: dict, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `play` on localhost, without gathering facts unless it says so, from a playbook
    written to `folder`; fail with the end of its output unless it passed."""
    playbook = folder / "play.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, **play}]))
    done = run_bounded(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", *options, str(playbook)],
        timeout=120, cwd=PROJECT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done
