"""The collection as a user gets it: built from the checkout, installed into an empty
directory, its playbook run by its full name from outside the checkout. The molecule online
scenario brings a whole cluster up this way; here, on this machine alone (the node facts of
cluster_up, which every tag runs), where its artifacts land by default: beside the inventory,
never inside the installed collection."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

# Its module-scoped fixtures render once: every test of the module on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_collection")

PROJECT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    done = subprocess.run(
        argv, cwd=cwd, env=dict(clean, **env), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    run(str(BIN / "ansible-galaxy"), "collection", "build", str(PROJECT), "--output-path",
        str(out), cwd=out)  # fmt: skip
    [built] = out.glob("verl_debug-cluster-*.tar.gz")
    return built


def test_the_collection_carries_what_runs_from_it(tarball: Path) -> None:
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    version = yaml.safe_load((PROJECT / "galaxy.yml").read_text())["version"]
    assert tarball.name == f"verl_debug-cluster-{version}.tar.gz"
    for shipped in ("playbooks/cluster_up.yml", "playbooks/cluster_down.yml", "cluster-up.yml",
                    "playbooks/validate.yml",
                    "plugins/filter/ray_ports.py", "plugins/module_utils/nvidia_smi.py",
                    "roles/ray_service/tasks/main.yml",
                    "inventory/sample/hosts.yml", "CHANGELOG.md", "meta/runtime.yml"):  # fmt: skip
        assert shipped in names
    # What needs the checkout: the controller tools, the sandbox, the tests.
    for top in ("tests", "molecule", "bench", "ray_debug_tools", "roles/sandbox", "collections",
                "playbooks/collections", "playbooks/roles"):  # fmt: skip
        assert not any(name == top or name.startswith(f"{top}/") for name in names), top
    assert "playbooks/debug_probe.yml" not in names


def test_run_from_the_installed_collection_keeps_artifacts_beside_the_inventory(
    tarball: Path, tmp_path: Path
) -> None:
    collections = tmp_path / "collections"
    run(str(BIN / "ansible-galaxy"), "collection", "install", str(tarball), "-p",
        str(collections), cwd=tmp_path)  # fmt: skip
    inventory = tmp_path / "inventory" / "hosts.yml"
    inventory.parent.mkdir()
    this_machine = {"ansible_connection": "local", "ansible_become": False,
                    "ansible_python_interpreter": sys.executable}  # fmt: skip
    inventory.write_text(yaml.safe_dump({
        "ray_cluster": {
            "children": {"ray_head": {"hosts": {"head": this_machine}}, "ray_workers": {}},
            "vars": {"cluster_name": "outside"},
        }
    }))  # fmt: skip
    run(str(BIN / "ansible-playbook"), "-i", str(inventory), "verl_debug.cluster.cluster_up",
        "--tags", "ray_facts", cwd=tmp_path, ANSIBLE_COLLECTIONS_PATH=str(collections))  # fmt: skip
    assert (tmp_path / "inventory/artifacts/outside/nodes.json").is_file()
    assert not list(collections.rglob("artifacts"))


# Every playbook an operator runs from the checkout, by the README's and the runbook's commands.
CHECKOUT_PLAYBOOKS = sorted(
    ["cluster-up.yml", "cluster-down.yml"]
    + [str(path.relative_to(PROJECT)) for path in (PROJECT / "playbooks").glob("*.yml")]
)


@pytest.mark.parametrize("playbook", CHECKOUT_PLAYBOOKS)
def test_a_checkout_finds_its_roles_whatever_the_operators_ansible_settings(
    tmp_path: Path, playbook: str
) -> None:
    """Execution environments and shared controllers set ANSIBLE_COLLECTIONS_PATH and
    ANSIBLE_CONFIG, which replace ansible.cfg's paths: the checkout's roles must still
    resolve, from the collections/ beside each playbook."""
    config = tmp_path / "operator.cfg"
    config.write_text("[defaults]\nforks = 5\n")
    run(str(BIN / "ansible-playbook"), "-i", "localhost,", "--syntax-check", playbook,
        cwd=PROJECT, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "elsewhere"),
        ANSIBLE_CONFIG=str(config))  # fmt: skip
