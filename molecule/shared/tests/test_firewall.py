"""Ray and debugger ports answer the cluster and trusted addresses, and nobody else."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
from conftest import Cluster, alive_nodes
from nodes import FABRIC, GPU_WORKER, HEAD, NODES

# Nobody outside is let in, whatever the debug mode: the faults scenario runs these in `off`.
pytestmark = pytest.mark.every_mode

FULL_SCAN = "nmap -Pn -n -p- -T4 --max-retries 1 --min-rate 20000 -oG -"
# nmap's default pace and more retries: slow answers still count.
PATIENT_SCAN = "nmap -Pn -n --max-retries 6 --host-timeout 120s -oG -"


def open_ports(scan: str) -> set[int]:
    """The open TCP ports in nmap's grepable (-oG) output."""
    ports = scan.split("Ports: ", 1)[1].split("\t")[0] if "Ports: " in scan else ""
    return {int(entry.split("/", 1)[0]) for entry in ports.split(", ") if "/open/" in entry}


def scan_from_controller(arguments: str) -> str:
    return subprocess.run(
        [*FULL_SCAN.split(), *arguments.split()],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout


def address_of(cluster: Cluster, node: str) -> str:
    return cluster.head_ip if node == HEAD else cluster.worker_ips[node]


def in_port_table(cluster: Cluster, port: int) -> bool:
    spans = [*cluster.ports.values(), f"{cluster.debugger_range[0]}-{cluster.debugger_range[-1]}"]
    for spec in spans:
        low, _, high = str(spec).partition("-")
        if int(low) <= port <= int(high or low):
            return True
    return False


# What a full scan must find open from anywhere: SSH, which prepare.yml starts on every node,
# as on GPU nodes (the controller reaches them over it).
OPEN_TO_ANYONE = {22}


def listening_ports(host) -> set[int]:
    """Every TCP port the node listens on, either family: what its firewall must hide."""
    listeners = host.check_output("ss -Htln").splitlines()
    return {int(line.split()[3].rpartition(":")[2]) for line in listeners}


def ports_of(scan: str, address: str) -> set[int]:
    """The open TCP ports of one host in nmap's grepable (-oG) output of several."""
    lines = [line for line in scan.splitlines() if line.startswith(f"Host: {address} ")]
    return set().union(*(open_ports(line) for line in lines))


@pytest.fixture(scope="module")
def ipv6(host_of) -> dict[str, str]:
    """Each node's IPv6 address, asked once for every test of the module."""
    return {node: ipv6_of(host_of(node)) for node in NODES}


@pytest.fixture(scope="module")
def outsider_finds(outsider, cluster, host_of, ipv6) -> dict[str, set[int]]:
    """The ports open to the outsider at each node's IPv4 and IPv6 address. At 20000
    packets/s with one retry, the full scan reads a busy node's late answer as filtered, so
    every port any node listens on gets a patient look too before it counts as closed. One
    nmap per scan and family covers every node: it scans them side by side."""
    ports = ",".join(map(str, sorted(set().union(*map(listening_ports, map(host_of, NODES))))))
    found: dict[str, set[int]] = {}
    for family, addresses in (
        ("", [address_of(cluster, node) for node in NODES]),
        ("-6", [ipv6[node] for node in NODES]),
    ):
        targets = " ".join(addresses)
        full = outsider.check_output(f"{FULL_SCAN} {family} {targets}")
        patient = outsider.check_output(f"{PATIENT_SCAN} {family} -p {ports} {targets}")
        for address in addresses:
            found[address] = ports_of(full, address) | ports_of(patient, address)
    return found


@pytest.mark.parametrize("node", NODES)
def test_outsider_finds_only_ssh(outsider_finds, cluster, node) -> None:
    assert outsider_finds[address_of(cluster, node)] == OPEN_TO_ANYONE


@pytest.mark.parametrize("node", NODES)
def test_trusted_address_reaches_rays_ports_and_only_those(cluster, node) -> None:
    """The controller (the network's gateway, in ray_trusted_cidrs) scans every node's ports."""
    found = open_ports(scan_from_controller(address_of(cluster, node)))
    assert {port for port in found if not in_port_table(cluster, port)} == OPEN_TO_ANYONE
    expected = {int(cluster.ports["node_manager"]), int(cluster.ports["object_manager"])}
    if node == HEAD:
        expected |= {int(cluster.ports["gcs"]), int(cluster.ports["dashboard"])}
    if missed := expected - found:
        # At 20000 packets/s with one retry, a busy node's late answer reads as filtered: a
        # port the full scan missed gets a patient look of its own before it counts as closed.
        ports = ",".join(map(str, sorted(missed)))
        patient = ["nmap", "-Pn", "-n", "-p", ports, "-oG", "-", address_of(cluster, node)]
        scan = subprocess.run(patient, capture_output=True, text=True, timeout=120)
        found |= open_ports(scan.stdout)
    assert expected <= found


def test_controller_reaches_dashboard_and_gcs(cluster) -> None:
    assert set(alive_nodes(cluster)) == {cluster.head_ip, *cluster.worker_ips.values()}
    socket.create_connection((cluster.head_ip, int(cluster.ports["gcs"])), timeout=5).close()


@pytest.mark.parametrize("node", NODES)
def test_firewall_table_is_our_own(host_of, node) -> None:
    host = host_of(node)
    assert host.service("ray-firewall").is_enabled
    tables = host.check_output("nft list tables")
    assert "table inet ray_cluster" in tables
    # prepare.yml loaded a table of the operator's; ours must leave it alone.
    assert "table inet site_rules" in tables


# A UDP echo on a Ray port number, both families: only TCP to Ray's ports is ours to filter.
UDP_PORT = 6379
UDP_ECHO = (
    "import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); "
    "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0); s.bind(('::', {port}))\n"
    "while True: data, peer = s.recvfrom(64); s.sendto(data, peer)"
)
UDP_PROBE = (
    "import socket, sys; family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET; "
    "s = socket.socket(family, socket.SOCK_DGRAM); s.settimeout(3); "
    "s.sendto(b'probe', (sys.argv[1], {port})); print(s.recv(64).decode())"
)


def ipv6_of(host) -> str:
    facts = host.ansible("setup", "gather_subset=network", check=False)["ansible_facts"]
    return facts["ansible_default_ipv6"]["address"]


@pytest.fixture
def udp_echo(host_of, node) -> Iterator[None]:
    host = host_of(node)
    script = UDP_ECHO.format(port=UDP_PORT)
    host.check_output(f'systemd-run --unit udp-echo-test --collect python3 -c "{script}"')
    try:
        yield
    finally:
        host.run("systemctl stop udp-echo-test")


@pytest.mark.parametrize("node", NODES)
def test_ping_and_udp_pass_untouched_over_both_families(
    outsider, cluster, ipv6, node, udp_echo
) -> None:
    """From the outsider, which Ray's ports drop: ICMP echo, ICMPv6 (and so neighbour
    discovery) and UDP, even to a Ray port number, all reach the node."""
    for address in (address_of(cluster, node), ipv6[node]):
        outsider.run_expect([0], f"ping -c 1 -W 3 {address}")
        probe = UDP_PROBE.format(port=UDP_PORT)
        assert outsider.check_output(f'python3 -c "{probe}" {address}') == "probe"


@pytest.mark.parametrize("node", NODES)
def test_outsider_finds_only_ssh_over_ipv6(outsider_finds, ipv6, node) -> None:
    assert outsider_finds[ipv6[node]] == OPEN_TO_ANYONE


def test_a_node_is_trusted_by_every_address(cluster, host_of) -> None:
    """The GPU worker reaches the head's GCS over the second network, from its address there:
    traffic that leaves a node from another NIC (InfiniBand, storage) is the cluster's too."""
    connect = (
        f"import socket; s = socket.socket(); s.bind(('{FABRIC[GPU_WORKER]}', 0)); "
        f"s.settimeout(5); s.connect(('{FABRIC[HEAD]}', {cluster.ports['gcs']})); "
        "print('connected')"
    )
    assert host_of(GPU_WORKER).check_output(f'python3 -c "{connect}"') == "connected"
