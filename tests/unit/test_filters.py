"""The filters behind validation messages, the firewall and the proof of a whole cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray_debugger_proof
import ray_env
import ray_gpus
import ray_network
import ray_node_facts
import ray_node_list
import ray_nodes_api
import ray_ports
import ray_rollout
import ray_units
import ray_validate
import yaml
from ansible.errors import AnsibleFilterError

PROJECT = Path(__file__).resolve().parents[2]


def test_invalid_cidrs_keeps_only_the_bad_ones() -> None:
    values = ["10.0.0.0/24", "192.0.2.7", "2001:db8::/64", "10.0.0.0/33", "vpn", "300.1.1.1/32"]
    assert ray_network.invalid_cidrs(values) == ["10.0.0.0/33", "vpn", "300.1.1.1/32"]


def test_ports_overlapping_names_the_colliding_entries() -> None:
    ports = {"gcs": 6379, "dashboard_agent_http": 52365, "worker": "10002-19999"}
    assert ray_ports.ports_overlapping("52300-52400", ports) == ["dashboard_agent_http"]
    assert ray_ports.ports_overlapping("6000-12000", ports) == ["gcs", "worker"]
    assert ray_ports.ports_overlapping("52000-52099", ports) == []


def test_nft_ports_sorts_and_renders_ranges() -> None:
    assert ray_ports.nft_ports([8265, "10002-19999", 6379]) == "6379, 8265, 10002-19999"


def test_cidrs_of_family_splits_and_normalises() -> None:
    values = ["10.0.0.5", "10.1.0.9/16", "2001:db8::1"]
    assert ray_network.cidrs_of_family(values, 4) == ["10.0.0.5/32", "10.1.0.0/16"]
    assert ray_network.cidrs_of_family(values, 6) == ["2001:db8::1/128"]


def test_oldest_version_compares_numerically() -> None:
    assert ray_node_facts.oldest_version(["2.36", "2.9", "2.28"]) == "2.9"


# The node probe's interfaces, as `ip -json address show` lists them.
INTERFACES = {
    "lo": ["127.0.0.1", "::1"],
    "eth0": ["10.0.0.5", "fe80::1"],
    "ib-0": ["10.10.0.5", "10.20.0.5"],
}


@pytest.mark.parametrize(
    ("address", "interface"), [("10.0.0.5", "eth0"), ("10.10.0.5", "ib-0"), ("10.20.0.5", "ib-0")]
)
def test_interface_for_ip_finds_the_nic(address: str, interface: str) -> None:
    assert ray_network.interface_for_ip(INTERFACES, address) == interface


def test_interface_for_unknown_ip_names_the_interfaces() -> None:
    with pytest.raises(AnsibleFilterError, match=r"10\.9\.9\.9.*'eth0'"):
        ray_network.interface_for_ip(INTERFACES, "10.9.9.9")


def test_node_rows_are_the_rows_of_the_heads_reply_or_none() -> None:
    rows = [{"node_ip": "10.0.0.1", "state": "ALIVE", "node_id": "a"}]
    # ray_nodes_reply as ansible.builtin.uri registers /api/v0/nodes's answer.
    reply = {
        "status": 200,
        "json": {"result": True, "data": {"result": {"total": 1, "result": rows}}},
    }
    assert ray_node_list.node_rows(reply) == rows
    # A refused token or a dashboard that does not answer: no rows; the callers say why.
    assert ray_node_list.node_rows({"status": 401, "json": {"detail": "Unauthorized"}}) == []
    assert ray_node_list.node_rows({"status": -1, "msg": "Connection refused"}) == []


def test_nodes_not_ready_reports_missing_nodes_and_gpu_mismatch() -> None:
    rows = [
        {"node_ip": "10.0.0.1", "state": "ALIVE", "resources_total": {"CPU": 2.0}},
        {"node_ip": "10.0.0.2", "state": "ALIVE", "resources_total": {"GPU": 1.0}},
        {"node_ip": "10.0.0.3", "state": "DEAD", "resources_total": {"GPU": 8.0}},
    ]
    wanted = {"10.0.0.1": 0, "10.0.0.2": 8, "10.0.0.3": 8}
    assert ray_node_list.nodes_not_ready(rows, wanted) == [
        "10.0.0.2: 1 GPUs, expected 8",
        "10.0.0.3: not alive",
    ]
    assert ray_node_list.nodes_not_ready(rows[:1], {"10.0.0.1": 0}) == []


def test_nodes_not_ready_waits_out_the_old_node_of_a_restarted_ray() -> None:
    """A Ray killed and restarted at once joins under a new node id while the head still
    counts the old one alive: a proof task pinned to the old one would never run."""
    old = {"node_ip": "10.0.0.1", "node_id": "a", "state": "ALIVE", "resources_total": {}}
    new = {**old, "node_id": "b"}
    assert ray_node_list.nodes_not_ready([old, new], {"10.0.0.1": 0}) == [
        "10.0.0.1: 2 nodes alive (Ray restarted there and the head has not yet marked the"
        " old node dead)"
    ]
    assert ray_node_list.nodes_not_ready([{**old, "state": "DEAD"}, new], {"10.0.0.1": 0}) == []


def test_network_host_counts_from_the_network_address() -> None:
    assert ray_network.network_host("10.124.0.0/24", 1) == "10.124.0.1"
    assert ray_network.network_host("10.124.0.0/24", 2) == "10.124.0.2"


def test_alive_node_ids_keeps_only_live_records_of_the_address() -> None:
    # A restarted node leaves its dead record behind; only the new id proves it came back.
    rows = [
        {"node_ip": "10.0.0.2", "state": "DEAD", "node_id": "old"},
        {"node_ip": "10.0.0.2", "state": "ALIVE", "node_id": "new"},
        {"node_ip": "10.0.0.3", "state": "ALIVE", "node_id": "other"},
    ]
    assert ray_node_list.alive_node_ids(rows, "10.0.0.2") == ["new"]
    assert ray_node_list.alive_node_ids(rows, "10.0.0.9") == []


def test_nodes_not_joined_waits_for_a_new_id_at_each_address() -> None:
    rows = [
        {"node_ip": "10.0.0.2", "state": "DEAD", "node_id": "old"},
        {"node_ip": "10.0.0.2", "state": "ALIVE", "node_id": "new"},
        {"node_ip": "10.0.0.3", "state": "ALIVE", "node_id": "kept"},
    ]
    hostvars = {
        "restarted": {"ray_node_address": "10.0.0.2", "__ray_service_ids_before": ["old"]},
        "not_back_yet": {"ray_node_address": "10.0.0.3", "__ray_service_ids_before": ["kept"]},
        "missing": {"ray_node_address": "10.0.0.4"},
    }
    # What the join wait sends the node_list module: a host whose Ray did not run had no ids.
    ids_before = ray_node_list.ids_before(hostvars, list(hostvars))
    assert ids_before == {"10.0.0.2": ["old"], "10.0.0.3": ["kept"], "10.0.0.4": []}
    assert ray_nodes_api.nodes_not_joined(rows, ids_before) == ["10.0.0.3", "10.0.0.4"]
    assert ray_nodes_api.nodes_not_joined([], {"10.0.0.2": []}) == ["10.0.0.2"]
    assert ray_nodes_api.nodes_not_joined(rows, {"10.0.0.3": []}) == []


# As printed by nvidia-smi 550 on an 8 x H100 node (two rows kept) and its banner's first lines.
H100_QUERY = (
    "0, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n1, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
)
H100_BANNER = """Tue Mar 12 10:00:00 2024
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""


