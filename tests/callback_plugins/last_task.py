"""Keeps the play and task that started last in the file $ANSIBLE_LAST_TASK_FILE, so that a
test which stops a hung ansible-playbook can say where it hung (tests/bounded.py)."""

from __future__ import annotations

import os
from pathlib import Path

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: last_task
type: aggregate
short_description: the play and task that started last, in a file
description:
  - Writes "PLAY : TASK" to the file named by ANSIBLE_LAST_TASK_FILE at every task start.
requirements:
  - enabled by callbacks_enabled (ANSIBLE_CALLBACKS_ENABLED=last_task)
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "last_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._path = os.environ.get("ANSIBLE_LAST_TASK_FILE")
        self._play = ""

    def _write(self, text: str) -> None:
        if self._path:
            Path(self._path).write_text(text)

    def v2_playbook_on_play_start(self, play) -> None:
        self._play = play.get_name()
        self._write(f"{self._play} (gathering facts)")

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._write(f"{self._play} : {task.get_name()}")

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self._write(f"{self._play} : {task.get_name()} (handler)")
