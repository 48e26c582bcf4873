"""Bad input is refused before any node is touched, with a message naming the bad value.

Each case runs the real cluster-up.yml against an inventory whose hosts cannot be reached:
validation runs on the controller alone, so reaching a host would itself be a failure.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
UNREACHABLE = {"ansible_host": "192.0.2.1", "ansible_connection": "ssh", "ansible_timeout": 1}
# The play that makes the first change on a node: a refusal must come before it.
INSTALL_PLAY = "PLAY [Install and configure nodes]"
# For runs the facts play must let through: validation and the facts play run (tagged
# `always`), the install play's banner still prints, and its half-minute --check run is spared.
FACTS_ONLY = ("--tags", "ray_facts")


def inventory(head: list[str], workers: list[str], **variables: object) -> dict:
    hosts = {name: dict(UNREACHABLE) for name in head + workers}
    return {
        "ray_cluster": {
            "vars": variables,
            "children": {
                "ray_head": {"hosts": {name: hosts[name] for name in head}},
                "ray_workers": {"hosts": {name: hosts[name] for name in workers}},
            },
        }
    }


def cluster_up(
    tmp_path: Path, inventory_data: dict, *extra: str, playbook: str = "cluster-up.yml"
) -> subprocess.CompletedProcess:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory_data))
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run(
        [str(ansible_playbook), "-i", str(path), str(PROJECT / playbook), *extra],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )


def with_host_vars(data: dict, group: str, host: str, **variables: object) -> dict:
    data["ray_cluster"]["children"][group]["hosts"][host].update(variables)
    return data


def in_both_groups(data: dict, host: str) -> dict:
    data["ray_cluster"]["children"]["ray_workers"]["hosts"][host] = dict(UNREACHABLE)
    return data


# case: (inventory, extra arguments, words the error must contain)
CASES = {
    "unknown debug mode on the command line": (
        inventory(["h"], ["w"]),
        ["-e", "debug_mode=pdb"],
        ["value of debug_mode must be one of: post_mortem, legacy, off, got: pdb"],
    ),
    "unknown debug mode in the inventory": (
        inventory(["h"], ["w"], debug_mode="pdb"),
        [],
        ["value of debug_mode must be one of: post_mortem, legacy, off, got: pdb found in h"],
    ),
    "mode differs between hosts": (
        with_host_vars(inventory(["h"], ["w"]), "ray_workers", "w", debug_mode="legacy"),
        [],
        ["debug_mode 'legacy' differs from the head's 'post_mortem'"],
    ),
    "no head": (
        inventory([], ["w1", "w2"]),
        [],
        ["group 'ray_head' must hold exactly one host, found 0"],
    ),
    "two heads": (
        inventory(["h1", "h2"], ["w"]),
        [],
        ["group 'ray_head' must hold exactly one host, found 2", "h1", "h2"],
    ),
    "host in both groups": (
        in_both_groups(inventory(["h"], ["w"]), "h"),
        [],
        ["hosts ['h'] are in both 'ray_head' and 'ray_workers'"],
    ),
    # One task checks the groups, the batch, the join wait and renamed variables: every
    # problem is named in one run.
    "two heads and a bad batch": (
        inventory(["h1", "h2"], ["w"]),
        ["-e", "ray_worker_batch=0"],
        [
            "group 'ray_head' must hold exactly one host, found 2",
            "ray_worker_batch '0' is not valid",
        ],
    ),
    "bad CIDR": (
        inventory(["h"], ["w"], ray_trusted_cidrs=["10.0.0.0/8", "10.0.0.300/32"]),
        [],
        ["ray_trusted_cidrs entries ['10.0.0.300/32'] are not CIDRs"],
    ),
    "malformed range": (
        inventory(["h"], ["w"], ray_debugger_port_range="52000:52099"),
        [],
        ["port range '52000:52099' is malformed: expected 'LOW-HIGH', e.g. '52000-52099'"],
    ),
    "reversed range": (
        inventory(["h"], ["w"], ray_debugger_port_range="52099-52000"),
        [],
        ["port range '52099-52000' is reversed"],
    ),
    "single-port debugger range": (
        inventory(["h"], ["w"], ray_debugger_port_range="52000"),
        [],
        ["ray_debugger_port_range: '52000' is a single port;", "as a range, e.g. 52000-52000."],
    ),
    "range overlaps Ray's ports": (
        inventory(["h"], ["w"], ray_debugger_port_range="52300-52400"),
        [],
        ["'52300-52400' overlaps Ray's own ports dashboard_agent_http"],
    ),
    "unknown auth mode on the command line": (
        inventory(["h"], ["w"]),
        ["-e", "ray_auth_mode=password"],
        ["value of ray_auth_mode must be one of: token, disabled, got: password"],
    ),
    "unknown auth mode in the inventory": (
        inventory(["h"], ["w"], ray_auth_mode="off"),
        [],
        ["value of ray_auth_mode must be one of: token, disabled, got: off found in w"],
    ),
    "auth mode differs between hosts": (
        with_host_vars(inventory(["h"], ["w"]), "ray_workers", "w", ray_auth_mode="disabled"),
        [],
        ["ray_auth_mode 'disabled' differs from the head's 'token'"],
    ),
    "short token": (
        inventory(["h"], ["w"], ray_auth_token="hunter2-short"),
        [],
        ["ray_auth_token is 13 characters; use at least 32"],
    ),
    "token with whitespace": (
        inventory(["h"], ["w"], ray_auth_token="0123456789abcdef 0123456789abcdef0"),
        [],
        ["ray_auth_token contains whitespace"],
    ),
    "worker batch of zero": (
        inventory(["h"], ["w"]),
        ["-e", "ray_worker_batch=0"],
        ["ray_worker_batch '0' is not valid; use a number of workers"],
    ),
    "worker batch over 100%": (
        inventory(["h"], ["w"]),
        ["-e", "ray_worker_batch=150%"],
        ["ray_worker_batch '150%' is not valid"],
    ),
    "worker batch in the inventory": (
        inventory(["h"], ["w"], ray_worker_batch=1),
        [],
        ["ray_worker_batch is set in the inventory for w", "-e ray_worker_batch=N"],
    ),
    "cluster name that escapes artifacts/": (
        inventory(["h"], ["w"]),
        ["-e", "cluster_name=../../escape"],
        ["cluster_name: '../../escape' is not a plain name"],
    ),
    "unit name with a slash": (
        inventory(["h"], ["w"], ray_unit="ray/../../x"),
        [],
        ["ray_unit: 'ray/../../x' is not a plain name"],
    ),
    "config directory purge would remove": (
        inventory(["h"], ["w"], ray_config_dir="/etc"),
        [],
        ["ray_config_dir: '/etc' is a top-level directory"],
    ),
    "relative install directory": (
        inventory(["h"], ["w"], ray_install_dir="opt/../ray"),
        [],
        ["ray_install_dir: 'opt/../ray' is not a normalised absolute path"],
    ),
    "GPU count not a number": (
        with_host_vars(inventory(["h"], ["w"]), "ray_workers", "w", ray_num_gpus="eight"),
        [],
        ["w: ", "ray_num_gpus 'eight' must be a whole number"],
    ),
    "home protection unknown to systemd": (
        with_host_vars(
            inventory(["h"], ["w"]), "ray_workers", "w", ray_service_protect_home="hidden"
        ),
        [],
        [
            "value of ray_service_protect_home must be one of: read-only, no, tmpfs, yes,",
            "got: hidden found in w",
        ],
    ),
    "a flag that is not a boolean": (
        with_host_vars(inventory(["h"], ["w"]), "ray_workers", "w", ray_nft_enabled="maybe"),
        [],
        ["argument 'ray_nft_enabled' is of type str found in 'w'", "not a valid boolean"],
    ),
    "a variable under its old name": (
        inventory(["h"], ["w"], ray_firewall_enabled=False),
        [],
        ["ray_firewall_enabled is now ray_nft_enabled (set for h, w). Rename it where you set it"],
    ),
    "task limit not a number": (
        inventory(["h"], ["w"], ray_service_tasks_max="lots"),
        [],
        ["ray_service_tasks_max 'lots' (h, w) is not valid; use infinity, a number of tasks"],
    ),
    "join poll interval of zero": (
        inventory(["h"], ["w"]),
        ["-e", "ray_join_poll_interval=0"],
        [
            "ray_join_poll_interval '0' and ray_join_timeout '180' are not valid; the poll interval"
            " must be 1 s or more, and the timeout at least one interval."
        ],
    ),
    "GID index not a number": (
        inventory(["h"], ["w"], ray_nccl_ib_gid_index="three"),
        [],
        ["ray_nccl_ib_gid_index 'three' must be a GID index"],
    ),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_input_is_refused_before_any_node(tmp_path: Path, case: str) -> None:
    data, extra, messages = CASES[case]
    run = cluster_up(tmp_path, data, *extra)
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "PLAY [Gather node facts]" not in output, "validation let a node be contacted"
    for message in messages:
        assert message in " ".join(output.split()), output[-3000:]
    # A rejected token is described, never echoed.
    assert "hunter2" not in output and "0123456789abcdef 0123" not in output


@pytest.mark.parametrize(
    "playbook",
    [
        "playbooks/collective_check.yml",
        "playbooks/debug_probe.yml",
        "cluster-down.yml",
        "playbooks/evidence.yml",
    ],
)
def test_the_playbooks_for_a_running_cluster_validate_it_first(
    tmp_path: Path, playbook: str
) -> None:
    """They import playbooks/validate.yml first (the first two through playbooks/facts.yml),
    and no play after it starts."""
    data = inventory(["h1", "h2"], ["w"], ray_trusted_cidrs=["10.0.0.300/32"])
    run = cluster_up(tmp_path, data, playbook=playbook)
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    plays = re.findall(r"PLAY \[(.*?)\]", output)
    assert plays == ["Validate the inventory and variables"], "validation let a node be contacted"
    assert "group 'ray_head' must hold exactly one host, found 2" in output, output[-3000:]


def local_nodes(**worker_vars: object) -> dict:
    """An inventory of two 'nodes' that are this machine, reached without SSH or sudo.

    A check that wrongly let the play go on would install on this machine: the tests that
    can run with --check do, and every path the roles write to points into a scratch dir.
    """
    local = {
        "ray_install_dir": "/nonexistent/ray-cluster-test/opt",
        "ray_config_dir": "/nonexistent/ray-cluster-test/etc",
        "ray_nft_enabled": False,
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,
        "ray_base_python": sys.executable,
        "ray_node_ip": "127.0.0.1",
        "ray_socket_ifname": "lo",
    }
    data = inventory(["n1"], ["n2"])
    data["ray_cluster"]["children"]["ray_head"]["hosts"]["n1"] = dict(local)
    data["ray_cluster"]["children"]["ray_workers"]["hosts"]["n2"] = dict(local, **worker_vars)
    return data


def python_reporting(tmp_path: Path, version: str = "3.12", roce: list[str] | None = None) -> Path:
    """A node 'Python' whose probe answers `version` with 16 CPUs, no GPUs and the RoCE devices
    `roce` (no routable GID); the rest is what the real probe reads on this machine."""
    answer = tmp_path / f"python{version}.json"
    answer.write_text(
        json.dumps({
            "version": version, "machine": "x86_64", "glibc": "2.36", "cpus": 16,
            "rdma": {"infiniband": [], "roce": roce or [], "roce_gid_index": None},
            "nvidia": {"query": {"rc": 127, "stdout": ""}, "banner": {"rc": 127, "stdout": ""},
                       "driver": None},
        })
    )  # fmt: skip
    merge = (
        "import json, sys; "
        "print(json.dumps({**json.load(sys.stdin), **json.load(open(sys.argv[1]))}))"
    )
    fake_python = tmp_path / f"python{version}"
    fake_python.write_text(
        f'#!/bin/sh\n"{sys.executable}" "$@" | "{sys.executable}" -c "{merge}" "{answer}"\n'
    )
    fake_python.chmod(0o755)
    return fake_python


def test_the_install_play_named_above_exists() -> None:
    """The refusals below assert this play never started: a renamed play must fail here."""
    assert (
        INSTALL_PLAY.removeprefix("PLAY [").removesuffix("]")
        in (PROJECT / "playbooks/cluster_up.yml").read_text()
    )


def test_a_python_verl_does_not_support_is_refused_naming_the_nodes(tmp_path: Path) -> None:
    """Every node on Python 3.13 (one Python, so Ray could run): verl 0.9.1 supports
    >=3.10,<3.13, so the facts play refuses, naming each node; without verl it goes on."""
    python_3_13 = str(python_reporting(tmp_path, "3.13"))
    nodes = with_host_vars(
        local_nodes(ray_base_python=python_3_13),
        "ray_head", "n1", ray_base_python=python_3_13,
    )  # fmt: skip
    run = cluster_up(tmp_path, nodes, "--check")
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert "verl 0.9.1 supports Python >=3.10,<3.13, but n1: Python 3.13, n2: Python 3.13" in output
    assert "or set verl_install: false" in output
    without_verl = cluster_up(tmp_path, nodes, "--check", *FACTS_ONLY, "-e", "verl_install=false")
    output = " ".join((without_verl.stdout + without_verl.stderr).split())
    assert "verl 0.9.1 supports Python" not in output
    assert INSTALL_PLAY in output, output[-3000:]
    # post_mortem, the default, on 3.13: the venv's hook repairs Ray's lost exception, so
    # nothing warns about it (test_debugger.py proves the repair on Debian 13's nodes).
    assert "WARNING: debug_mode post_mortem" not in output


def test_mixed_python_versions_stop_before_any_change(tmp_path: Path) -> None:
    """The worker's Python reports 3.12: the read-only facts play refuses."""
    fake_python = python_reporting(tmp_path)
    run = cluster_up(tmp_path, local_nodes(ray_base_python=str(fake_python)), "--check")
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert f"n1: Python {sys.version_info.major}.{sys.version_info.minor}" in output, output
    assert "n2: Python 3.12 x86_64" in output