def test_gpu_inventory_reads_count_model_memory_driver_and_cuda() -> None:
    gpus = ray_gpus.gpu_inventory(H100_QUERY, H100_BANNER)
    assert gpus == {
        "count": 2,
        "models": ["NVIDIA H100 80GB HBM3"],
        "memory_mib": 81559,
        "drivers": ["550.54.15"],
        "cuda": "12.4",
    }
    assert ray_gpus.gpu_summary(gpus) == (
        "2 x NVIDIA H100 80GB HBM3 (79 GiB), driver 550.54.15, CUDA 12.4"
    )


def test_stand_in_gpus_say_so_in_every_gpu_line() -> None:
    """ray_stand_in_gpus (tests): what a stand-in nvidia-smi answered is no GPU."""
    gpus = ray_gpus.gpu_inventory(H100_QUERY, H100_BANNER)
    line = "2 x NVIDIA H100 80GB HBM3 (79 GiB), driver 550.54.15, CUDA 12.4"
    assert ray_gpus.gpu_summary(gpus, True) == f"stand-in: {line}"
    assert ray_gpus.gpu_summary(gpus, "false") == line
    none = ray_gpus.gpu_inventory("", "")
    nodes = [
        {"inventory_hostname": "head", "ray_node_gpus": none, "ray_node_gpu_count": 0},
        {"inventory_hostname": "w1", "ray_node_gpus": gpus, "ray_node_gpu_count": 2},
        {"inventory_hostname": "w2", "ray_node_gpus": gpus, "ray_node_gpu_count": "2",
         "ray_stand_in_gpus": "true"},
    ]  # fmt: skip
    assert ray_gpus.gpu_node_lines(nodes) == [f"w1: {line}", f"w2: stand-in: {line}"]
    assert ray_gpus.gpu_total(nodes) == "4 (2 stand-in)"
    assert ray_gpus.gpu_total(nodes[:2]) == "2"


