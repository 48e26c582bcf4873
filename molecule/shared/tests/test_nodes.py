"""Every node runs Ray under systemd, in the scenario's debug mode and nothing else."""

from __future__ import annotations

import pytest
from nodes import WORKER

testinfra_hosts = ["ansible://ray_cluster"]

MODE_ENV = {
    "post_mortem": {"RAY_DEBUG_POST_MORTEM": "1"},
    "legacy": {"RAY_DEBUG": "legacy"},
    "off": {"RAY_DEBUG": "0"},
}


PINNED_FLAGS = {
    "node-manager-port": "node_manager",
    "object-manager-port": "object_manager",
    "runtime-env-agent-port": "runtime_env_agent",
    "dashboard-agent-grpc-port": "dashboard_agent_grpc",
    "dashboard-agent-listen-port": "dashboard_agent_http",
    "metrics-export-port": "metrics_export",
}


def span(spec: int | str) -> tuple[int, int]:
    low, _, high = str(spec).partition("-")
    return int(low), int(high or low)


def test_ray_runs_under_systemd_and_starts_at_boot(host) -> None:
    service = host.service("ray")
    assert service.is_running
    assert service.is_enabled


@pytest.mark.every_mode
def test_environment_carries_only_this_modes_debugger(host, cluster) -> None:
    environment = host.file("/etc/ray-cluster/ray.env").content_string
    exec_start = host.check_output("systemctl show ray -p ExecStart")
    for mode, variables in MODE_ENV.items():
        for name, value in variables.items():
            assert (f"{name}={value}" in environment) == (mode == cluster.mode), name
    assert ("--ray-debugger-external" in exec_start) == (cluster.mode == "legacy")
    # Workers open a debugger on request (verl-debug rank) only in a mode that has one.
    assert ("RAY_DEBUG_ON_DEMAND=1" in environment) == (cluster.mode != "off")
    assert f"RAY_DEBUGGER_PORT_RANGE={cluster.debugger_range[0]}-{cluster.debugger_range[-1]}" in (
        environment
    )


def test_every_port_is_pinned(host, cluster) -> None:
    exec_start = host.check_output("systemctl show ray -p ExecStart")
    for flag, name in PINNED_FLAGS.items():
        assert f"--{flag}={cluster.ports[name]}" in exec_start


def test_nothing_listens_outside_the_port_table(host, cluster) -> None:
    """The firewall can only guard ports it knows: every port Ray opens must be in the table."""
    known = [span(spec) for spec in cluster.ports.values()] + [
        (cluster.debugger_range[0], cluster.debugger_range[-1])
    ]
    # The host's own sshd (prepare.yml starts it for the operator's login) is not Ray's.
    listening = host.check_output("ss -ltneH | grep -v /ssh.service | awk '{print $4}'").split()
    strays = [
        address
        for address in listening
        if not address.startswith(("127.", "[::1]", "[::ffff:127."))
        and not any(low <= int(address.rsplit(":", 1)[1]) <= high for low, high in known)
    ]
    assert strays == []


@pytest.mark.parametrize("command", ["ray status", "ray --version"])
def test_ray_on_path_in_a_login_shell(host, command) -> None:
    assert host.run(f"bash -lc '{command}'").rc == 0


def test_ray_status_sees_the_whole_cluster(host) -> None:
    status = host.check_output("bash -lc 'ray status'")
    assert status.count(" node_") == 3
    assert "0.0/2.0 GPU" in status


def test_ray_runs_unprivileged(host) -> None:
    # Every process started from the cluster's venv: ray start, GCS, raylet, agents, workers.
    # The bracket keeps pgrep from matching the shell that runs this very command.
    owners = host.check_output("ps -o user= -p \"$(pgrep -d, -f '[/]opt/ray-cluster/venv/')\"")
    assert set(owners.split()) == {"ray"}
    assert host.user("ray").shell == "/usr/sbin/nologin"


