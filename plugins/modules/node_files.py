#!/usr/bin/python
"""Put a node's files, directories and links in their state in one module run.

ansible.builtin.template and copy take two module runs per file on a node, even when nothing
changes (a checksum, then the attributes); each run starts a Python on the node. A role's
configuration is a handful of small files rendered on the controller: sent in one run, the
node compares each with what it has and touches only those that differ.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: node_files
short_description: Put a node's files, directories and links in their state in one module run
description:
  - Each entry is put in its state, in the order given (a directory before the files in it);
    only entries that differ from the node's are touched, and the changed paths are returned.
  - A file is written to a temporary file beside it, validated when asked, and renamed into
    place, so a reader never sees half a file.
  - One module run per node where M(ansible.builtin.template) and M(ansible.builtin.copy)
    take two per file; templates are rendered on the controller (O(entries[].template)).
options:
  entries:
    description: What to put on the node, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path on the node.
        type: path
        required: true
      state:
        description: What the path must be.
        type: str
        choices: [file, directory, link, absent]
        default: file
      content:
        description: The file's text (O(entries[].state=file)).
        type: str
      template:
        description:
          - A template of the role's C(templates/) (or a path), rendered on the controller with
            the task's variables as M(ansible.builtin.template) renders it; its text is the
            file's O(entries[].content). Give one of the two.
          - The action renders it without the template lookup's copy of every variable.
        type: str
      src:
        description: Where the link points (O(entries[].state=link)).
        type: path
      mode:
        description: Octal permissions such as C("0644"); unmanaged when omitted.
        type: str
      owner:
        description: The owning user's name; unmanaged when omitted.
        type: str
      group:
        description: The owning group's name; unmanaged when omitted.
        type: str
      validate:
        description: Command run on the new file before it replaces the old one; C(%s) is its path.
        type: str
  record:
    description:
      - A file on the node that lists, as a JSON array, every path this module put in its state
        there, for one reader to check them all at once (ray_facts' probe, whose reading the
        action passes back as C(observed) on the next run). Written only where its directory
        exists; the paths of this run are added to those listed.
    type: path
  identify:
    description:
      - Return each file entry's identity (C(identities)), as the node is after this run.
    type: bool
    default: false
  observed:
    description:
      - What the facts play's probe read of the recorded paths at the start of this run
        (C(record), and C(paths), each path's state, content sha256 and attributes). Entries
        that all hold there are not sent to the node; the action removes this option.
    type: dict
  witness:
    description:
      - A file on the controller that vouches for the files the probe cannot read (a secret
        others may not read has no digest in its reading). It holds each such path's
        content sha256 and identity (inode and change time) when the module last confirmed
        it. Such a file holds only where its identity is unchanged since then and its
        content is the one wanted; written 0600 by the action (with O(identify)), which
        removes this option.
    type: path
attributes:
  action:
    support: full
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Write Ray's environment and unit
  verl_debug.cluster.node_files:
    entries:
      - path: /etc/ray-cluster
        state: directory
        mode: "0755"
      - path: /etc/ray-cluster/ray.env
        template: ray.env.j2
        mode: "0644"
  register: written
"""

RETURN = r"""
paths:
  description: The entries' paths that changed (or would change, under --check), in order.
  type: list
  elements: str
  returned: always
identities:
  description: Each file entry's path and its inode and change time in nanoseconds.
  type: dict
  returned: with O(identify)
"""

Entry = Mapping[str, Any]


class EntryError(Exception):
    """An entry that cannot be put in its state; the message names its path."""


def parse_mode(entry: Entry) -> int | None:
    mode = entry.get("mode")
    if mode is None:
        return None
    text = str(mode)
    if not text or any(digit not in "01234567" for digit in text) or int(text, 8) > 0o7777:
        raise EntryError(f"{entry['path']}: mode {text!r} is not octal permissions such as '0644'")
    return int(text, 8)


