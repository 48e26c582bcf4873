"""Action of the node_files module: no module run where the files are already in their state.

A module run costs a node a Python start (about 0.5 s over SSH, 0.4 s of the controller's CPU)
even when it changes nothing, and a re-run of cluster-up finds nearly every file as it left
it. On the controller the entries are compared in this process, with the module's own code; on
a node they are compared with what the facts play's probe read there at the start of this run
(`observed`: every path the module recorded, its content's sha256 and attributes). Anything
that differs, or that was not read, goes to the module, which compares again and writes.

A file others may not read (the cluster token) has no digest in the probe's reading, which
goes to the log. The controller keeps its `witness` instead: the content's sha256 and the
file's identity (inode, change time) when the module last confirmed it; the same identity
means the very same file, untouched since.

An entry's `template` is rendered here, with the task's variables, as the template action
renders one: the template lookup deep-copies every variable of the task for each template it
renders, most of its cost (about 60 ms a template, for every node on every run).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from ansible import constants
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
from ansible_collections.verl_debug.cluster.plugins.modules.node_files import (
    Converger,
    EntryError,
    parse_mode,
)

MODULE = "verl_debug.cluster.node_files"


def digest(content: object) -> str:
    return hashlib.sha256(str(content).encode()).hexdigest()


def settled(
    entry: Mapping[str, Any],
    seen: Mapping[str, Any] | None,
    witness: Mapping[str, Any] | None = None,
) -> bool:
    """Whether an entry already holds on a path the probe saw as `seen` (None: no such path);
    `witness` vouches for a file whose digest the probe did not read."""
    state = entry.get("state") or "file"
    if seen is None or state == "absent":
        return seen is None and state == "absent"
    if seen["state"] != state:
        return False
    if state == "link":
        return seen["src"] == entry.get("src")
    if state == "file":
        if entry.get("content") is None:
            return False
        wanted = digest(entry["content"])
        if seen["sha256"] is None:
            if not witness or (witness.get("sha256"), witness.get("identity")) != (
                wanted,
                seen.get("identity"),
            ):
                return False
        elif seen["sha256"] != wanted:
            return False
    try:
        mode = parse_mode(entry)
    except EntryError:
        # The module names the bad value.
        return False
    return (mode is None or mode == int(seen["mode"], 8)) and all(
        entry.get(key) in (None, seen[key]) for key in ("owner", "group")
    )


def settled_here(entries: list[Mapping[str, Any]]) -> bool:
    """Whether the entries already hold on this machine, by the module's own comparison."""
    converger = Converger(check=True, validate=lambda command, path: None)
    try:
        for entry in entries:
            path = os.path.expanduser(os.path.expandvars(entry["path"]))
            converger.apply({**entry, "path": path})
    except (EntryError, OSError, KeyError, TypeError):
        return False
    return not converger.paths


def read_witness(path: str) -> dict[str, Any]:
    try:
        with open(path) as kept:
            found = json.load(kept)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_witness(path: str, witness: Mapping[str, Any]) -> None:
    """Replace the witness file, readable by its owner alone: it holds digests of secrets."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    handle, staged = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".witness.")
    try:
        with os.fdopen(handle, "w") as new:
            json.dump(witness, new, indent=1, sort_keys=True)
        os.replace(staged, path)
    finally:
        if os.path.lexists(staged):
            os.unlink(staged)


class ActionModule(ActionBase):
    """Compare first; run the module only where something differs or was not read."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("entries", "record", "observed", "witness"))

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        observed = args.pop("observed", None)
        witness_file = args.pop("witness", None)
        witness = read_witness(witness_file) if witness_file else {}
        entries = [self._rendered(entry, task_vars or {}) for entry in args.get("entries") or []]
        if "entries" in args:
            args["entries"] = entries
        if observed:
            seen = observed.get("paths", {})
            if all(
                isinstance(entry, Mapping) and entry.get("path") in seen
                and settled(entry, seen[entry["path"]], witness.get(entry["path"]))
                for entry in entries
            ):  # fmt: skip
                return {**result, "changed": False, "paths": []}
            # The module lists its paths there, for the probe of the next run to read.
            args["record"] = observed.get("record")
        elif (
            self._connection.transport == "local"
            and not self._play_context.become
            and settled_here(entries)
        ):
            return {**result, "changed": False, "paths": []}
        if witness_file:
            args["identify"] = True
        result.update(self._execute_module(MODULE, module_args=args, task_vars=task_vars))
        if witness_file and not result.get("failed"):
            self._vouch(witness_file, witness, entries, result)
        return result

    def _vouch(
        self,
        witness_file: str,
        witness: dict[str, Any],
        entries: list[Mapping[str, Any]],
        result: dict[str, Any],
    ) -> None:
        """Keep what the module confirmed: each file it found or left with the wanted content
        (under --check, only those it would not change)."""
        identities = result.pop("identities", {})
        unconfirmed = set(result.get("paths", [])) if self._task.check_mode else set()
        confirmed = {
            entry["path"]: {"sha256": digest(entry["content"]), "identity": identity}
            for entry in entries
            if (identity := identities.get(entry.get("path"))) and entry["path"] not in unconfirmed
        }
        kept = {**witness, **confirmed}
        if kept != witness:
            write_witness(witness_file, kept)

    def _rendered(self, entry: Any, task_vars: Mapping[str, Any]) -> Any:
        """The entry with its `template` (a file of the role's templates/) rendered as `content`."""
        if not isinstance(entry, Mapping) or entry.get("template") is None:
            return entry
        name = entry["template"]
        if entry.get("content") is not None:
            raise AnsibleActionFail(
                f"{entry.get('path')}: give content or template '{name}', not both"
            )
        source = self._find_needle("templates", name)
        # Like the template action: includes resolve beside the template, then in each role's
        # and play's templates/.
        searchpath = [os.path.dirname(source)] + [
            path
            for base in task_vars.get("ansible_search_path", [])
            for path in (os.path.join(base, "templates"), base)
        ]
        variables = dict(task_vars)
        variables.setdefault(
            "ansible_managed", constants.config.get_config_value("DEFAULT_MANAGED_STR")
        )
        templar = self._templar.copy_with_new_env(
            searchpath=searchpath, available_variables=variables
        )
        text = templar.template(
            trust_as_template(self._loader.get_text_file_contents(source)),
            escape_backslashes=False,
        )
        rest = {key: value for key, value in entry.items() if key != "template"}
        return {**rest, "content": "" if text is None else str(text)}
