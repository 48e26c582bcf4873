"""Bare benchmark nodes: sandbox containers reached over SSH, like real GPU nodes."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "artifacts/bench-results"
KEY = RESULTS / "id_ed25519"
NAME = "bench"
SUBNET = "10.125.0.0/24"
SANDBOX_INVENTORY = PROJECT / f"artifacts/{NAME}/hosts.yml"
SSH_INVENTORY = RESULTS / "hosts.yml"
SSH_OPTIONS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
FAILED_LOG = RESULTS / "failed.log"
# Ansible's lines for a task that failed on a host, not its retries ("FAILED - RETRYING").
FAILURE = re.compile(r"^(fatal: |failed: |.*FAILED! =>)")


def run(*argv: str | Path, env: dict[str, str] | None = None) -> str:
    """Run a command from the repository root; fail with its failures and output's tail, the
    whole output kept in FAILED_LOG (a profiled playbook's tail is its task timings)."""
    done = subprocess.run(
        [str(arg) for arg in argv], cwd=PROJECT, capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        FAILED_LOG.parent.mkdir(parents=True, exist_ok=True)
        FAILED_LOG.write_text(f"{argv}\n{done.stdout}\n{done.stderr}")
        failures = [line for line in done.stdout.splitlines() if FAILURE.match(line)]
        raise RuntimeError(
            f"{argv[:3]} failed (whole output: {FAILED_LOG}):\n" + "\n".join(failures[-20:])
            + f"\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )  # fmt: skip
    return done.stdout


@dataclass(frozen=True)
class Nodes:
    """The containers of one benchmark cluster: a head and `workers` workers."""

    workers: int
    verl: bool

    @property
    def names(self) -> list[str]:
        return [f"{NAME}-head", *(f"{NAME}-w{index}" for index in range(1, self.workers + 1))]

    def address(self, name: str) -> str:
        shown = run("docker", "inspect", name)
        return json.loads(shown)[0]["NetworkSettings"]["Networks"][NAME]["IPAddress"]

    @property
    def head(self) -> str:
        return self.address(self.names[0])

    @property
    def worker_addresses(self) -> list[str]:
        return [self.address(name) for name in self.names[1:]]

    def create(self) -> None:
        """Start any missing container, open SSH on each, write an SSH inventory."""
        if not KEY.exists():
            RESULTS.mkdir(parents=True, exist_ok=True)
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", KEY)
        run(
            "ansible-playbook",
            "playbooks/sandbox_up.yml",
            "-e",
            json.dumps(
                {
                    "sandbox_name": NAME,
                    "sandbox_subnet": SUBNET,
                    "sandbox_workers": self.workers,
                    "sandbox_verl_install": self.verl,
                }
            ),
        )
        public_key = KEY.with_suffix(".pub").read_text()
        for name in self.names:
            subprocess.run(
                ["docker", "exec", "-i", name, "sh", "-c",
                 "mkdir -p -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys"
                 " && touch /root/.bashrc && systemctl enable --now ssh"],
                input=public_key, text=True, check=True, capture_output=True,
            )  # fmt: skip
            wait_for_port(self.address(name), 22)
        self._write_ssh_inventory()

    def bytes_sent(self) -> int:
        """Bytes the controller has sent into the nodes' network: the bridge's own transmit
        counter, which node-to-node traffic (forwarded by the bridge) does not touch."""
        network = run("docker", "network", "inspect", NAME, "--format", "{{.Id}}").strip()
        return int(Path(f"/sys/class/net/br-{network[:12]}/statistics/tx_bytes").read_text())

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds each node's container has used since it started, all its processes."""
        return {name: container_cpu_seconds(name) for name in self.names}

    def cpu_since(self, before: dict[str, float]) -> dict[str, float]:
        return {name: round(used - before[name], 1) for name, used in self.cpu_seconds().items()}

    def destroy(self) -> None:
        run("ansible-playbook", "playbooks/sandbox_down.yml", "-e", f"sandbox_name={NAME}")

    def _write_ssh_inventory(self) -> None:
        inventory = yaml.safe_load(SANDBOX_INVENTORY.read_text())
        inventory["ray_cluster"]["vars"].update(
            ansible_connection="ssh",
            ansible_user="root",
            ansible_ssh_private_key_file=str(KEY),
            ansible_ssh_common_args=SSH_OPTIONS,
        )
        for group in inventory["ray_cluster"]["children"].values():
            group["hosts"] = group["hosts"] or {}  # a cluster of the head alone
            for name in group["hosts"]:
                group["hosts"][name] = {"ansible_host": self.address(name)}
        SSH_INVENTORY.write_text(yaml.safe_dump(inventory))


def container_cpu_seconds(name: str) -> float:
    """From the container's cgroup: cgroup v1's cpuacct (nanoseconds) or v2's cpu.stat."""
    full_id = run("docker", "inspect", name, "--format", "{{.Id}}").strip()
    root = Path("/sys/fs/cgroup")
    for usage in (root / f"cpuacct/docker/{full_id}/cpuacct.usage",
                  root / f"cpu,cpuacct/docker/{full_id}/cpuacct.usage"):  # fmt: skip
        if usage.exists():
            return int(usage.read_text()) / 1e9
    for stat in (root / f"system.slice/docker-{full_id}.scope/cpu.stat",
                 root / f"docker/{full_id}/cpu.stat"):  # fmt: skip
        if stat.exists():
            fields = dict(line.split() for line in stat.read_text().splitlines())
            return int(fields["usage_usec"]) / 1e6
    raise FileNotFoundError(f"no cgroup CPU account for container {name} under {root}")


def wait_for_port(host: str, port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
