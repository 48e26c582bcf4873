"""plugins/modules/node_files.py on a real file system: a node's files, directories and links
put in their state in one module run, only what differs touched, --check and --diff kept."""

from __future__ import annotations

import grp
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.verl_debug.cluster.plugins.action import node_files as action

from tests.local_play import run_local_play

PROJECT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "node_files", PROJECT / "plugins/modules/node_files.py"
)
assert _spec and _spec.loader
node_files = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(node_files)


def no_validation(command: str, path: str) -> str | None:
    raise AssertionError(f"nothing asked to validate {path} with {command}")


def converge(entries: list[dict], check: bool = False, validate=no_validation) -> Any:
    converger = node_files.Converger(check, validate)
    for entry in entries:
        converger.apply(entry)
    return converger


def layout(root: Path) -> list[dict]:
    return [
        {"path": str(root / "etc"), "state": "directory", "mode": "0755"},
        {"path": str(root / "etc/ray.env"), "content": "A=1\n", "mode": "0640"},
        {"path": str(root / "bin-ray"), "state": "link", "src": "/opt/venv/bin/ray"},
    ]


def test_entries_are_made_in_order_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    first = converge(layout(tmp_path))
    assert first.paths == [str(tmp_path / "etc"), str(tmp_path / "etc/ray.env"),
                           str(tmp_path / "bin-ray")]  # fmt: skip
    assert (tmp_path / "etc/ray.env").read_text() == "A=1\n"
    assert oct((tmp_path / "etc/ray.env").stat().st_mode & 0o7777) == "0o640"
    assert os.readlink(tmp_path / "bin-ray") == "/opt/venv/bin/ray"
    again = converge(layout(tmp_path))
    assert again.paths == [] and again.diffs == []
    # Written by renaming a file beside it: nothing is left behind.
    assert sorted(path.name for path in (tmp_path / "etc").iterdir()) == ["ray.env"]


def test_check_mode_reports_the_changes_and_makes_none(tmp_path: Path) -> None:
    converge(layout(tmp_path))
    entries = layout(tmp_path)
    entries[1]["content"] = "A=2\n"
    entries[2]["src"] = "/elsewhere/ray"
    checked = converge(entries, check=True)
    assert checked.paths == [str(tmp_path / "etc/ray.env"), str(tmp_path / "bin-ray")]
    assert checked.diffs == [{"before_header": str(tmp_path / "etc/ray.env"),
                              "after_header": str(tmp_path / "etc/ray.env"),
                              "before": "A=1\n", "after": "A=2\n"}]  # fmt: skip
    assert (tmp_path / "etc/ray.env").read_text() == "A=1\n"
    assert os.readlink(tmp_path / "bin-ray") == "/opt/venv/bin/ray"


def test_only_the_attributes_that_differ_are_set(tmp_path: Path) -> None:
    converge(layout(tmp_path))
    env = tmp_path / "etc/ray.env"
    env.chmod(0o666)
    inode = env.stat().st_ino
    entries = layout(tmp_path)
    entries[1]["group"] = grp.getgrgid(os.getgid()).gr_name
    changed = converge(entries)
    assert changed.paths == [str(env)] and changed.diffs == []
    assert oct(env.stat().st_mode & 0o7777) == "0o640"
    # Same content: the file is the same file, its readers keep it.
    assert env.stat().st_ino == inode


def test_a_refused_file_leaves_the_old_one(tmp_path: Path) -> None:
    converge(layout(tmp_path))
    entries = layout(tmp_path)
    entries[1].update(content="broken\n", validate="nft -c -f %s")
    with pytest.raises(node_files.EntryError, match="refused the new file: syntax error"):
        converge(entries, validate=lambda command, path: "syntax error")
    assert (tmp_path / "etc/ray.env").read_text() == "A=1\n"
    assert sorted(path.name for path in (tmp_path / "etc").iterdir()) == ["ray.env"]


def test_absent_removes_a_file_once(tmp_path: Path) -> None:
    converge(layout(tmp_path))
    gone = [{"path": str(tmp_path / "etc/ray.env"), "state": "absent"}]
    assert converge(gone).paths == [str(tmp_path / "etc/ray.env")]
    assert not (tmp_path / "etc/ray.env").exists()
    assert converge(gone).paths == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mode": "u+rw"}, "mode 'u+rw' is not octal permissions such as '0644'"),
        ({"owner": "no-such-user"}, "the node has no user 'no-such-user'"),
        ({"group": "no-such-group"}, "the node has no group 'no-such-group'"),
        ({"content": None}, "a file needs its content"),
    ],
)
def test_a_bad_entry_names_its_path_and_value(tmp_path: Path, change: dict, message: str) -> None:
    entry = {"path": str(tmp_path / "f"), "content": "x\n", **change}
    with pytest.raises(node_files.EntryError) as refused:
        converge([entry])
    assert str(refused.value) == f"{tmp_path / 'f'}: {message}"
    assert not (tmp_path / "f").exists()