def test_gpu_inventory_reads_a_name_with_commas_whole() -> None:
    """nvidia-smi quotes no value: the name is what lies between the index and the memory."""
    gpus = ray_gpus.gpu_inventory("0, NVIDIA H100, 80GB HBM3,vGPU, 81559, 550.54.15\n", "")
    assert gpus["models"] == ["NVIDIA H100, 80GB HBM3,vGPU"]
    assert (gpus["memory_mib"], gpus["drivers"]) == (81559, ["550.54.15"])


def test_gpu_inventory_names_a_line_that_is_not_a_gpu() -> None:
    with pytest.raises(AnsibleFilterError, match=r"unexpected nvidia-smi output: 'No devices"):
        ray_gpus.gpu_inventory("No devices were found\n", "")


def test_gpu_inventory_of_a_node_without_nvidia_smi() -> None:
    gpus = ray_gpus.gpu_inventory("", "")
    assert gpus["count"] == 0
    assert ray_gpus.gpu_summary(gpus) == "no GPUs"


def test_gpu_mismatches_names_each_differing_node() -> None:
    h100 = ray_gpus.gpu_inventory(H100_QUERY, H100_BANNER)
    older = ray_gpus.gpu_inventory(H100_QUERY.replace("550.54.15", "535.104.05"), H100_BANNER)
    a100 = ray_gpus.gpu_inventory("0, NVIDIA A100-SXM4-80GB, 81920, 550.54.15\n", H100_BANNER)
    cpu = ray_gpus.gpu_inventory("", "")
    assert ray_gpus.gpu_mismatches({"w1": h100, "w2": h100, "head": cpu}) == []
    assert ray_gpus.gpu_mismatches({"w1": h100, "w2": older}) == [
        "driver versions differ: w1: 550.54.15; w2: 535.104.05"
    ]
    assert ray_gpus.gpu_mismatches({"w1": h100, "w3": a100}) == [
        "GPU models differ: w1: NVIDIA H100 80GB HBM3; w3: NVIDIA A100-SXM4-80GB"
    ]


def test_routable_addresses_drop_loopback_link_local_and_repeats() -> None:
    addresses = ["10.0.0.5", "127.0.0.1", "10.10.0.5", "fe80::1", "::1", "fd00::5", "10.0.0.5", ""]
    assert ray_network.routable_addresses(addresses) == ["10.0.0.5", "10.10.0.5", "fd00::5"]


