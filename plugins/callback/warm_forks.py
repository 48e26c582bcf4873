"""Loads the Jinja filters and tests once, in ansible-playbook's own process, before it forks a
worker for each task on each host: the workers inherit them instead of each loading them again.

Ansible forks a fresh worker per task and host, and a worker that templates its first filter
loads every filter and test plugin file (ansible.builtin's and this collection's) from
scratch. On a re-run of cluster-up, where most tasks are skipped conditions, that loading was
over a third of the controller's CPU per node (docs/performance.md).

It templates one expression too: Jinja's lexer, a few dozen regular expressions Ansible
caches per process, is then built once here, where each worker built it again for its first
template (ansible-core's own comment on that cache asks for it to be built before the fork).
"""

from __future__ import annotations

import importlib
import pkgutil

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader
from ansible.template import Templar, trust_as_template

DOCUMENTATION = """
name: warm_forks
type: aggregate
short_description: load Jinja filters and tests once, before the workers fork
description:
  - At the start of a playbook, loads every filter and test plugin Ansible knows in the
    controller's main process and templates one expression there, which builds Jinja's lexer;
    the worker forked for each task and host inherits them.
  - Changes no output and no result.
requirements:
  - enabled by callbacks_enabled in ansible.cfg
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "verl_debug.cluster.warm_forks"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: object) -> None:
        for loader in (filter_loader, test_loader):
            for _ in loader.all():
                pass
        filters = importlib.import_module("ansible_collections.verl_debug.cluster.plugins.filter")
        for module in pkgutil.iter_modules(filters.__path__, f"{filters.__name__}."):
            importlib.import_module(module.name)
        Templar().template(trust_as_template("{{ 0 }}"))
