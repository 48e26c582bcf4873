"""The warm_forks callback: ansible-playbook loads it from the checkout's ansible.cfg, and after
it has run, the filters and tests that every forked worker would otherwise load again are
already in the controller's process (what a fork inherits), and so is the Jinja lexer that
every worker's first template would build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# In a fresh interpreter, as ansible-playbook's own process: before the callback, no filter is
# loaded; after it, ansible.builtin's filters and tests and this collection's filters are.
WARM_THEN_LOOK = textwrap.dedent(
    """
    import json, sys
    from ansible.plugins.loader import filter_loader, init_plugin_loader, test_loader
    from ansible._internal._templating._jinja_bits import AnsibleEnvironment
    init_plugin_loader([sys.argv[1]])
    from ansible_collections.verl_debug.cluster.plugins.callback.warm_forks import CallbackModule
    ours = "ansible_collections.verl_debug.cluster.plugins.filter."
    def loaded():
        return {
            "filters": "to_json" in filter_loader._cached_non_collection_wrappers,
            "tests": "file" in test_loader._cached_non_collection_wrappers,
            "ours": sorted(name[len(ours):] for name in sys.modules if name.startswith(ours)),
            "lexer": len(AnsibleEnvironment._lexer_cache) > 0,
        }
    before = loaded()
    CallbackModule().v2_playbook_on_start(None)
    print(json.dumps({"before": before, "after": loaded()}))
    """
)


def test_the_checkouts_config_loads_the_callback() -> None:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    done = subprocess.run(
        [BIN / "ansible-playbook", "-vvvv", "-i", "localhost,", "/dev/stdin"],
        input="- hosts: localhost\n  gather_facts: false\n  tasks: []\n",
        cwd=PROJECT, env=clean, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "Loading callback plugin verl_debug.cluster.warm_forks" in done.stdout
    assert "Skipping callback plugin" not in done.stdout + done.stderr


def test_after_the_callback_the_filters_are_loaded_in_the_controllers_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WARM_THEN_LOOK, str(PROJECT / "collections")],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    seen = json.loads(done.stdout)
    assert seen["before"] == {"filters": False, "tests": False, "ours": [], "lexer": False}
    filters = sorted(path.stem for path in (PROJECT / "plugins/filter").glob("*.py"))
    assert seen["after"] == {"filters": True, "tests": True, "ours": filters, "lexer": True}