@pytest.mark.parametrize("set_for", ["every host", "the worker alone"])
def test_worker_without_gpus_is_refused_when_gpus_are_required(
    tmp_path: Path, set_for: str
) -> None:
    """The check runs once for the cluster; a setting one host makes (group_vars/ray_workers)
    counts as much as one for every host."""
    if set_for == "every host":
        nodes, extra = (
            local_nodes(ray_facts_nvidia_smi="/nonexistent/nvidia-smi"),
            ["-e", "ray_require_gpus=true"],
        )
    else:
        nodes, extra = (
            local_nodes(ray_facts_nvidia_smi="/nonexistent/nvidia-smi", ray_require_gpus=True),
            [],
        )
    run = cluster_up(tmp_path, nodes, *extra)
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert "ray_require_gpus is set but workers ['n2'] offer no GPUs" in output, output


def test_an_operator_without_an_account_is_refused_naming_the_node(tmp_path: Path) -> None:
    """ray_service's user module would create the account: a mistyped name must stop the run
    before any node changes."""
    run = cluster_up(tmp_path, local_nodes(ray_operators=["no-such-operator"]))
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert (
        "ray_operators names accounts that n2 (no-such-operator) has no account for; create the"
        " accounts or remove the names."
    ) in output, output[-3000:]


