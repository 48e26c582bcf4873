"""Action of node_upload: a large file sent to a node as it is, where the node lacks it.

ansible.builtin.copy takes the file's SHA-1 on the controller, stats the destination in one
module run, sends the file, then takes its SHA-1 again on the node in a second module run.
For the wheelhouse archive (490 MB) that came to 3.5 s where sending it took 1.7 s, by hand on
the bench's head (docs/performance.md). The archive is named by its lock's digest, so a file
of that name and size on the node is that archive: this action asks the node with one shell
command, sends the file only where it is missing, and renames it into place from beside it,
so that a transfer cut off anywhere leaves nothing under the name.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "src": {"type": "str", "required": True},
    "dest": {"type": "str", "required": True},
    "mode": {"type": "str", "required": True},
}
MODE = re.compile(r"0?[0-7]{3}")


def present_command(dest: str, size: int) -> str:
    """A command that succeeds where the node has a file at `dest` of `size` bytes."""
    return f'test "$(stat -c %s {shlex.quote(dest)} 2>/dev/null)" = {size}'


def install_command(sent: str, dest: str, mode: str) -> str:
    """Moves the sent file beside `dest`, makes it root's with `mode`, then renames it: a
    rename within a directory is atomic, where a move from the temporary directory may be a
    copy across file systems."""
    partial = shlex.quote(f"{dest}.partial")
    return " && ".join(
        (
            f"mv -f {shlex.quote(sent)} {partial}",
            f"chown 0:0 {partial}",
            f"chmod {mode} {partial}",
            f"mv -f {partial} {shlex.quote(dest)}",
        )
    )


class ActionModule(ActionBase):
    TRANSFERS_FILES = True

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict[str, Any]:
        _, options = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result = super().run(tmp, task_vars)
        src, dest, mode = options["src"], options["dest"], options["mode"]
        if not MODE.fullmatch(mode):
            raise AnsibleActionFail(f"mode {mode!r} is not an octal mode such as '0644'")
        try:
            size = os.path.getsize(src)
        except OSError as problem:
            raise AnsibleActionFail(f"cannot read src {src}: {problem.strerror}") from None
        result.update(dest=dest, size=size)
        if self._low_level_execute_command(present_command(dest, size))["rc"] == 0:
            return {**result, "changed": False}
        if self._task.check_mode:
            return {**result, "changed": True}
        try:
            sent = self._connection._shell.join_path(self._make_tmp_path(), "upload")
            self._transfer_file(src, sent)
            installed = self._low_level_execute_command(install_command(sent, dest, mode))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if installed["rc"] != 0:
            raise AnsibleActionFail(
                f"cannot install {dest}: {installed['stderr'].strip() or installed['stdout']}",
                result=installed,
            )
        return {**result, "changed": True}
