"""The cluster token as every role reads it (ray_defaults' ray_auth_token_value): generated
once on the controller, then read from its file by every task of every host, without the
password lookup's lock file."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tests.local_play import run_local_play

PROJECT = Path(__file__).resolve().parents[2]


def token_seen(tmp_path: Path, ray_auth_token: str = "") -> str:
    """ray_auth_token_value as a play on the controller templates it, for a token file in
    tmp_path."""
    seen = tmp_path / "seen"
    play = {
        "vars_files": [str(PROJECT / "roles/ray_defaults/vars/main.yml")],
        "vars": {
            "ray_auth_token": ray_auth_token,
            "ray_auth_token_file": str(tmp_path / "auth_token"),
        },
        "tasks": [
            {"ansible.builtin.copy": {"content": "{{ ray_auth_token_value }}", "dest": str(seen)}}
        ],
    }
    run_local_play(tmp_path, play)
    return seen.read_text()


def test_the_first_run_generates_the_token_and_keeps_it(tmp_path: Path) -> None:
    token = token_seen(tmp_path)
    assert re.fullmatch(r"[a-z0-9]{48}", token)
    assert (tmp_path / "auth_token").read_text().strip() == token
    assert token_seen(tmp_path) == token


def test_a_kept_token_is_read_past_a_lock_file_left_behind(tmp_path: Path) -> None:
    """The password lookup takes its lock to read the file too: a run killed while holding it
    left every later run failing ("cannot get the lock in 7 seconds"), and each fork that
    found it taken slept a second."""
    token_file = tmp_path / "auth_token"
    token_file.write_text("k" * 48 + "\n")
    lock = hashlib.sha1(str(token_file).encode()).hexdigest() + ".ansible_lockfile"
    (tmp_path / lock).touch()
    assert token_seen(tmp_path) == "k" * 48


def test_a_token_given_wins_over_the_kept_one(tmp_path: Path) -> None:
    (tmp_path / "auth_token").write_text("k" * 48 + "\n")
    assert token_seen(tmp_path, ray_auth_token="v" * 40) == "v" * 40