def test_node_record_keeps_what_a_later_run_needs() -> None:
    node = {
        "inventory_hostname": "gpu1",
        "ray_node_address": "10.0.0.11",
        "ray_node_addresses": ["10.0.0.11", "10.10.0.11"],
        "ray_node_python": {"version": "3.11", "machine": "x86_64", "glibc": "2.36"},
        "ray_node_gpus": {"count": 8},
        "ray_node_gpu_count": "8",
        "ray_node_ib_hcas": ["mlx5_0"],
        "ray_node_ifname": "ens5",
        "ray_node_cpus": "96",
        "ansible_facts": {"ignored": True},
    }
    record = ray_node_facts.node_record([node])
    assert record == {
        "gpu1": {
            "address": "10.0.0.11",
            "addresses": ["10.0.0.11", "10.10.0.11"],
            "python": {"version": "3.11", "machine": "x86_64", "glibc": "2.36"},
            "gpus": {"count": 8},
            "gpu_count": 8,
            "ib_hcas": ["mlx5_0"],
            "ifname": "ens5",
            "cpus": 96,
        }
    }


@pytest.mark.parametrize("name", ["verl-debug", "ray", "a.b_c-1", "x" * 64])
def test_plain_names_pass(name: str) -> None:
    assert ray_validate.path_problems({"cluster_name": name}, {}) == []


@pytest.mark.parametrize("name", ["../../escape", "a/b", "..", ".hidden", "", "a b", "x" * 65])
def test_names_that_are_paths_are_refused(name: str) -> None:
    (problem,) = ray_validate.path_problems({"cluster_name": name}, {})
    assert problem.startswith(f"cluster_name: {name!r} is not a plain name")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc", "is a top-level directory"),
        ("/", "is a top-level directory"),
        ("opt/ray", "not a normalised absolute path"),
        ("/opt/../etc/x", "not a normalised absolute path"),
        ("/opt//ray", "not a normalised absolute path"),
    ],
)
def test_directories_purge_removes_must_be_owned_paths(path: str, why: str) -> None:
    (problem,) = ray_validate.path_problems({}, {"ray_config_dir": path})
    assert problem.startswith(f"ray_config_dir: {path!r}") and why in problem


def test_an_owned_directory_passes() -> None:
    assert ray_validate.path_problems({}, {"ray_install_dir": "/opt/ray-cluster"}) == []


# The validate play's defaults: what every host gets for a variable it does not set.
PLAY_DEFAULTS = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())


def test_hosts_that_set_nothing_have_no_problems() -> None:
    hostvars: dict[str, dict[str, object]] = {"h": {}, "w": {}}
    assert ray_validate.host_problems(hostvars, ["h", "w"], "h", PLAY_DEFAULTS) == []


def test_every_host_with_a_problem_is_named_with_all_of_its_problems() -> None:
    """One check for every host: a bad worker does not hide another, nor one problem another."""
    hostvars = {
        "h": {"ray_auth_token": "x" * 40},
        "w1": {"debug_mode": "legacy", "ray_num_gpus": "two", "ray_auth_token": "short"},
        "w2": {"ray_trusted_cidrs": ["10.0.0.300/32"], "ray_nccl_ib_gid_index": "3a"},
        "w3": {},
    }
    assert ray_validate.host_problems(hostvars, list(hostvars), "h", PLAY_DEFAULTS) == [
        "w1: debug_mode 'legacy' differs from the head's 'post_mortem'; one cluster runs one"
        " debug mode. ray_num_gpus 'two' must be a whole number of GPUs, or empty to detect"
        " them. ray_auth_token is 5 characters; use at least 32 (e.g. openssl rand -hex 32).",
        "w2: ray_trusted_cidrs entries ['10.0.0.300/32'] are not CIDRs (e.g. 10.0.0.0/24,"
        " 192.0.2.7/32, 2001:db8::/64). ray_nccl_ib_gid_index '3a' must be a GID index (a whole"
        " number), or empty to use the one found.",
    ]


def test_the_head_sets_what_the_workers_must_agree_with() -> None:
    hostvars = {"h": {"debug_mode": "off", "ray_auth_mode": "disabled"}, "w": {}}
    assert ray_validate.host_problems(hostvars, ["h", "w"], "h", PLAY_DEFAULTS) == [
        "w: debug_mode 'post_mortem' differs from the head's 'off'; one cluster runs one debug"
        " mode. ray_auth_mode 'token' differs from the head's 'disabled'; every node of a"
        " cluster must agree."
    ]