def owner_ids(entry: Entry) -> tuple[int, int]:
    """The entry's uid and gid; -1 where it leaves them as they are."""
    try:
        uid = pwd.getpwnam(entry["owner"]).pw_uid if entry.get("owner") else -1
    except KeyError:
        raise EntryError(f"{entry['path']}: the node has no user {entry['owner']!r}") from None
    try:
        gid = grp.getgrnam(entry["group"]).gr_gid if entry.get("group") else -1
    except KeyError:
        raise EntryError(f"{entry['path']}: the node has no group {entry['group']!r}") from None
    return uid, gid


def attributes_differ(current: os.stat_result, mode: int | None, uid: int, gid: int) -> bool:
    return (
        (mode is not None and stat.S_IMODE(current.st_mode) != mode)
        or (uid != -1 and current.st_uid != uid)
        or (gid != -1 and current.st_gid != gid)
    )


def set_attributes(path: str, mode: int | None, uid: int, gid: int) -> None:
    if uid != -1 or gid != -1:
        os.lchown(path, uid, gid)
    if mode is not None:
        os.chmod(path, mode)


def text_diff(path: str, before: str, after: str) -> dict[str, str]:
    return {"before_header": path, "after_header": path, "before": before, "after": after}


class Converger:
    """Puts entries in their state; under `check` it only reports what it would change."""

    def __init__(self, check: bool, validate: Callable[[str, str], str | None]) -> None:
        self.check = check
        # (command with %s, path) -> an error message, or None when the file is valid.
        self.validate = validate
        self.paths: list[str] = []
        self.diffs: list[dict[str, str]] = []

    def apply(self, entry: Entry) -> None:
        state = entry.get("state") or "file"
        changed = getattr(self, f"_{state}")(entry)
        if changed:
            self.paths.append(entry["path"])

    def _file(self, entry: Entry) -> bool:
        path, content = entry["path"], entry.get("content")
        if content is None:
            raise EntryError(f"{path}: a file needs its content")
        mode, (uid, gid) = parse_mode(entry), owner_ids(entry)
        wanted = content.encode()
        try:
            current = os.lstat(path)
        except FileNotFoundError:
            current = None
        if current is not None and stat.S_ISDIR(current.st_mode):
            raise EntryError(f"{path}: is a directory, not a file")
        before = b""
        if current is not None and stat.S_ISREG(current.st_mode):
            with open(path, "rb") as existing:
                before = existing.read()
        same_content = current is not None and stat.S_ISREG(current.st_mode) and before == wanted
        if same_content:
            if not attributes_differ(current, mode, uid, gid):
                return False
            if not self.check:
                set_attributes(path, mode, uid, gid)
            return True
        self.diffs.append(text_diff(path, before.decode(errors="replace"), content))
        if not self.check:
            self._replace(path, wanted, entry.get("validate"), mode, uid, gid, current)
        return True

    def _replace(
        self,
        path: str,
        data: bytes,
        validate: str | None,
        mode: int | None,
        uid: int,
        gid: int,
        current: os.stat_result | None,
    ) -> None:
        """Write beside `path` and rename over it; a new file without a mode gets 0644."""
        if mode is None:
            mode = stat.S_IMODE(current.st_mode) if current is not None else 0o644
        handle, staged = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".node_files.")
        try:
            with os.fdopen(handle, "wb") as new:
                new.write(data)
            set_attributes(staged, mode, uid, gid)
            if validate:
                problem = self.validate(validate, staged)
                if problem:
                    raise EntryError(f"{path}: {validate!r} refused the new file: {problem}")
            os.replace(staged, path)
        finally:
            if os.path.lexists(staged):
                os.unlink(staged)

    def _directory(self, entry: Entry) -> bool:
        path = entry["path"]
        mode, (uid, gid) = parse_mode(entry), owner_ids(entry)
        try:
            current = os.lstat(path)
        except FileNotFoundError:
            if not self.check:
                os.makedirs(path)
                set_attributes(path, mode, uid, gid)
            return True
        if not stat.S_ISDIR(current.st_mode):
            raise EntryError(f"{path}: exists and is not a directory")
        if not attributes_differ(current, mode, uid, gid):
            return False
        if not self.check:
            set_attributes(path, mode, uid, gid)
        return True

    def _link(self, entry: Entry) -> bool:
        path, target = entry["path"], entry.get("src")
        if not target:
            raise EntryError(f"{path}: a link needs its src")
        if os.path.islink(path) and os.readlink(path) == target:
            return False
        if os.path.isdir(path) and not os.path.islink(path):
            raise EntryError(f"{path}: is a directory, not a link")
        if not self.check:
            staged = os.path.join(os.path.dirname(path), f".node_files.{os.getpid()}.link")
            os.symlink(target, staged)
            os.replace(staged, path)
        return True

    def _absent(self, entry: Entry) -> bool:
        path = entry["path"]
        if not os.path.lexists(path):
            return False
        if os.path.isdir(path) and not os.path.islink(path):
            raise EntryError(f"{path}: is a directory; only files and links are removed")
        if not self.check:
            os.unlink(path)
        return True