def test_ray_cannot_change_its_own_code_or_config(host) -> None:
    for path in ("/opt/ray-cluster/venv/bin", "/opt/ray-cluster/venv/lib", "/etc/ray-cluster"):
        assert host.run(f"runuser -u ray -- test -w {path}").rc != 0, path
        assert host.file(path).user == "root"


def test_an_operators_driver_keeps_its_bytecode_in_its_own_cache(host) -> None:
    """The venv is root's: an operator's hand-started driver writes the bytecode of what it
    imports under its own cache (ray_user_bytecode), where its next start reads it."""
    imported = host.check_output(
        "runuser -u operator -- /opt/ray-cluster/venv/bin/python -c "
        "'import importlib.util, os, ray, sys; "
        "print(sys.pycache_prefix, os.path.exists(importlib.util.cache_from_source(ray.__file__)))'"
    )
    home = host.user("operator").home
    assert imported == f"{home}/.cache/ray-cluster/bytecode True"
    # Root writes into the venv, as Python does: no prefix of its own.
    assert (
        host.check_output(
            "/opt/ray-cluster/venv/bin/python -c 'import sys; print(sys.pycache_prefix)'"
        )
        == "None"
    )


def test_unit_is_hardened(host) -> None:
    shown = host.check_output(
        "systemctl show ray -p NoNewPrivileges -p ProtectSystem -p ProtectHome -p User"
    )
    assert set(shown.splitlines()) == {
        "NoNewPrivileges=yes",
        "ProtectSystem=full",
        "ProtectHome=read-only",
        "User=ray",
    }


def ray_main_pid(host) -> str:
    return host.check_output("systemctl show ray -p MainPID --value")


def test_ray_may_pin_memory_and_start_many_tasks(host) -> None:
    """NCCL over InfiniBand or RoCE pins its buffers; a busy GPU node runs thousands of
    threads. Read from systemd: the containers' own memlock cap (Docker's 8 MiB, which this
    machine cannot lift) clamps what the raylet actually gets here."""
    shown = host.check_output("systemctl show ray -p LimitMEMLOCK -p TasksMax")
    assert set(shown.splitlines()) == {"LimitMEMLOCK=infinity", "TasksMax=infinity"}


def test_ray_joins_the_device_groups_the_node_has(host) -> None:
    """prepare.yml gives one worker an rdma group, as rdma-core does; no node gets one made."""
    present = [
        group for group in ("video", "render", "rdma") if host.run(f"getent group {group}").rc == 0
    ]
    assert "video" in present
    assert ("rdma" in present) == (host.backend.get_hostname() == WORKER)
    # The running raylet carries the groups: a device node opens with them, not the user's.
    groups = host.check_output(f"ps -o supgrp= -p {ray_main_pid(host)}").split(",")
    assert set(present) <= set(groups), groups


def test_only_ray_writes_its_temp_directory(host) -> None:
    """/tmp/ray, where Ray keeps sessions and sockets, is root's and Ray's group's (Ray and the
    operators): another user cannot plant a file there (Ray's own chmod to 0777 failed on a
    directory it does not own), and tmpfiles.d keeps it so across reboots."""
    temp = host.file("/tmp/ray")
    assert (temp.user, temp.group, temp.mode) == ("root", "ray", 0o775)
    assert host.run("runuser -u nobody -- touch /tmp/ray/planted").rc != 0
    assert (
        "d /tmp/ray 0775 root ray -" in host.file("/etc/tmpfiles.d/ray-cluster.conf").content_string
    )


def test_login_shells_get_the_address_not_from_tmp(host, cluster) -> None:
    profile = host.file("/etc/profile.d/ray-cluster.sh").content_string
    assert f"export RAY_ADDRESS={cluster.gcs}" in profile


def test_kernel_keeps_the_debugger_range_for_debuggers(host, cluster) -> None:
    """No outgoing connection can take a debugger port while Ray runs; the operator's own
    reservation (prepare.yml's 40000) stays."""
    reserved = host.file("/proc/sys/net/ipv4/ip_local_reserved_ports").content_string.strip()
    assert reserved == f"40000,{cluster.debugger_range[0]}-{cluster.debugger_range[-1]}"