def test_a_token_is_described_and_never_shown() -> None:
    secret = "has a space " + "x" * 40
    (problem,) = ray_validate.host_problems({"h": {"ray_auth_token": secret}}, ["h"], "h",
                                            PLAY_DEFAULTS)  # fmt: skip
    assert problem == "h: ray_auth_token contains whitespace; Ray compares tokens byte for byte."
    # Without token auth the token is not used, so not checked.
    off = {"h": {"ray_auth_token": "short", "ray_auth_mode": "disabled"}}
    assert ray_validate.host_problems(off, ["h"], "h", PLAY_DEFAULTS) == []


def test_a_value_only_the_roles_can_resolve_is_the_plays_default() -> None:
    """An inventory value that refers to a role default is Undefined in hostvars before the
    roles load; the play's own default stands for it, as `default()` did in Jinja."""
    from jinja2 import Undefined

    hostvars = {"h": {"ray_debugger_port_range": Undefined(name="ray_base")}}
    assert ray_validate.host_problems(hostvars, ["h"], "h", PLAY_DEFAULTS) == []


def node(name: str, cpus: int, gpus: int) -> dict[str, object]:
    return {"inventory_hostname": name, "ray_node_cpus": cpus, "ray_node_gpu_count": gpus}


def test_debugger_port_shortfalls_count_cpus_and_colocated_gpu_workers() -> None:
    nodes = [node("small", 8, 0), node("gpu", 16, 8), node("edge", 14, 2)]
    assert ray_node_facts.debugger_port_shortfalls(nodes, "52000-52019", 3) == [
        "gpu may pause 40 worker processes at once (16 CPUs + 8 GPUs x 3)",
    ]
    assert ray_node_facts.debugger_port_shortfalls(nodes, "52000-52099", 3) == []


def test_verl_fit_needs_colocated_cpus_on_gpu_nodes_only() -> None:
    nodes = [node("cpu-only", 2, 0), node("gpu", 16, 8), node("fits", 24, 8)]
    assert ray_node_facts.verl_fit_shortfalls(nodes, 3) == [
        "gpu has 8 GPUs but 16 CPUs; verl reserves 8 x 3 = 24 CPUs"
    ]
    assert ray_node_facts.verl_fit_shortfalls(nodes, 2) == []


def test_a_venv_syncs_when_its_lock_or_its_packages_differ() -> None:
    def node(name: str, lock: str | None, drift: list[str]) -> dict:
        return {"inventory_hostname": name, "ray_node_venv": {"lock_sha256": lock, "drift": drift}}

    nodes = [
        node("holds-it", "abc", []),
        node("older-lock", "old", []),
        node("no-venv", None, []),
        node("package-changed", "abc", ["ray==2.60.0 (the venv has 2.59.0)"]),
    ]
    assert ray_node_facts.venvs_to_sync(nodes, "abc") == [
        "older-lock",
        "no-venv",
        "package-changed",
    ]


def test_pythons_outside_names_each_node_verl_cannot_run_on() -> None:
    nodes = [
        {"inventory_hostname": host, "ray_node_python": {"version": version}}
        for host, version in (("old", "3.9"), ("ok", "3.12"), ("new", "3.13"))
    ]
    assert ray_node_facts.pythons_outside(nodes, ">=3.10,<3.13") == [
        "old: Python 3.9",
        "new: Python 3.13",
    ]
    assert ray_node_facts.pythons_outside(nodes, ">=3.9") == []


def test_nccl_env_without_rdma_disables_ib() -> None:
    assert ray_env.nccl_env("WARN", [], [], "") == {"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1"}