def record_paths(record: str, paths: list[str]) -> None:
    """Add `paths` to the JSON list in `record`, where its directory exists (a run that has
    not made it yet records on the next one)."""
    if not os.path.isdir(os.path.dirname(record)):
        return
    try:
        with open(record) as listed:
            known = set(json.load(listed))
    except (FileNotFoundError, ValueError):
        known = set()
    if set(paths) <= known:
        return
    handle, staged = tempfile.mkstemp(dir=os.path.dirname(record), prefix=".node_files.")
    with os.fdopen(handle, "w") as new:
        json.dump(sorted(known | set(paths)), new)
    os.chmod(staged, 0o644)
    os.replace(staged, record)


def identities(entries: list[Entry]) -> dict[str, list[int]]:
    """Each regular file among the entries: its inode and change time, which any write, chmod,
    chown or replacement changes."""
    found = {}
    for entry in entries:
        if (entry.get("state") or "file") != "file":
            continue
        try:
            current = os.lstat(entry["path"])
        except FileNotFoundError:
            continue
        if stat.S_ISREG(current.st_mode):
            found[entry["path"]] = [current.st_ino, current.st_ctime_ns]
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "entries": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "state": {
                        "type": "str",
                        "choices": ["file", "directory", "link", "absent"],
                        "default": "file",
                    },
                    "content": {"type": "str"},
                    "src": {"type": "path"},
                    "mode": {"type": "str"},
                    "owner": {"type": "str"},
                    "group": {"type": "str"},
                    "validate": {"type": "str"},
                },
            },
            "record": {"type": "path"},
            "identify": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )

    def validate(command: str, path: str) -> str | None:
        if "%s" not in command:
            return f"the command must name the file as %s: {command!r}"
        rc, out, err = module.run_command(command.replace("%s", path))
        return None if rc == 0 else (err or out).strip() or f"exit status {rc}"

    converger = Converger(module.check_mode, validate)
    try:
        for entry in module.params["entries"]:
            converger.apply(entry)
    except (EntryError, OSError) as problem:
        module.fail_json(msg=str(problem), paths=converger.paths)
    if module.params["record"] and not module.check_mode:
        try:
            record_paths(
                module.params["record"], [entry["path"] for entry in module.params["entries"]]
            )
        except OSError as problem:
            module.fail_json(msg=f"{module.params['record']}: {problem}", paths=converger.paths)
    result: dict[str, Any] = {"changed": bool(converger.paths), "paths": converger.paths}
    if module.params["identify"]:
        result["identities"] = identities(module.params["entries"])
    if module._diff and converger.diffs:
        result["diff"] = converger.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
