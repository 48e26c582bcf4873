"""The node_upload action (plugins/action/node_upload.py) in a real ansible-playbook run, over
the local connection: a file is sent where the node lacks one of its name and size, and only
there; --check sends nothing; a bad mode or a missing source is named."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.local_play import run_local_play

PROJECT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def test_a_file_is_sent_where_missing_or_of_another_size_and_nowhere_else(
    tmp_path: Path,
) -> None:
    src, dest, unsent = tmp_path / "7a9e.tar", tmp_path / "node/7a9e.tar", tmp_path / "node/x.tar"
    src.write_bytes(os.urandom(3 << 20))
    dest.parent.mkdir()
    upload = {"src": str(src), "dest": str(dest), "mode": "0640"}
    steps = [
        ("first", upload, {}),
        ("again", upload, {}),
        ("checked", {**upload, "dest": str(unsent)}, {"check_mode": True}),
        ("cut_short", upload, {}),
        ("bad_mode", {**upload, "mode": "rw-r--r--"}, {}),
        ("no_src", {**upload, "src": str(tmp_path / "gone.tar")}, {}),
    ]
    tasks: list[dict] = []
    for name, args, extra in steps:
        if name == "cut_short":
            # As a transfer another tool left unfinished: the name, another size.
            tasks.append({"ansible.builtin.shell": f"truncate -s 1000 {dest}"})
        tasks.append(
            {
                "name": name,
                "verl_debug.cluster.node_upload": args,
                "register": name,
                "ignore_errors": True,
                **extra,
            }
        )
    names = [name for name, _, _ in steps]
    tasks.append(
        {
            "ansible.builtin.copy": {
                "content": "{{ dict(names | zip(query('vars', *names))) | to_json }}",
                "dest": str(tmp_path / "results.json"),
            },
            "vars": {"names": names},
        }
    )
    run_local_play(tmp_path, {"tasks": tasks})
    results = json.loads((tmp_path / "results.json").read_text())

    assert results["first"]["changed"] and results["first"]["size"] == 3 << 20
    assert not results["again"]["changed"]
    assert results["checked"]["changed"] and not unsent.exists()
    assert results["cut_short"]["changed"]
    assert dest.read_bytes() == src.read_bytes()
    assert oct(dest.stat().st_mode & 0o7777) == "0o640" and dest.stat().st_uid == 0
    # Renamed into place: nothing is left beside it.
    assert sorted(path.name for path in dest.parent.iterdir()) == ["7a9e.tar"]
    assert results["bad_mode"]["failed"]
    assert "'rw-r--r--' is not an octal mode" in results["bad_mode"]["msg"]
    assert results["no_src"]["failed"]
    assert f"cannot read src {tmp_path / 'gone.tar'}" in results["no_src"]["msg"]
