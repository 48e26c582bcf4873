"""Filters shared by the ray-cluster roles: port ranges, CIDRs and interfaces.

Validation messages are built here so that every role names bad values the same way.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.verl_debug.cluster.plugins.module_utils import ray_port_range
from packaging.specifiers import SpecifierSet

PortSpec = int | str


def port_span(value: PortSpec) -> tuple[int, int]:
    """Parse a port (6379) or range ("52000-52099") into (low, high)."""
    try:
        return ray_port_range.port_span(value)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None


def port_range_error(value: PortSpec) -> str:
    """Why `value` is neither a port nor a range (an entry of ray_ports), or ''."""
    return _grammar_error(ray_port_range.port_span, value)


def debugger_port_range_error(value: PortSpec) -> str:
    """Why `value` cannot be ray_debugger_port_range (LOW-HIGH, even for one port), or ''."""
    return _grammar_error(ray_port_range.port_range, value)


def _grammar_error(parse: Callable[[PortSpec], object], value: PortSpec) -> str:
    try:
        parse(value)
    except ValueError as error:
        return str(error)
    return ""


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def plain_name_error(value: object) -> str:
    """Why `value` cannot name a file or unit on its own (a path, '..', spaces), or ''."""
    if PLAIN_NAME.fullmatch(str(value)):
        return ""
    return (
        f"{str(value)!r} is not a plain name: use 1-64 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit (e.g. 'verl-debug')"
    )


def owned_path_error(value: object) -> str:
    """Why `value` cannot be a directory we create and purge on the nodes, or ''."""
    text = str(value)
    parts = text.rstrip("/").split("/")
    if not text.startswith("/") or any(part in ("", ".", "..") for part in parts[1:]):
        return f"{text!r} is not a normalised absolute path (e.g. '/opt/ray-cluster')"
    if len(parts) < 3:
        return (
            f"{text!r} is a top-level directory, which purge would remove; "
            f"use e.g. '{text}/ray-cluster'"
        )
    return ""


def path_problems(names: Mapping[str, object], directories: Mapping[str, object]) -> list[str]:
    """'variable: why' for each plain name and owned directory that is not safe as a path."""
    checks = [(names, plain_name_error), (directories, owned_path_error)]
    return [
        f"{variable}: {problem}"
        for values, check in checks
        for variable, value in values.items()
        if (problem := check(value))
    ]


def invalid_cidrs(values: Iterable[str]) -> list[str]:
    """Return the entries of `values` that are not IPv4/IPv6 networks."""
    bad = []
    for value in values:
        try:
            ipaddress.ip_network(str(value), strict=False)
        except ValueError:
            bad.append(str(value))
    return bad


def ports_overlapping(value: PortSpec, ports: Mapping[str, PortSpec]) -> list[str]:
    """Return the names in the port table whose port or range overlaps `value`."""
    low, high = port_span(value)
    return sorted(
        name
        for name, spec in ports.items()
        if (span := port_span(spec))[0] <= high and low <= span[1]
    )


def nft_ports(specs: Iterable[PortSpec]) -> str:
    """Render ports and ranges as nftables set elements, e.g. '6379, 10002-19999'."""
    spans = sorted(port_span(spec) for spec in specs)
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in spans)


def cidrs_of_family(values: Iterable[str], family: int) -> list[str]:
    """Keep the networks of one IP family (4 or 6), normalised."""
    networks = (ipaddress.ip_network(str(value), strict=False) for value in values)
    return [str(network) for network in networks if network.version == family]


def oldest_version(versions: Iterable[str]) -> str:
    """The lowest dotted version, compared numerically ('2.9' < '2.36')."""
    return min(versions, key=lambda version: tuple(int(part) for part in str(version).split(".")))


def routable_addresses(addresses: Iterable[str]) -> list[str]:
    """A node's addresses that other hosts can send from or to: no loopback, no link-local."""
    kept: list[str] = []
    for text in addresses:
        if not text:
            continue
        address = ipaddress.ip_address(str(text))
        if address.is_loopback or address.is_link_local or str(address) in kept:
            continue
        kept.append(str(address))
    return kept


# The node facts another run needs when it cannot reach the node (--limit, a node down).
RECORDED_FACTS = {
    "address": "ray_node_address",
    "addresses": "ray_node_addresses",
    "python": "ray_node_python",
    "gpus": "ray_node_gpus",
    "gpu_count": "ray_node_gpu_count",
    "ib_hcas": "ray_node_ib_hcas",
    "ifname": "ray_node_ifname",
    "cpus": "ray_node_cpus",
}