def test_every_refusal_the_facts_show_is_named_in_one_run(tmp_path: Path) -> None:
    """The facts checks are one task: a cluster with two problems hears of both at once, not
    of the second only after fixing the first."""
    driver = tmp_path / "nvidia-version"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    gpus = stand_in_nvidia_smi(tmp_path / "h100", "NVIDIA H100", "550.54.15")
    nodes = local_nodes(
        ray_stand_in_gpus=True, ray_facts_nvidia_smi=gpus, ray_facts_nvidia_driver=str(driver),
        ray_operators=["no-such-operator"],
    )  # fmt: skip
    run = cluster_up(tmp_path, nodes, "--check", "-e", "verl_install=false")
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert f"with a loaded NVIDIA driver: n2 ({driver} exists)." in output, output[-3000:]
    assert "ray_operators names accounts that n2 (no-such-operator) has no account for" in output


def test_unknown_ray_version_is_refused_before_any_install(tmp_path: Path) -> None:
    run = cluster_up(
        tmp_path,
        local_nodes(),
        "-e",
        "ray_version=2.99.0 verl_install=false ray_artifacts_dir=" + str(tmp_path / "artifacts"),
    )
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert "TASK [verl_debug.cluster.ray_python" not in output
    assert "no version of ray[default]==2.99.0" in output, output[-3000:]
    assert "Check ray_version, verl_version and ray_pip_constraints" in output