def test_nccl_env_on_infiniband_names_the_hcas_and_no_gid() -> None:
    env = ray_env.nccl_env("WARN", ["mlx5_0", "mlx5_1"], [], "")
    assert env == {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_0,mlx5_1"}


def test_nccl_env_on_roce_sets_the_gid_index_found() -> None:
    env = ray_env.nccl_env("WARN", ["mlx5_0"], ["mlx5_0"], "3")
    assert env == {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_0", "NCCL_IB_GID_INDEX": "3"}
    # RoCE without a routable GID: nothing is guessed (the facts play warns instead).
    assert "NCCL_IB_GID_INDEX" not in ray_env.nccl_env("WARN", ["mlx5_0"], ["mlx5_0"], "")


def test_nccl_env_overrides_win_over_detection() -> None:
    env = ray_env.nccl_env("INFO", ["mlx5_0"], ["mlx5_0"], "3", "=mlx5_4", "5")
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "=mlx5_4", "NCCL_IB_GID_INDEX": "5"}


PROOF_NODES = {"10.0.0.10": "head", "10.0.0.11": "worker1"}


DEBUG_MODES = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())[
    "ray_debug_modes"
]


def proof(port: int | None, mode: str = "legacy", **extra: object) -> dict[str, object]:
    """What cluster_proof.py reports from a node whose Ray runs in `mode`."""
    names = ray_debugger_proof.debug_variable_names(DEBUG_MODES)
    debug_env = {name: DEBUG_MODES[mode]["env"].get(name) for name in names}
    return {
        "ray": "2.60.0",
        "debug_env": debug_env,
        "port": port,
        "paused": False,
        "reserved": "52000-52019",
        **extra,
    }


def judge(report: dict, mode: str) -> dict[str, list[str]]:
    return ray_debugger_proof.debugger_proof_problems(
        report, PROOF_NODES, mode, "52000-52019", DEBUG_MODES
    )


def test_debugger_proof_passes_ports_inside_the_range() -> None:
    report = {"10.0.0.10": proof(52000), "10.0.0.11": proof(52019)}
    judged = judge(report, "legacy")
    assert judged == {"problems": [], "unreserved": []}


def test_debugger_proof_names_node_ray_version_and_cause() -> None:
    report = {
        "10.0.0.10": proof(41234, "post_mortem", reserved="40000"),
        "10.0.0.11": proof(
            None, "post_mortem", error="AttributeError: module has no attribute '_RemotePdb'"
        ),
    }
    judged = judge(report, "post_mortem")
    assert judged["problems"] == [
        "head (10.0.0.10), Ray 2.60.0: a post_mortem debugger listened on port 41234, outside "
        "ray_debugger_port_range 52000-52019; the port hook does not work on this Ray",
        "worker1 (10.0.0.11), Ray 2.60.0: AttributeError: module has no attribute '_RemotePdb'",
    ]
    assert judged["unreserved"] == ["head"]


def test_debugger_proof_names_a_node_whose_stack_the_dashboard_cannot_read() -> None:
    refused = "HTTP 500: Failed to execute: py-spy dump -p 4242 ... Permission denied"
    report = {"10.0.0.10": proof(52000, stack="ok"), "10.0.0.11": proof(52001, stack=refused)}
    assert judge(report, "legacy")["problems"] == [
        "worker1 (10.0.0.11), Ray 2.60.0: the dashboard could not read a worker's stack here"
        f" (py-spy, run by the node's dashboard agent): {refused}"
    ]


def test_debugger_proof_names_a_task_that_failed_and_nothing_else() -> None:
    """A proof task that never ran reports its error alone: no mode or port range to judge."""
    failed = "the proof task failed: TaskUnschedulableError('The node specified ...')"
    report = {"10.0.0.10": proof(52000), "10.0.0.11": {"error": failed}}
    assert judge(report, "legacy") == {
        "problems": [f"worker1 (10.0.0.11), Ray ?: {failed}"],
        "unreserved": [],
    }


def test_debugger_proof_reports_silent_nodes() -> None:
    judged = judge({}, "legacy")
    assert judged["problems"][0] == "head (10.0.0.10): no debugger proof came back from this node"


def test_debugger_proof_in_mode_off_fails_a_breakpoint_that_waits() -> None:
    report = {
        "10.0.0.10": proof(None, "off", paused=True, reserved=""),
        "10.0.0.11": proof(None, "off"),
    }
    judged = judge(report, "off")
    assert judged == {
        "problems": [
            "head (10.0.0.10), Ray 2.60.0: breakpoint() waited for a debugger in mode off"
        ],
        "unreserved": [],
    }