def ad_hoc(args: dict, *flags: str) -> dict:
    """One node_files task on localhost through `ansible`, as the roles call it: its result."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1")  # fmt: skip
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local",
         "-m", "verl_debug.cluster.node_files", "-a", json.dumps(args), *flags],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(run.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_the_module_runs_under_ansible_with_check_and_diff(tmp_path: Path) -> None:
    """Through ansible itself, as the roles call it: its argument spec and --check --diff."""
    entries = {"entries": layout(tmp_path)}
    checked = ad_hoc(entries, "--check", "--diff")
    assert checked["changed"] and len(checked["paths"]) == 3
    assert [diff["after"] for diff in checked["diff"]] == ["A=1\n"]
    assert not (tmp_path / "etc").exists()
    assert ad_hoc(entries)["changed"]
    assert not ad_hoc(entries)["changed"]


_probe_spec = importlib.util.spec_from_file_location(
    "node_probe", PROJECT / "roles/ray_facts/files/node_probe.py"
)
assert _probe_spec and _probe_spec.loader
node_probe = importlib.util.module_from_spec(_probe_spec)
_probe_spec.loader.exec_module(node_probe)


def test_what_the_probe_observes_is_what_the_action_compares(tmp_path: Path) -> None:
    """The node side (the probe's reading) and the controller side (the action's comparison)
    of one judgement: a layout the module made holds; each kind of change behind its back
    does not, for exactly the entry it touched."""
    secret = {"path": str(tmp_path / "etc/token"), "content": "t0k3n\n", "mode": "0640"}
    entries = [
        {"path": str(tmp_path / "etc"), "state": "directory", "mode": "0755"},
        {"path": str(tmp_path / "etc/ray.env"), "content": "A=1\n", "mode": "0644"},
        {"path": str(tmp_path / "bin/ray"), "state": "link", "src": "/opt/venv/bin/ray"},
        {"path": str(tmp_path / "gone"), "state": "absent"},
    ]
    (tmp_path / "bin").mkdir()
    converge([*entries, secret])
    # A file others may not read is observed without its digest, so never taken as settled.
    assert node_probe.observe(secret["path"])["sha256"] is None
    assert not action.settled(secret, node_probe.observe(secret["path"]))

    def unsettled() -> list[str]:
        return [
            entry["path"]
            for entry in entries
            if not action.settled(entry, node_probe.observe(entry["path"]))
        ]

    assert unsettled() == []
    (tmp_path / "etc/ray.env").write_text("A=2\n")
    os.chmod(tmp_path / "etc", 0o700)
    (tmp_path / "bin/ray").unlink()
    (tmp_path / "bin/ray").symlink_to("/elsewhere")
    (tmp_path / "gone").write_text("")
    changed = ["etc", "etc/ray.env", "bin/ray", "gone"]
    assert unsettled() == [str(tmp_path / path) for path in changed]


def test_an_observed_node_gets_only_what_differs_and_a_record_of_it(tmp_path: Path) -> None:
    """Through ansible, as the roles call it with the probe's reading (`observed`): entries
    that all hold there start no module, so a file changed since the reading stays as it is;
    one that differs is written by the module, which lists its paths for the next probe."""
    record = tmp_path / "node-files.json"
    target = tmp_path / "ray.env"
    entry = {"path": str(target), "content": "A=1\n", "mode": "0644"}

    def play(observed_paths: dict) -> dict:
        return ad_hoc(
            {"entries": [entry], "observed": {"record": str(record), "paths": observed_paths}}
        )

    # Nothing read there yet: the module writes the file and records its path.
    assert play({})["paths"] == [str(target)]
    assert json.loads(record.read_text()) == [str(target)]
    seen = node_probe.observed_files(record)["paths"]
    # Changed after the reading: the action trusts this run's reading and sends nothing.
    target.write_text("changed since the probe read it\n")
    assert play(seen) == {**play(seen), "changed": False, "paths": []}
    assert target.read_text() == "changed since the probe read it\n"
    # The next reading sees the change, and the module puts the file back.
    assert play(node_probe.observed_files(record)["paths"])["paths"] == [str(target)]
    assert target.read_text() == "A=1\n"


def test_a_witnessed_secret_holds_until_its_file_is_touched(tmp_path: Path) -> None:
    """A file others may not read has no digest in the probe's reading; the controller's
    witness (its digest and identity when the module last confirmed it) vouches for it, and
    any write, chmod or replacement since, or another content wanted, does not hold."""
    secret = {"path": str(tmp_path / "token"), "content": "t0k3n\n", "mode": "0640"}
    converge([secret])
    seen = node_probe.observe(secret["path"])
    assert seen["sha256"] is None
    identity = node_files.identities([secret])[secret["path"]]
    witness = {"sha256": action.digest(secret["content"]), "identity": identity}
    assert action.settled(secret, seen, witness)
    assert not action.settled(secret, seen, None)
    assert not action.settled({**secret, "content": "new\n"}, seen, witness)
    (tmp_path / "token").write_text("t0k3n\n")  # the same content, written again
    assert not action.settled(secret, node_probe.observe(secret["path"]), witness)
    witness["identity"] = node_files.identities([secret])[secret["path"]]
    assert action.settled(secret, node_probe.observe(secret["path"]), witness)
    os.chmod(tmp_path / "token", 0o640)  # the same mode, set again
    assert not action.settled(secret, node_probe.observe(secret["path"]), witness)


def test_the_witness_spares_the_module_run_for_an_untouched_secret(tmp_path: Path) -> None:
    """Through ansible: the module confirms the secret and the action keeps its witness, 0600;
    the next run, reading the same file, sends nothing (a change made after that reading stays);
    a reading after the change sends the file to the module, which puts it back."""
    record, witness = tmp_path / "node-files.json", tmp_path / "witness/node.json"
    secret = {"path": str(tmp_path / "token"), "content": "t0k3n\n", "mode": "0640"}

    def play(observed_paths: dict, *flags: str) -> dict:
        observed = {"record": str(record), "paths": observed_paths}
        return ad_hoc({"entries": [secret], "witness": str(witness), "observed": observed}, *flags)

    # --check confirms nothing it would change.
    assert play({}, "--check")["paths"] == [secret["path"]]
    assert not witness.exists()
    assert play({})["paths"] == [secret["path"]]
    assert oct(witness.stat().st_mode & 0o777) == "0o600"
    assert "t0k3n" not in witness.read_text()
    seen = node_probe.observed_files(record)["paths"]
    (tmp_path / "token").write_text("changed since the probe read it\n")
    assert play(seen) == {**play(seen), "changed": False, "paths": []}
    assert (tmp_path / "token").read_text() == "changed since the probe read it\n"
    assert play(node_probe.observed_files(record)["paths"])["paths"] == [secret["path"]]
    assert (tmp_path / "token").read_text() == "t0k3n\n"
    # The module ran there (its invocation is in the result); it vouched for the new file.
    assert "invocation" in play({}) and "invocation" not in play(
        node_probe.observed_files(record)["paths"]
    )


def test_a_template_entry_renders_as_the_template_lookup_does(tmp_path: Path) -> None:
    """`template` is rendered by the action, not the lookup: the same text, byte for byte,
    for a template with ansible_managed, an include, a loop, a filter and task variables."""
    (tmp_path / "part.j2").write_text("included {{ node_name }}\n")
    (tmp_path / "whole.j2").write_text(
        "{{ ansible_managed | comment }}\n{% include 'part.j2' %}\n"
        "{% for port in ports %}port {{ port }}\n{% endfor %}"
        "{{ ports | map('string') | join(',') }}\n\n"
    )
    whole = str(tmp_path / "whole.j2")

    def task(path: str, **entry: str) -> dict:
        return {"verl_debug.cluster.node_files": {"entries": [{"path": path, **entry}]}}

    lookup = f"{{{{ lookup('ansible.builtin.template', '{whole}') }}}}"
    both = f"{tmp_path}/both: give content or template '{whole}', not both"
    tasks = [
        task(f"{tmp_path}/by-action", template=whole),
        task(f"{tmp_path}/by-lookup", content=lookup),
        {**task(f"{tmp_path}/both", template=whole, content="text"), "register": "both",
         "ignore_errors": True},
        {"ansible.builtin.assert": {"that": "both.msg == expected"}, "vars": {"expected": both}},
    ]  # fmt: skip
    run_local_play(
        tmp_path, {"vars": {"node_name": "a node", "ports": [6379, 8265]}, "tasks": tasks}
    )
    rendered = (tmp_path / "by-action").read_text()
    assert rendered == (tmp_path / "by-lookup").read_text()
    # trim_blocks, as the template module has it: no newline after a block tag.
    assert rendered == "#\n# Ansible managed\n#\nincluded a nodeport 6379\nport 8265\n6379,8265\n\n"