def stand_in_nvidia_smi(path: Path, model: str, driver: str) -> str:
    """A script answering ray_facts' nvidia-smi queries for one GPU."""
    path.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --query-gpu=*) echo "0, {model}, 81559, {driver}" ;;\n'
        f'*) echo "| NVIDIA-SMI {driver}  Driver Version: {driver}  CUDA Version: 12.4 |" ;; esac\n'
    )
    path.chmod(0o755)
    return str(path)


def test_mixed_gpu_workers_are_refused_when_uniform_gpus_are_required(tmp_path: Path) -> None:
    data = local_nodes(
        ray_facts_nvidia_smi=stand_in_nvidia_smi(tmp_path / "h100", "NVIDIA H100", "550.54.15")
    )
    workers = data["ray_cluster"]["children"]["ray_workers"]["hosts"]
    workers["n3"] = dict(
        workers["n2"],
        ray_facts_nvidia_smi=stand_in_nvidia_smi(tmp_path / "a100", "NVIDIA A100", "535.104.05"),
    )
    run = cluster_up(tmp_path, data, "--check", "-e", "ray_require_uniform_gpus=true")
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert "GPU models differ: n2: NVIDIA H100; n3: NVIDIA A100" in output, output[-3000:]
    assert "driver versions differ: n2: 550.54.15; n3: 535.104.05" in output