def node_record(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{host: recorded facts} from the hostvars of nodes whose facts are known."""
    record = {}
    for node in nodes:
        facts = {key: node[name] for key, name in RECORDED_FACTS.items()}
        facts["gpu_count"], facts["cpus"] = int(facts["gpu_count"]), int(facts["cpus"])
        record[str(node["inventory_hostname"])] = facts
    return record


def _cpus_and_gpus(node: Mapping[str, Any]) -> tuple[int, int]:
    """A node's CPUs and the GPUs Ray offers there, from its hostvars."""
    return int(node.get("ray_node_cpus", 0)), int(node.get("ray_node_gpu_count", 0))


def debugger_port_shortfalls(
    nodes: Iterable[Mapping[str, Any]], port_range: PortSpec, per_gpu: int
) -> list[str]:
    """Nodes whose Ray may run more pausable worker processes than the range has ports.

    Every worker process that opens a debugger holds a port of the range: about one per CPU
    for tasks, plus `per_gpu` colocated workers per GPU (verl's actor, critic, reference...).
    """
    low, high = port_span(port_range)
    size = high - low + 1
    short = []
    for node in nodes:
        cpus, gpus = _cpus_and_gpus(node)
        needed = cpus + gpus * per_gpu
        if needed > size:
            short.append(
                f"{node['inventory_hostname']} may pause {needed} worker processes at once "
                f"({cpus} CPUs + {gpus} GPUs x {per_gpu})"
            )
    return short


def verl_fit_shortfalls(nodes: Iterable[Mapping[str, Any]], per_gpu: int) -> list[str]:
    """GPU nodes whose CPUs cannot hold verl's colocated workers, with the numbers.

    verl's trainer places `per_gpu` workers (its max_colocate_count) on every GPU, each
    bundle reserving a CPU in a STRICT_PACK placement group: with fewer CPUs than that the
    group never becomes ready and the trainer waits, without an error.
    """
    short = []
    for node in nodes:
        cpus, gpus = _cpus_and_gpus(node)
        if gpus and cpus < gpus * per_gpu:
            short.append(
                f"{node['inventory_hostname']} has {gpus} GPUs but {cpus} CPUs; verl reserves "
                f"{gpus} x {per_gpu} = {gpus * per_gpu} CPUs"
            )
    return short


def pythons_outside(nodes: Iterable[Mapping[str, Any]], requires: str) -> list[str]:
    """ "HOST: Python X.Y" for each node whose Python falls outside `requires`, a package's
    Requires-Python ("<3.13,>=3.10")."""
    supported = SpecifierSet(requires)
    return [
        f"{node['inventory_hostname']}: Python {node['ray_node_python']['version']}"
        for node in nodes
        if node["ray_node_python"]["version"] not in supported
    ]


def debugger_proof_problems(
    report: Mapping[str, Mapping[str, Any]],
    wanted: Mapping[str, str],
    mode: str,
    port_range: PortSpec,
    debug_modes: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[str]]:
    """Judge the debugger proof's report, {node ip: what a debugger did there}.

    `wanted` maps every node's address to its host name; `debug_modes` is ray_debug_modes,
    whose variables the node's running Ray must carry as `mode` sets them. Returns `problems`
    (the run fails) and `unreserved` (nodes whose kernel may give a debugger port to a
    connection).
    """
    low, high = port_span(port_range)
    names = debug_variable_names(debug_modes)
    expected = {name: debug_modes[mode]["env"].get(name) for name in names}
    problems, unreserved = [], []
    for address, host in sorted(wanted.items()):
        node = report.get(address)
        if node is None:
            problems.append(f"{host} ({address}): no debugger proof came back from this node")
            continue
        where = f"{host} ({address}), Ray {node.get('ray', '?')}"
        running = {name: node.get("debug_env", {}).get(name) for name in names}
        if running != expected:
            problems.append(
                f"{where}: Ray runs with {_settings(running)}, not {mode}'s "
                f"{_settings(expected)}: it did not restart on its configuration; re-run "
                "cluster-up, which restarts a Ray older than its configuration"
            )
        if node.get("error"):
            problems.append(f"{where}: {node['error']}")
        elif mode == "off":
            if node.get("paused"):
                problems.append(f"{where}: breakpoint() waited for a debugger in mode off")
        elif not low <= int(node.get("port") or 0) <= high:
            problems.append(
                f"{where}: a {mode} debugger listened on port {node.get('port')}, outside "
                f"ray_debugger_port_range {low}-{high}; the port hook does not work on this Ray"
            )
        if node.get("stack", "ok") != "ok":
            problems.append(
                f"{where}: the dashboard could not read a worker's stack here (py-spy, run by the"
                f" node's dashboard agent): {node['stack']}"
            )
        reserved = ray_port_range.parse_port_list(node.get("reserved", ""))
        if mode != "off" and not set(range(low, high + 1)) <= reserved:
            unreserved.append(host)
    return {"problems": problems, "unreserved": unreserved}


def debug_variable_names(debug_modes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every variable some debug mode sets (ray_debug_modes): what the proof reads on a node."""
    return sorted({name for settings in debug_modes.values() for name in settings["env"]})


# What systemd says of a unit that runs, starts at boot and runs the unit file on disk.
UNIT_UP = {"ActiveState": "active", "UnitFileState": "enabled", "NeedDaemonReload": "no"}


def unit_up(properties: Mapping[str, str] | Iterable[str]) -> bool:
    """Whether `systemctl show` says the unit is up as written: {property: value}, or its
    PROPERTY=VALUE lines (other lines are ignored). Nothing read says no."""
    if not isinstance(properties, Mapping):
        properties = dict(line.split("=", 1) for line in properties if "=" in line)
    return all(properties.get(name) == value for name, value in UNIT_UP.items())


def _settings(env: Mapping[str, str | None]) -> str:
    return ", ".join(
        f"{name}={value}" if value is not None else f"{name} unset" for name, value in env.items()
    )


def auth_env(mode: str, token_path: str) -> dict[str, str]:
    """The environment a Ray process or client needs for the cluster's auth mode.

    The controller's clients and the nodes' processes keep the token in different files;
    everything else about the environment is the same.
    """
    if mode == "token":
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path}
    return {"RAY_AUTH_MODE": "disabled"}


def nccl_env(
    debug: str,
    hcas: Iterable[str],
    roce_hcas: Iterable[str],
    roce_gid_index: int | str | None,
    hca_override: str = "",
    gid_index_override: str | int = "",
) -> dict[str, str]:
    """NCCL's variables for a node from its RDMA devices; the overrides win over detection.

    Without an HCA NCCL_IB_DISABLE=1 keeps NCCL from probing for one; with RoCE it needs a
    GID index that routes (its default, 0, does not on RoCE v2).
    """
    env = {"NCCL_DEBUG": debug}
    hca = hca_override or ",".join(hcas)
    if not hca:
        return {**env, "NCCL_IB_DISABLE": "1"}
    env["NCCL_IB_HCA"] = hca
    found = str(roce_gid_index) if list(roce_hcas) and roce_gid_index is not None else ""
    gid_index = str(gid_index_override) or found
    return {**env, "NCCL_IB_GID_INDEX": gid_index} if gid_index else env


def network_host(cidr: str, index: int) -> str:
    """The `index`-th address of a network, e.g. its usual gateway with index 1."""
    return str(ipaddress.ip_network(cidr, strict=False)[index])


def interface_for_ip(facts: Mapping[str, Any], address: str) -> str:
    """Name the network interface that carries `address`, from a host's gathered facts."""
    for name in facts.get("interfaces", []):
        iface = facts.get(name.replace("-", "_"), {})
        addresses = [iface.get("ipv4", {}), *iface.get("ipv4_secondaries", [])]
        if any(entry.get("address") == address for entry in addresses):
            return str(iface.get("device", name))
    known = sorted(facts.get("interfaces", []))
    raise AnsibleFilterError(f"no interface carries address {address!r}; interfaces: {known}")


def nodes_not_ready(rows: Iterable[Mapping[str, Any]], wanted: Mapping[str, int]) -> list[str]:
    """Compare the state API's node rows with {ip: GPUs}; say what is not ready yet."""
    alive = {row["node_ip"]: row for row in rows if row.get("state") == "ALIVE"}
    problems = []
    for address, gpus in sorted(wanted.items()):
        if address not in alive:
            problems.append(f"{address}: not alive")
            continue
        offered = int(alive[address].get("resources_total", {}).get("GPU", 0))
        if offered != int(gpus):
            problems.append(f"{address}: {offered} GPUs, expected {gpus}")
    return problems


def alive_node_ids(rows: Iterable[Mapping[str, Any]], address: str) -> list[str]:
    """Node ids the state API reports ALIVE at `address` (a restart adds a new one)."""
    return [
        str(row["node_id"])
        for row in rows
        if row.get("node_ip") == address and row.get("state") == "ALIVE"
    ]


def nodes_not_joined(
    rows: Iterable[Mapping[str, Any]],
    hostvars: Mapping[str, Mapping[str, Any]],
    hosts: Iterable[str],
) -> list[str]:
    """Hosts with no ALIVE node id at their address that was not there before Ray stopped.

    One read of the head's node list answers for a whole batch of starting nodes, so the
    head is asked once per interval, whatever the batch size.
    """
    records = list(rows)
    waiting = []
    for host in hosts:
        own = hostvars[host]
        before = own.get("ray_service_ids_before", [])
        if not set(alive_node_ids(records, own["ray_node_address"])) - set(before):
            waiting.append(host)
    return waiting


def gpu_inventory(query_csv: str, banner: str) -> dict[str, Any]:
    """GPUs of a node from nvidia-smi.

    `query_csv` is the output of `nvidia-smi --query-gpu=index,name,memory.total,
    driver_version --format=csv,noheader,nounits`; `banner` that of plain `nvidia-smi`, whose
    header carries the CUDA version the driver supports. Both empty: a node without GPUs.
    """
    gpus = []
    for line in query_csv.splitlines():
        if not line.strip():
            continue
        _index, name, memory, driver = (field.strip() for field in line.split(","))
        gpus.append({"name": name, "memory_mib": int(memory), "driver": driver})
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", banner)
    return {
        "count": len(gpus),
        "models": sorted({gpu["name"] for gpu in gpus}),
        "memory_mib": min((gpu["memory_mib"] for gpu in gpus), default=0),
        "drivers": sorted({gpu["driver"] for gpu in gpus}),
        "cuda": cuda.group(1) if cuda else "",
    }


def gpu_summary(gpus: Mapping[str, Any], stand_in: object = False) -> str:
    """One line for the runbook and the play's summary, e.g. '2 x NVIDIA H100 (80 GiB) ...'.

    A host with ray_stand_in_gpus (tests) starts with 'stand-in: ': what its nvidia-smi
    answered is no GPU, and read alone the line would pass for one.
    """
    if not gpus.get("count"):
        return "no GPUs"
    line = (
        f"{gpus['count']} x {' + '.join(gpus['models'])} ({gpus['memory_mib'] // 1024} GiB), "
        f"driver {', '.join(gpus['drivers'])}, CUDA {gpus['cuda'] or '?'}"
    )
    return f"stand-in: {line}" if boolean(stand_in) else line


def _stand_in(node: Mapping[str, Any]) -> bool:
    """Whether a host's GPUs are stand-ins, from its hostvars (set only in the inventory)."""
    return boolean(node.get("ray_stand_in_gpus", False))


def gpu_node_lines(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """'host: gpu_summary' for each node with GPUs, from the nodes' hostvars."""
    return [
        f"{node['inventory_hostname']}: {gpu_summary(node['ray_node_gpus'], _stand_in(node))}"
        for node in nodes
        if node["ray_node_gpus"].get("count")
    ]


def gpu_total(nodes: Iterable[Mapping[str, Any]]) -> str:
    """The GPUs Ray offers across the nodes (hostvars), e.g. '8', or '2 (2 stand-in)'."""
    nodes = list(nodes)
    total = sum(int(node["ray_node_gpu_count"]) for node in nodes)
    stand_ins = sum(int(node["ray_node_gpu_count"]) for node in nodes if _stand_in(node))
    return f"{total} ({stand_ins} stand-in)" if stand_ins else str(total)


def gpu_mismatches(nodes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What differs between the GPU nodes of `nodes` ({host: gpu_inventory}): models, drivers."""
    with_gpus = {host: gpus for host, gpus in sorted(nodes.items()) if gpus.get("count")}
    problems = []
    for field, what in (("models", "GPU models"), ("drivers", "driver versions")):
        seen = {host: ", ".join(gpus[field]) for host, gpus in with_gpus.items()}
        if len(set(seen.values())) > 1:
            problems.append(f"{what} differ: " + "; ".join(f"{h}: {v}" for h, v in seen.items()))
    return problems


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_port_span": lambda value: list(port_span(value)),
            "ray_port_range_error": port_range_error,
            "ray_debugger_port_range_error": debugger_port_range_error,
            "ray_path_problems": path_problems,
            "ray_invalid_cidrs": invalid_cidrs,
            "ray_ports_overlapping": ports_overlapping,
            "ray_nft_ports": nft_ports,
            "ray_cidrs_of_family": cidrs_of_family,
            "ray_interface_for_ip": interface_for_ip,
            "ray_oldest_version": oldest_version,
            "ray_nodes_not_ready": nodes_not_ready,
            "ray_alive_node_ids": alive_node_ids,
            "ray_nodes_not_joined": nodes_not_joined,
            "ray_gpu_inventory": gpu_inventory,
            "ray_gpu_summary": gpu_summary,
            "ray_gpu_node_lines": gpu_node_lines,
            "ray_gpu_total": gpu_total,
            "ray_gpu_mismatches": gpu_mismatches,
            "ray_network_host": network_host,
            "ray_nccl_env": nccl_env,
            "ray_auth_env": auth_env,
            "ray_routable_addresses": routable_addresses,
            "ray_node_record": node_record,
            "ray_debugger_port_shortfalls": debugger_port_shortfalls,
            "ray_verl_fit_shortfalls": verl_fit_shortfalls,
            "ray_pythons_outside": pythons_outside,
            "ray_debugger_proof_problems": debugger_proof_problems,
            "ray_debug_variable_names": debug_variable_names,
            "ray_unit_up": unit_up,
        }
