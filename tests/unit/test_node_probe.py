"""The facts play's node probe: InfiniBand and RoCE told apart on /sys trees laid out as the
kernel does, and the GID index RoCE v2 needs; the node's facts its action computes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import ray_units
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.verl_debug.cluster.plugins.action.node_probe import (
    ARGUMENT_SPEC,
    SCRIPT,
    node_facts,
    probe_flags,
)

PROJECT = Path(__file__).resolve().parents[2]
PROBE = PROJECT / "roles/ray_facts/files/node_probe.py"
assert PROBE == SCRIPT
_spec = importlib.util.spec_from_file_location("node_probe", PROBE)
assert _spec and _spec.loader
node_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(node_probe)

# A ConnectX port's GID table in RoCE mode, as `show_gids` prints it: v1 and v2 entries for
# the link-local address, then for the port's IPv4 address. Unused entries have no type.
ROCE_GIDS = {
    0: ("IB/RoCE v1", "fe80:0000:0000:0000:0a00:27ff:fe4e:0001"),
    1: ("RoCE v2", "fe80:0000:0000:0000:0a00:27ff:fe4e:0001"),
    2: ("IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a7b:000b"),
    3: ("RoCE v2", "0000:0000:0000:0000:0000:ffff:0a7b:000b"),
    4: ("", "0000:0000:0000:0000:0000:0000:0000:0000"),
}


def add_port(
    root: Path, device: str, port: int, link_layer: str, gids: dict[int, tuple[str, str]]
) -> None:
    base = root / device / "ports" / str(port)
    (base / "gid_attrs" / "types").mkdir(parents=True)
    (base / "gids").mkdir()
    (base / "link_layer").write_text(link_layer + "\n")
    for index, (kind, gid) in gids.items():
        (base / "gids" / str(index)).write_text(gid + "\n")
        if kind:
            (base / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
        else:
            # The kernel refuses to read the type of an unused entry (EINVAL): a directory
            # stands in for a file that cannot be read.
            (base / "gid_attrs" / "types" / str(index)).mkdir()


def test_no_rdma_devices(tmp_path: Path) -> None:
    assert node_probe.rdma_devices(tmp_path / "absent") == {
        "infiniband": [],
        "roce": [],
        "roce_gid_index": None,
    }


def test_infiniband_ports_need_no_gid_index(tmp_path: Path) -> None:
    ib_gids = {0: ("IB/RoCE v1", "fe80:0000:0000:0000:0002:c903:00f1:d2a1")}
    add_port(tmp_path, "mlx5_0", 1, "InfiniBand", ib_gids)
    add_port(tmp_path, "mlx5_1", 1, "InfiniBand", ib_gids)
    found = node_probe.rdma_devices(tmp_path)
    assert found == {"infiniband": ["mlx5_0", "mlx5_1"], "roce": [], "roce_gid_index": None}


def test_roce_ports_are_told_apart_and_get_the_v2_ipv4_gid(tmp_path: Path) -> None:
    add_port(tmp_path, "mlx5_0", 1, "InfiniBand", {})
    add_port(tmp_path, "mlx5_2", 1, "Ethernet", ROCE_GIDS)
    found = node_probe.rdma_devices(tmp_path)
    assert found == {"infiniband": ["mlx5_0"], "roce": ["mlx5_2"], "roce_gid_index": 3}


def test_the_gid_index_must_serve_every_roce_port(tmp_path: Path) -> None:
    add_port(tmp_path / "shared", "mlx5_0", 1, "Ethernet", ROCE_GIDS)
    add_port(tmp_path / "shared", "mlx5_1", 1, "Ethernet", {**ROCE_GIDS, 5: ROCE_GIDS[3]})
    assert node_probe.rdma_devices(tmp_path / "shared")["roce_gid_index"] == 3
    # The second port's IPv4 address sits at index 5 only: no one index serves both.
    add_port(tmp_path / "apart", "mlx5_0", 1, "Ethernet", ROCE_GIDS)
    shifted = {index + 2: entry for index, entry in ROCE_GIDS.items()}
    add_port(tmp_path / "apart", "mlx5_1", 1, "Ethernet", shifted)
    assert node_probe.rdma_devices(tmp_path / "apart")["roce_gid_index"] is None


def test_a_roce_port_without_an_ipv4_gid_has_no_index(tmp_path: Path) -> None:
    link_local_only = {index: ROCE_GIDS[index] for index in (0, 1)}
    add_port(tmp_path, "mlx5_0", 1, "Ethernet", link_local_only)
    found = node_probe.rdma_devices(tmp_path)
    assert found == {"infiniband": [], "roce": ["mlx5_0"], "roce_gid_index": None}


def probe_as_the_facts_play(nvidia_smi: str, driver: Path, venv: Path = Path("/nowhere")) -> dict:
    """The script on Python's standard input, as the probe's action sends it where the
    connection pipelines."""
    run = subprocess.run(
        [sys.executable, "-", "--nvidia-smi", nvidia_smi, "--driver", str(driver),
         "--venv", str(venv), "--firewall-unit", "ray-firewall-of-no-test",
         "--ray-unit", "ray-of-no-test", "--files-record", str(venv / "no-record"),
         "--proof-record", str(venv / "no-proof"), "--operator", "root",
         "--operator", "no-such-operator"],
        input=PROBE.read_text(), capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return json.loads(run.stdout)


def test_the_facts_play_passes_what_the_probe_asks() -> None:
    """The facts play's probe task against its action's spec, and the command line the action
    builds from it against the probe's own parser: an option renamed on one side fails here,
    not on a node."""
    tasks = yaml.safe_load((PROJECT / "roles/ray_facts/tasks/main.yml").read_text())
    [task] = [task for task in tasks if "verl_debug.cluster.node_probe" in task]
    given = task["verl_debug.cluster.node_probe"]
    assert set(given) == set(ARGUMENT_SPEC)
    flags = probe_flags({**given, "operators": ["ann", "bob"]})
    asked = node_probe.parser().parse_args(flags)
    assert asked.operator == ["ann", "bob"]
    assert asked.nvidia_smi == given["nvidia_smi"] and asked.nodes_api == given["nodes_api"]


def test_the_probe_runs_as_the_facts_play_runs_it(tmp_path: Path) -> None:
    probe = probe_as_the_facts_play(str(tmp_path / "no-nvidia-smi"), tmp_path / "no-driver")
    assert probe["version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert probe["cpus"] >= 1
    assert set(probe["rdma"]) == {"infiniband", "roce", "roce_gid_index"}
    # No nvidia-smi: both of its answers fail as a shell's would, and no driver is loaded.
    assert probe["nvidia"]["query"]["rc"] == probe["nvidia"]["banner"]["rc"] == 127
    assert probe["nvidia"]["driver"] is None
    assert "root" in probe["groups"]
    # System accounts and the operators named, as the user module compares them; an operator
    # without an account is missing, for ray_service to name.
    assert probe["accounts"]["root"]["group"] == "root"
    assert probe["accounts"]["root"]["home_exists"]
    assert "no-such-operator" not in probe["accounts"]
    # Where systemd answers, every unit asked for is read, installed or not.
    assert set(probe["units"]) in ({"ray-firewall-of-no-test", "ray-of-no-test"}, set())
    # No firewall unit says what it loaded; no venv recorded a lock.
    assert probe["firewall_table"] == "unknown"
    assert probe["venv"] == {"lock_sha256": None, "drift": []}
    assert probe["files"]["paths"] == {}
    assert probe["last_proof"] is None
    # Only the head is asked for its node list.
    assert probe["head_nodes"] is None


def make_venv(root: Path, lock: str, installed: list[str]) -> Path:
    """A venv as uv leaves it: the lock recorded, a .dist-info directory per distribution."""
    site = root / "lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (root / "requirements.lock").write_text(lock)
    for name in installed:
        (site / f"{name}.dist-info").mkdir()
    return root


LOCK = "aiohttp-cors==0.8.1\ncertifi==2026.10.19.post1\nray==2.60.0\n"


def test_a_venv_that_holds_its_lock_has_no_drift(tmp_path: Path) -> None:
    installed = ["aiohttp_cors-0.8.1", "certifi-2026.10.19.post1", "ray-2.60.0"]
    # The venv's own pip is beside the lock: uv pip sync keeps it, so it is no drift.
    venv = make_venv(tmp_path, LOCK, [*installed, "pip-24.0"])
    found = probe_as_the_facts_play("no-nvidia-smi", tmp_path / "no-driver", venv)["venv"]
    assert found == {"lock_sha256": hashlib.sha256(LOCK.encode()).hexdigest(), "drift": []}


def test_a_package_removed_or_changed_behind_the_tools_back_is_drift(tmp_path: Path) -> None:
    venv = make_venv(tmp_path, LOCK, ["aiohttp_cors-0.8.1", "ray-2.59.0"])
    assert node_probe.venv_packages(venv)["drift"] == [
        "certifi==2026.10.19.post1 (the venv has none)",
        "ray==2.60.0 (the venv has 2.59.0)",
    ]


def test_the_probe_reads_nvidia_smi_and_the_driver(tmp_path: Path) -> None:
    nvidia_smi = tmp_path / "nvidia-smi"
    nvidia_smi.write_text(
        '#!/bin/sh\nif [ $# -gt 0 ]; then echo "0, NVIDIA H100, 81559, 550.54.15"; '
        'else echo "| NVIDIA-SMI 550.54.15    CUDA Version: 12.4 |"; fi\n'
    )
    nvidia_smi.chmod(0o755)
    driver = tmp_path / "version"
    driver.write_text("NVRM version: 550.54.15\n")
    probe = probe_as_the_facts_play(str(nvidia_smi), driver)
    assert probe["nvidia"]["query"] == {
        "rc": 0, "stdout": "0, NVIDIA H100, 81559, 550.54.15\n", "stderr": ""
    }  # fmt: skip
    assert "CUDA Version: 12.4" in probe["nvidia"]["banner"]["stdout"]
    assert probe["nvidia"]["driver"] == str(driver)


def test_unit_states_are_read_per_unit_in_the_order_asked() -> None:
    shown = (
        "ActiveState=active\nUnitFileState=enabled\nNeedDaemonReload=no\n\n"
        "ActiveState=inactive\nUnitFileState=\nNeedDaemonReload=no\n"
    )
    running = {"ActiveState": "active", "UnitFileState": "enabled", "NeedDaemonReload": "no"}
    absent = {"ActiveState": "inactive", "UnitFileState": "", "NeedDaemonReload": "no"}
    assert node_probe.unit_states(["ray-firewall", "ray"], shown) == {
        "ray-firewall": running,
        "ray": absent,
    }
    assert node_probe.unit_states([], "") == {}


def test_the_probe_reads_what_the_unit_filters_judge() -> None:
    """The node side and the controller side of one judgement: the probe's systemctl read asks
    for every property ray_unit_up and ray_runs_older_than compare."""
    assert {*ray_units.UNIT_UP, "ExecMainStartTimestamp"} == set(node_probe.UNIT_PROPERTIES)


def test_ray_runs_older_than_a_file_it_reads_at_start() -> None:
    running = {"ActiveState": "active", "ExecMainStartTimestamp": "@1000"}
    files = {"/unit": {"mtime": 999}, "/env": {"mtime": 1001}, "/gone": None}
    assert ray_units.runs_older_than(running, files, ["/unit", "/env"])
    assert not ray_units.runs_older_than(running, files, ["/unit", "/gone", "/unread"])
    # A Ray that does not run is started, not restarted.
    assert not ray_units.runs_older_than({"ActiveState": "inactive"}, files, ["/env"])


# A row of Ray's state API (/api/v0/nodes?detail=true), with the fields the roles never read.
NODE_ROW = {
    "node_id": "5566cbc8a60e77a66412f443c552d931152400f3f7ab47fb4695ea5e",
    "node_ip": "192.0.2.2", "is_head_node": True, "state": "ALIVE", "state_message": None,
    "node_name": "192.0.2.2", "resources_total": {"CPU": 2.0, "GPU": 1.0},
    "labels": {"ray.io/node_id": "5566cbc8"}, "start_time_ms": 1, "end_time_ms": 0,
}  # fmt: skip
TOKEN = "a-cluster-token"


class Dashboard(BaseHTTPRequestHandler):
    """Answers the node list to the cluster token alone, as a head with token auth does."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_error(401)
            return
        body = json.dumps({"result": True, "data": {"result": {"result": [NODE_ROW]}}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/v0/nodes?limit=10000&detail=true"
    server.shutdown()
    thread.join(timeout=10)


def test_the_head_reads_its_node_list_with_the_token_on_its_disk(
    dashboard: str, tmp_path: Path
) -> None:
    token = tmp_path / "auth_token"
    token.write_text(TOKEN + "\n")
    read = node_probe.head_nodes(dashboard, token)
    assert read["status"] == 200
    # Shaped as read_nodes' reply, each row cut to what the roles read.
    rows = read["json"]["data"]["result"]["result"]
    assert rows == [{field: NODE_ROW[field] for field in node_probe.NODE_ROW_FIELDS}]


def test_a_refused_token_and_a_head_without_ray_answer_a_status(
    dashboard: str, tmp_path: Path
) -> None:
    stale = tmp_path / "auth_token"
    stale.write_text("another-token\n")
    assert node_probe.head_nodes(dashboard, stale)["status"] == 401
    assert node_probe.head_nodes(dashboard, None)["status"] == 401
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{unused.getsockname()[1]}/api/v0/nodes"
    assert node_probe.head_nodes(closed, None)["status"] == -1
    assert node_probe.head_nodes(None, None) is None


# A worker's reading, as the probe prints it (the parts the facts are computed from).
READING = {
    "version": "3.12", "machine": "x86_64", "glibc": "2.36", "cpus": 16,
    "network": {
        "default_ipv4": "10.0.0.5",
        "interfaces": {"lo": ["127.0.0.1", "::1"], "eth0": ["10.0.0.5", "fe80::1"],
                       "ib0": ["192.168.7.5"]},
    },
    "rdma": {"infiniband": ["mlx5_0"], "roce": ["mlx5_1"], "roce_gid_index": None},
    "nvidia": {"query": {"rc": 0, "stdout": "0, NVIDIA H100, 81559, 550.54.15\n"},
               "banner": {"rc": 0, "stdout": "Driver Version: 550.54.15  CUDA Version: 12.4"},
               "driver": "/proc/driver/nvidia/version"},
    "groups": ["root", "video"], "accounts": {"root": {"group": "root"}, "ann": {"group": "ann"}},
    "units": {}, "nft": None, "firewall_table": "unknown",
    "venv": {"lock_sha256": None, "drift": []}, "files": {"record": "r", "paths": {}},
    "last_proof": None, "head_nodes": None,
}  # fmt: skip
UNSET = {"node_ip": "", "num_gpus": "", "socket_ifname": "", "stand_in_gpus": False,
         "nccl_ib_gid_index": "", "operators": []}  # fmt: skip


def test_a_node_without_settings_takes_its_facts_from_what_it_read() -> None:
    facts = node_facts(READING, UNSET)
    assert facts["ray_node_address"] == "10.0.0.5"
    # Every routable address of every NIC, the node's own first: no loopback, no link-local.
    assert facts["ray_node_addresses"] == ["10.0.0.5", "192.168.7.5"]
    assert facts["ray_node_ifname"] == "eth0"
    assert facts["ray_node_gpus"]["count"] == facts["ray_node_gpu_count"] == 1
    assert facts["ray_node_python"] == {
        "version": "3.12", "machine": "x86_64", "glibc": "2.36", "cpus": 16,
        "rdma": READING["rdma"],
    }  # fmt: skip
    assert facts["ray_node_ib_hcas"] == ["mlx5_0", "mlx5_1"]
    assert facts["ray_node_roce_gid_index"] == ""
    assert facts["__ray_facts_roce_unrouted"] is True
    assert facts["ray_node_has_nft"] is False
    assert facts["__ray_facts_stand_in_driver"] is None
    assert facts["__ray_facts_missing_operators"] == []


def test_the_hosts_settings_override_what_the_node_read() -> None:
    settings = dict(UNSET, node_ip="192.168.7.5", num_gpus="8", nccl_ib_gid_index="3",
                    stand_in_gpus=True, operators=["ann", "bob", "bob"])  # fmt: skip
    facts = node_facts(READING, settings)
    assert facts["ray_node_address"] == "192.168.7.5"
    assert facts["ray_node_addresses"] == ["192.168.7.5", "10.0.0.5"]
    assert facts["ray_node_ifname"] == "ib0"
    assert facts["ray_node_gpu_count"] == 8
    assert facts["__ray_facts_roce_unrouted"] is False
    assert facts["__ray_facts_stand_in_driver"] == "/proc/driver/nvidia/version"
    assert facts["__ray_facts_missing_operators"] == ["bob"]
    assert node_facts(READING, dict(settings, socket_ifname="bond0"))["ray_node_ifname"] == "bond0"


def test_an_address_no_interface_carries_is_named() -> None:
    named = r"'10.9.9.9'; interfaces: \['eth0', 'ib0', 'lo'\]"
    with pytest.raises(AnsibleFilterError, match=named):
        node_facts(READING, dict(UNSET, node_ip="10.9.9.9"))
