"""The node_probe action (plugins/action/node_probe.py) in a real ansible-playbook run, over
the local connection: where the connection pipelines, the probe reaches the node in one
command with the script on its standard input; where it does not, through the script action;
the facts are the same either way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.local_play import run_local_play

PROJECT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def probe_facts(tmp_path: Path, pipelining: bool) -> tuple[dict, list[str]]:
    """The facts the action published, and the lines where Ansible ran or sent something."""
    facts = tmp_path / "facts.json"
    probe = {
        "python": sys.executable,
        "nvidia_smi": str(tmp_path / "no-nvidia-smi"),
        "driver": str(tmp_path / "no-driver"),
        "venv": str(tmp_path / "no-venv"),
        "firewall_unit": "ray-firewall-of-no-test",
        "ray_unit": "ray-of-no-test",
        "files_record": str(tmp_path / "no-record"),
        "proof_record": str(tmp_path / "no-proof"),
        "operators": ["root"],
    }
    tasks = [
        {"verl_debug.cluster.node_probe": probe, "register": "probed"},
        {"ansible.builtin.copy": {"content": "{{ probed.facts | to_json }}", "dest": str(facts)}},
    ]
    done = run_local_play(
        tmp_path,
        {"tasks": tasks},
        "-vvv",
        env={**os.environ, "ANSIBLE_PIPELINING": str(pipelining)},
    )
    # Until the copy task: what the probe alone ran.
    probing = done.stdout.split("TASK [ansible.builtin.copy]")[0]
    ran = [
        line
        for line in probing.splitlines()
        if line.startswith(("<localhost> EXEC", "<localhost> PUT"))
    ]
    return json.loads(facts.read_text()), ran


@pytest.mark.parametrize("pipelining", [True, False])
def test_the_probe_runs_in_one_command_where_the_connection_pipelines(
    tmp_path: Path, pipelining: bool
) -> None:
    facts, ran = probe_facts(tmp_path, pipelining)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert facts["ray_node_python"]["version"] == version
    assert facts["ray_node_address"] == facts["ray_node_default_ipv4"]
    assert facts["ray_node_gpu_count"] == 0
    if pipelining:
        [command] = ran
        assert f"{sys.executable} - --nvidia-smi" in command
    else:
        assert any(line.startswith("<localhost> PUT") and "node_probe.py" in line for line in ran)
        assert len(ran) > 1
