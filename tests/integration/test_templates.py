"""The node templates, rendered for each debug mode: one mode's debugger never leaks into
another's, every port is pinned from the one table, and per-node values stay per node."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.doc_commands import commands
from tests.render import TEMPLATES, render

# Its module-scoped fixtures render once: every test of the module on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_templates")

PROJECT = Path(__file__).resolve().parents[2]
MODES = ["post_mortem", "legacy", "off"]
PORTS = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())["ray_ports"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render(tmp_path_factory.mktemp("rendered"))


@pytest.fixture(scope="module")
def rendered_with_infiniband(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # mlx5_1 is a ConnectX port in Ethernet mode: RoCE, whose v2 IPv4 GID has index 3.
    return render(
        tmp_path_factory.mktemp("infiniband"),
        ray_node_ib_hcas=["mlx5_0", "mlx5_1"],
        ray_node_roce_hcas=["mlx5_1"],
        ray_node_roce_gid_index="3",
    )


@pytest.fixture(scope="module")
def rendered_without_auth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render(tmp_path_factory.mktemp("no_auth"), ray_auth_mode="disabled")


@pytest.fixture(scope="module")
def rendered_from_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render(tmp_path_factory.mktemp("collection"), ray_from_collection=True)


def read(rendered: Path, mode: str, name: str) -> str:
    return (rendered / mode / name).read_text()


@pytest.mark.parametrize("mode", MODES)
def test_templates_start_with_the_managed_marker(rendered: Path, mode: str) -> None:
    for template in TEMPLATES:
        name = Path(template).name.removesuffix(".j2")
        assert "Ansible managed" in "".join(read(rendered, mode, name).splitlines()[:3]), name


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_carries_only_its_own_debugger(rendered: Path, mode: str) -> None:
    env = read(rendered, mode, "ray.env")
    unit = read(rendered, mode, "ray.service")
    profile = read(rendered, mode, "profile.sh")
    assert ("RAY_DEBUG=legacy" in env) == (mode == "legacy")
    assert ("--ray-debugger-external" in unit) == (mode == "legacy")
    assert ("RAY_DEBUG_POST_MORTEM=1" in env) == (mode == "post_mortem")
    # Off means off: a forgotten breakpoint() must not wait in Ray's default debugger.
    assert ("RAY_DEBUG=0" in env) == (mode == "off")
    assert ("RAY_DEBUG=legacy" in profile.replace("'", "")) == (mode == "legacy")
    assert f"({mode} debugging)" in unit


def test_worker_unit_pins_every_port_and_joins_the_head(rendered: Path) -> None:
    unit = read(rendered, "legacy", "ray.service")
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    low, high = PORTS["worker"].split("-")
    for flag in [
        f"--node-manager-port={PORTS['node_manager']}",
        f"--object-manager-port={PORTS['object_manager']}",
        f"--runtime-env-agent-port={PORTS['runtime_env_agent']}",
        f"--dashboard-agent-grpc-port={PORTS['dashboard_agent_grpc']}",
        f"--dashboard-agent-listen-port={PORTS['dashboard_agent_http']}",
        f"--metrics-export-port={PORTS['metrics_export']}",
        f"--min-worker-port={low}",
        f"--max-worker-port={high}",
        "--num-gpus=2",
        "--node-ip-address=10.0.0.11",
        "--block",
    ]:
        assert flag in exec_start.split(), flag
    assert "--head" not in exec_start
    assert "Restart=always" in unit


def test_wheelhouse_is_served_on_the_heads_cluster_address_and_guarded_port(
    rendered: Path,
) -> None:
    unit = read(rendered, "off", "ray-wheelhouse.service")
    assert (
        "ExecStart=/usr/bin/python3 /var/cache/ray-cluster/wheelhouse/wheelhouse_server.py"
        " --bind 10.0.0.10"
        f" --directory /var/cache/ray-cluster/wheelhouse {PORTS['wheelhouse']}\n"
    ) in unit
    assert "RuntimeMaxSec=" in unit
    assert f" {PORTS['wheelhouse']}, " in read(rendered, "off", "firewall.nft")


def test_environment_names_this_nodes_interface(rendered: Path) -> None:
    env = read(rendered, "post_mortem", "ray.env")
    assert "NCCL_SOCKET_IFNAME=ens5" in env
    assert "GLOO_SOCKET_IFNAME=ens5" in env
    assert env.splitlines()[-1] != ""
    assert "PATH=/opt/ray-cluster/venv/bin:" in env


def test_firewall_guards_the_port_table_for_trusted_sources(rendered: Path) -> None:
    rules = read(rendered, "off", "firewall.nft")
    table = "elements = { 6379, 6380, 6381, 6382, 6383, 6384, 6385, 8265, 10001, 10002-19999,"
    assert table in rules
    assert "52000-52099, 52365" in rules
    assert "10.0.0.10/32, 10.0.0.11/32, 198.51.100.0/24" in rules
    assert "2001:db8::/64" in rules
    assert "ct state established,related accept" in rules
    assert "flush ruleset" not in rules


ATTACH_HOW = {
    "post_mortem": "Ray Distributed Debugger",
    "legacy": "lists paused breakpoints; pick one by number",
    "off": "no debugger is configured",
}


@pytest.mark.parametrize("mode", MODES)
def test_runbook_says_how_to_attach_in_this_mode_only(rendered: Path, mode: str) -> None:
    runbook = read(rendered, mode, "RUNBOOK.md")
    assert f"| Debug mode | **{mode}** |" in runbook
    for other, words in ATTACH_HOW.items():
        assert (words in runbook) == (other == mode), other


def test_runbook_from_the_collection_prints_only_what_runs_there(
    rendered: Path, rendered_from_collection: Path
) -> None:
    """The collection carries cluster-up.yml and cluster-down.yml but not the controller tools
    of the probe and the collective check: those are named, not printed as commands to run.
    Its artifacts are beside the inventory, not in the directory it runs from."""
    from_checkout = commands(read(rendered, "legacy", "RUNBOOK.md"))
    runbook = read(rendered_from_collection, "legacy", "RUNBOOK.md")
    from_collection = commands(runbook)
    assert any("playbooks/debug_probe.yml" in command for command in from_checkout)
    assert [command for command in from_collection if "playbooks/" in command] == []
    beside_inventory = f"{PROJECT}/tests/integration/inventory/artifacts/"
    assert any(beside_inventory in command for command in from_collection)
    assert [
        command.replace(f"{PROJECT}/tests/integration/artifacts/", beside_inventory)
        for command in from_checkout
        if "playbooks/" not in command
    ] == from_collection
    assert "from the installed collection that made this cluster" in runbook
    assert "run them from a\nray-cluster checkout" in runbook


def test_runbook_sends_post_mortem_users_on_python_3_12_and_newer_nowhere_else(
    tmp_path: Path,
) -> None:
    """The venv's post-mortem hook hands debugpy the exception Ray loses on 3.12+, so the
    runbook no longer sends those clusters to legacy for crashes."""
    late = render(tmp_path, ray_cluster_python={"version": "3.13", "machine": "x86_64"})
    runbook = read(late, "post_mortem", "RUNBOOK.md")
    assert "A task that raises\nan uncaught exception, or calls `breakpoint()`, pauses" in runbook
    assert "54044" not in runbook and "switch to legacy" not in runbook


def test_runbook_draws_the_cluster_for_mermaid(rendered: Path) -> None:
    runbook = read(rendered, "legacy", "RUNBOOK.md")
    diagram = runbook.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert diagram.startswith("flowchart LR")
    assert 'n1["rc-head 10.0.0.10<br/>head: GCS :6379, dashboard :8265' in diagram
    assert 'n2["localhost 10.0.0.11<br/>2 GPUs<br/>' in diagram
    assert 'n2 -->|"GCS :6379"| n1' in diagram
    assert "trusted: 198.51.100.0/24, 2001:db8::/64" in diagram


def test_token_mode_points_every_ray_process_at_the_token_file(rendered: Path) -> None:
    env = read(rendered, "post_mortem", "ray.env")
    profile = read(rendered, "post_mortem", "profile.sh")
    assert "RAY_AUTH_MODE=token" in env.splitlines()
    assert "RAY_AUTH_TOKEN_PATH=/etc/ray-cluster/auth_token" in env.splitlines()
    # The value itself never goes into a file that is not 0600.
    assert "RAY_AUTH_TOKEN=" not in env + profile
    # Login shells get the path only where the file is readable (root): Ray aborts otherwise.
    assert "if [ -r /etc/ray-cluster/auth_token ]; then" in profile
    assert "export RAY_AUTH_TOKEN_PATH=/etc/ray-cluster/auth_token" in profile


def test_runbook_tells_how_to_use_the_token(rendered: Path) -> None:
    runbook = read(rendered, "legacy", "RUNBOOK.md")
    assert "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/controller/auth_token" in runbook
    assert "| Authentication | token:" in runbook


def test_disabled_auth_says_so_everywhere(rendered_without_auth: Path) -> None:
    env = read(rendered_without_auth, "post_mortem", "ray.env")
    runbook = read(rendered_without_auth, "post_mortem", "RUNBOOK.md")
    # Explicit, so a Ray release that turns tokens on by default does not lock the cluster out.
    assert "RAY_AUTH_MODE=disabled" in env.splitlines()
    assert "RAY_AUTH_TOKEN_PATH" not in env + read(rendered_without_auth, "legacy", "profile.sh")
    assert "| Authentication | DISABLED" in runbook
    assert "## Authenticate" not in runbook


def test_nccl_environment_without_infiniband(rendered: Path) -> None:
    env = read(rendered, "post_mortem", "ray.env").splitlines()
    # Without an HCA, NCCL must not probe for one; warnings name the cause of a failure.
    assert "NCCL_IB_DISABLE=1" in env
    assert "NCCL_DEBUG=WARN" in env
    assert not any(line.startswith(("NCCL_IB_HCA=", "NCCL_IB_GID_INDEX=")) for line in env)


def test_nccl_environment_names_the_hcas_found(rendered_with_infiniband: Path) -> None:
    env = read(rendered_with_infiniband, "post_mortem", "ray.env").splitlines()
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1" in env
    assert "NCCL_IB_GID_INDEX=3" in env
    assert not any(line.startswith("NCCL_IB_DISABLE=") for line in env)
    runbook = read(rendered_with_infiniband, "post_mortem", "RUNBOOK.md")
    assert "| ens5 | mlx5_0, mlx5_1; RoCE: mlx5_1, GID index 3 |" in runbook


def test_runbook_node_table_shows_gpu_facts(rendered: Path) -> None:
    runbook = read(rendered, "legacy", "RUNBOOK.md")
    gpus = "2 x NVIDIA H100 80GB HBM3 (79 GiB), driver 550.54.15, CUDA 12.4"
    assert f"| localhost | worker | 10.0.0.11 | 2 | {gpus} | ens5 | none: NCCL_IB_DISABLE=1 |" in (
        runbook
    )


def test_runbook_says_stand_in_gpus_are_stand_ins(tmp_path: Path) -> None:
    """A host with ray_stand_in_gpus (tests): its row and its box in the diagram say so."""
    runbook = read(render(tmp_path, ray_stand_in_gpus=True), "legacy", "RUNBOOK.md")
    gpus = "stand-in: 2 x NVIDIA H100 80GB HBM3 (79 GiB), driver 550.54.15, CUDA 12.4"
    assert f"| localhost | worker | 10.0.0.11 | 2 | {gpus} | ens5 |" in runbook
    assert 'n2["localhost 10.0.0.11<br/>2 GPUs (stand-in)<br/>' in runbook


def test_unit_fits_gpu_and_rdma_nodes(rendered: Path) -> None:
    unit = read(rendered, "post_mortem", "ray.service").splitlines()
    # NCCL registers its buffers with the RDMA device: a memlock cap breaks IB and RoCE.
    assert "LimitMEMLOCK=infinity" in unit
    assert "TasksMax=infinity" in unit
    # Models and checkpoints on NFS homes stay readable.
    assert "ProtectHome=read-only" in unit


def test_unit_reserves_the_debugger_range_while_ray_runs(rendered: Path) -> None:
    unit = read(rendered, "post_mortem", "ray.service").splitlines()
    # As root ("+"): the unit's own sandbox makes /proc/sys read-only; writing no bytecode
    # (-B), where root's directories would refuse Ray's own under PYTHONPYCACHEPREFIX.
    module = "/opt/ray-cluster/venv/bin/python -B -m ray_debugger_port_range"
    assert f"ExecStartPre=+{module} reserve" in unit
    assert f"ExecStopPost=+{module} release" in unit