def test_a_range_smaller_than_a_node_may_pause_is_warned_about(tmp_path: Path) -> None:
    fake_python = python_reporting(tmp_path)
    nodes = local_nodes(ray_base_python=str(fake_python), ray_num_gpus=2)
    run = cluster_up(
        tmp_path, nodes, "-e", "ray_debugger_port_range=52000-52019", "--check", *FACTS_ONLY
    )
    output = " ".join((run.stdout + run.stderr).split())
    assert (
        "WARNING: ray_debugger_port_range 52000-52019 holds 20 ports, but n2 may pause 22 worker "
        "processes at once (16 CPUs + 2 GPUs x 3)"
    ) in output, output[-3000:]


def test_roce_without_a_routable_gid_is_warned_about_unless_the_host_sets_one(
    tmp_path: Path,
) -> None:
    # The head's Python, so that the cluster passes every other check.
    head_python = f"{sys.version_info.major}.{sys.version_info.minor}"
    fake_python = python_reporting(tmp_path, head_python, roce=["mlx5_1"])
    warning = (
        "WARNING: n2 (RoCE devices mlx5_1) has no GID index that is RoCE v2 with an IPv4 address"
        " on all of them; NCCL may fail to connect over RoCE."
    )
    warned = cluster_up(
        tmp_path, local_nodes(ray_base_python=str(fake_python)), "--check", *FACTS_ONLY
    )
    assert warning in " ".join((warned.stdout + warned.stderr).split()), warned.stdout[-3000:]
    # The head's probe is the real one: this machine has no RoCE device.
    assert "n1 (RoCE devices" not in warned.stdout
    set_for_the_host = local_nodes(ray_base_python=str(fake_python), ray_nccl_ib_gid_index="3")
    quiet = cluster_up(tmp_path, set_for_the_host, "--check", *FACTS_ONLY)
    assert quiet.returncode == 0, quiet.stdout[-3000:]
    assert "RoCE devices" not in quiet.stdout


def test_gpu_node_too_small_for_verl_is_warned_about_or_refused(tmp_path: Path) -> None:
    fake_python = python_reporting(tmp_path)
    nodes = local_nodes(ray_base_python=str(fake_python), ray_num_gpus=8)
    shortfall = "n2 has 8 GPUs but 16 CPUs; verl reserves 8 x 3 = 24 CPUs"
    warned = cluster_up(tmp_path, nodes, "--check", *FACTS_ONLY)
    assert f"WARNING: {shortfall}" in " ".join((warned.stdout + warned.stderr).split())
    run = cluster_up(tmp_path, nodes, "--check", "-e", "ray_require_verl_fit=true")
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert f"ray_require_verl_fit is set but {shortfall}" in output, output[-3000:]


def test_stand_in_gpus_on_a_host_with_an_nvidia_driver_are_refused(tmp_path: Path) -> None:
    """ray_stand_in_gpus turns the GPU proof off: on a host whose NVIDIA driver is loaded it
    would pass real GPUs unproven, so the facts play refuses, naming the host and the
    variable. The driver's /proc file is a scratch file here; absent, the run goes on."""
    driver = tmp_path / "nvidia-version"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    gpus = stand_in_nvidia_smi(tmp_path / "h100", "NVIDIA H100", "550.54.15")
    nodes = local_nodes(
        ray_stand_in_gpus=True, ray_facts_nvidia_smi=gpus, ray_facts_nvidia_driver=str(driver)
    )
    run = cluster_up(tmp_path, nodes, "--check", "-e", "verl_install=false")
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert INSTALL_PLAY not in output
    assert (
        f"ray_stand_in_gpus is true on hosts with a loaded NVIDIA driver: n2 ({driver} exists)."
    ) in output, output[-3000:]
    assert "n1 (" not in output
    driver.unlink()
    without_a_driver = cluster_up(
        tmp_path, nodes, "--check", *FACTS_ONLY, "-e", "verl_install=false"
    )
    output = " ".join((without_a_driver.stdout + without_a_driver.stderr).split())
    assert "ray_stand_in_gpus is true on hosts" not in output
    assert INSTALL_PLAY in output, output[-3000:]