def test_debugger_proof_names_a_node_whose_ray_runs_in_another_mode() -> None:
    """A switch to legacy whose restart never happened on worker1: its Ray still runs
    post_mortem, whatever its files say, and the run fails naming it."""
    report = {"10.0.0.10": proof(52000), "10.0.0.11": proof(52001, "post_mortem")}
    assert judge(report, "legacy")["problems"] == [
        "worker1 (10.0.0.11), Ray 2.60.0: Ray runs with RAY_DEBUG unset, RAY_DEBUG_ON_DEMAND=1, "
        "RAY_DEBUG_POST_MORTEM=1, not legacy's RAY_DEBUG=legacy, RAY_DEBUG_ON_DEMAND=1, "
        "RAY_DEBUG_POST_MORTEM unset: "
        "it did not restart on its configuration; re-run cluster-up, which restarts a Ray "
        "older than its configuration"
    ]


def test_auth_env_points_token_mode_at_the_token_file() -> None:
    assert ray_env.auth_env("token", "/etc/ray/auth_token") == {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": "/etc/ray/auth_token",
    }
    assert ray_env.auth_env("disabled", "/etc/ray/auth_token") == {"RAY_AUTH_MODE": "disabled"}


@pytest.mark.parametrize(
    ("state", "running"),
    [("active", True), ("activating", True), ("deactivating", True), ("reloading", True),
     ("inactive", False), ("failed", False)],
)  # fmt: skip
def test_unit_running_is_any_state_but_stopped_or_failed(state: str, running: bool) -> None:
    assert ray_units.unit_running({"ActiveState": state, "UnitFileState": "enabled"}) is running


def test_a_unit_not_read_is_not_running() -> None:
    assert not ray_units.unit_running({})


def test_unit_up_reads_systemctl_show_as_lines_or_a_mapping() -> None:
    """Both readers of systemd (ray_service's own read, the facts play's probe) judge a unit
    by the same three properties: running, enabled at boot, no reload pending."""
    up = ["ActiveState=active", "UnitFileState=enabled", "NeedDaemonReload=no", "written=17"]
    assert ray_units.unit_up(up)
    assert ray_units.unit_up(dict(line.split("=", 1) for line in up))
    for stale in ("ActiveState=failed", "UnitFileState=disabled", "NeedDaemonReload=yes"):
        name = stale.split("=")[0]
        assert not ray_units.unit_up([stale, *(line for line in up if not line.startswith(name))])
    assert not ray_units.unit_up([])
    assert not ray_units.unit_up({})


def test_a_stop_fails_unless_the_unit_does_not_exist() -> None:
    # ansible.builtin.systemd_service's message for a unit systemd does not know.
    missing = "Could not find the requested service ray-wheelhouse: host"
    assert not ray_units.stop_failed({"failed": True, "msg": missing})
    assert ray_units.stop_failed({"failed": True, "msg": "Unable to stop service ray: timeout"})
    assert not ray_units.stop_failed({"changed": True, "state": "stopped"})


def test_debug_variable_names_are_every_modes_variables_once() -> None:
    modes = yaml.safe_load((PROJECT / "roles/ray_defaults/defaults/main.yml").read_text())[
        "ray_debug_modes"
    ]
    names = ray_debugger_proof.debug_variable_names(modes)
    assert names == sorted(set(names))
    assert {"RAY_DEBUG", "RAY_DEBUG_POST_MORTEM"} <= set(names)


@pytest.mark.parametrize(
    ("batch", "workers", "batches"),
    [
        ("100%", 2, [3, 2]),
        ("1", 2, [2, 1]),
        (1, 8, [2, 1]),
        ("25%", 8, [3, 2]),
        ("25%", 3, [2, 1]),
        ("10", 0, [11, 10]),
    ],
)
def test_the_head_starts_with_the_first_batch_of_workers(
    batch: str | int, workers: int, batches: list[int]
) -> None:
    """`serial` of the start play: the head and one batch, then a batch at a time; a
    percentage of the inventory's workers rounds down as Ansible's does, to one at least."""
    assert ray_rollout.start_batches(batch, workers) == batches
