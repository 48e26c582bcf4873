"""What the facts play needs from a node that Ansible's facts lack; prints one JSON object.

Run with the Python the cluster's venv will be built from (ray_base_python): its version and
glibc decide which wheels the node can load. One run answers for the Python, the CPUs, the
network, the RDMA devices, the GPUs, the groups and accounts, the firewall's package, unit and
live table, the venv's lock and packages, Ray's unit, the files the node_files module put in
their state, and on the head the last proof and the nodes its running Ray lists: each
module run costs a node a Python start. Read-only. The node_probe action
(plugins/action/node_probe.py) runs it and computes the node's facts from what it prints.

    node_probe.py --nvidia-smi CMD --driver FILE --venv DIR --firewall-unit UNIT \
        --ray-unit UNIT --files-record FILE --proof-record FILE [--operator NAME ...] \
        [--nodes-api URL [--token-file FILE]]
"""

from __future__ import annotations

import argparse
import grp
import hashlib
import json
import os
import platform
import pwd
import re
import shutil
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

RDMA_ROOT = Path("/sys/class/infiniband")
ROCE_V2 = "RoCE v2"
# An IPv4-mapped GID (::ffff:a.b.c.d): RoCE v2 routes it like the port's IPv4 address.
IPV4_MAPPED_PREFIX = "0000:0000:0000:0000:0000:ffff:"


def _read(path: Path) -> str:
    # The kernel answers EINVAL for GID table entries that are not in use.
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def roce_v2_ipv4_gid_indexes(port: Path) -> list[int]:
    """GID table entries of a RoCE port that carry its IPv4 address over RoCE v2."""
    types = port / "gid_attrs" / "types"
    indexes = sorted(int(entry.name) for entry in types.iterdir()) if types.is_dir() else []
    return [
        index
        for index in indexes
        if _read(types / str(index)) == ROCE_V2
        and _read(port / "gids" / str(index)).startswith(IPV4_MAPPED_PREFIX)
    ]


def rdma_devices(root: Path = RDMA_ROOT) -> dict[str, Any]:
    """The node's RDMA devices, split by link layer, and the GID index RoCE v2 needs.

    ConnectX ports in Ethernet mode (RoCE) sit under /sys/class/infiniband beside real
    InfiniBand ones; NCCL uses both through verbs, but on RoCE it needs NCCL_IB_GID_INDEX to
    pick a GID that routes (the default, 0, is a RoCE v1 link-local one). The index is the
    lowest one valid on every RoCE port of the node, or None when they share none.
    """
    infiniband, roce, candidates = [], [], []
    for device in sorted(root.iterdir()) if root.is_dir() else []:
        ports = sorted((device / "ports").iterdir()) if (device / "ports").is_dir() else []
        ethernet = [port for port in ports if _read(port / "link_layer") == "Ethernet"]
        if ethernet:
            roce.append(device.name)
            candidates += [set(roce_v2_ipv4_gid_indexes(port)) for port in ethernet]
        else:
            infiniband.append(device.name)
    shared = set.intersection(*candidates) if candidates else set()
    return {
        "infiniband": infiniband,
        "roce": roce,
        "roce_gid_index": min(shared) if shared else None,
    }


CSV = "--format=csv,noheader,nounits"


def run(argv: list[str]) -> dict[str, Any]:
    """rc and output of a command; a command the node lacks answers rc 127, as a shell would."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as problem:
        return {"rc": 127, "stdout": "", "stderr": str(problem)}
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def nvidia(command: str, driver: str) -> dict[str, Any]:
    """nvidia-smi's GPU list and its banner, where it prints the CUDA version the driver
    supports (a node without the driver has no nvidia-smi: both fail and it has no GPUs), and
    the path that shows a loaded driver, or None."""
    return {
        "query": run([command, "--query-gpu=index,name,memory.total,driver_version", CSV]),
        "banner": run([command]),
        "driver": driver if os.path.exists(driver) else None,
    }


# Whether a unit runs, starts at boot, and runs the unit file on disk; when its process started
# (against its files' mtimes: one clock, --timestamp=unix).
UNIT_PROPERTIES = ("ActiveState", "UnitFileState", "NeedDaemonReload", "ExecMainStartTimestamp")


def unit_states(names: list[str], shown: str) -> dict[str, dict[str, str]]:
    """`systemctl show` of several units prints one block per unit, in the order asked."""
    blocks = shown.strip().split("\n\n") if shown.strip() else []
    return {
        name: dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        for name, block in zip(names, blocks, strict=False)
    }


def units(names: list[str]) -> dict[str, dict[str, str]]:
    """What systemd says of each unit; nothing where systemd does not answer."""
    if not names:
        return {}
    properties = "--property=" + ",".join(UNIT_PROPERTIES)
    shown = run(["systemctl", "show", properties, "--timestamp=unix", *names])
    return unit_states(names, shown["stdout"]) if shown["rc"] == 0 else {}


# Where nft and ip live on nodes whose PATH (a non-login shell's) leaves out sbin.
SBIN_PATHS = "/usr/sbin:/sbin"


def sbin_command(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SBIN_PATHS)


def loaded_listing(firewall_unit: str) -> Path:
    """Where the firewall unit keeps its table as it loaded it (ray-firewall.service.j2)."""
    return Path("/run", firewall_unit, "loaded.nft")


def firewall_table(firewall_unit: str) -> str:
    """The live table against the one the firewall unit loaded: "intact", "changed" (a rule
    added or removed behind the unit's back), or "unknown" (no running unit says what it
    loaded). Stateless listings: the counters change with traffic, the rules do not."""
    loaded = _read(loaded_listing(firewall_unit))
    named = re.match(r"table (\S+) (\S+) \{", loaded)
    nft = sbin_command("nft")
    if not named or not nft:
        return "unknown"
    live = run([nft, "--stateless", "list", "table", named.group(1), named.group(2)])
    return "intact" if live["rc"] == 0 and live["stdout"].strip() == loaded else "changed"


PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def distribution(name: str) -> str:
    """A distribution's name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(venv: Path) -> dict[str, str]:
    """The venv's distributions and versions, from their .dist-info directories' names."""
    found = {}
    for info in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        found[distribution(name)] = version
    return found


def venv_packages(venv: Path) -> dict[str, Any]:
    """The lock the venv recorded at its last sync, and its pins the venv no longer holds: a
    package removed or changed behind the tool's back, which the next sync puts back. Packages
    beside the lock are not counted: `uv pip sync` keeps a venv's own pip and setuptools."""
    record = venv / "requirements.lock"
    if not record.is_file():
        return {"lock_sha256": None, "drift": []}
    lock = record.read_bytes()
    present = installed(venv)
    drift = [
        f"{name}=={version} (the venv has {present.get(name, 'none')})"
        for name, version in sorted(
            (distribution(name), version) for name, version in PIN.findall(lock.decode())
        )
        if present.get(name) != version
    ]
    return {"lock_sha256": hashlib.sha256(lock).hexdigest(), "drift": drift}


def observe(path: str) -> dict[str, Any] | None:
    """A path's state as the node_files action compares it: its kind, a file's content sha256,
    its mode, owner and group, a link's target; None where nothing is there."""
    try:
        found = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(found.st_mode):
        return {"state": "link", "src": os.readlink(path)}
    seen = {
        "mode": f"{stat.S_IMODE(found.st_mode):04o}",
        "owner": _name(pwd.getpwuid, found.st_uid),
        "group": _name(grp.getgrgid, found.st_gid),
    }
    if stat.S_ISDIR(found.st_mode):
        return {"state": "directory", **seen}
    if stat.S_ISREG(found.st_mode):
        if found.st_mode & stat.S_IROTH:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            return {"state": "file", "sha256": digest, "mtime": int(found.st_mtime), **seen}
        # A file others may not read (the token) keeps its digest off the log. Its identity
        # (inode, change time) is what any write, chmod, chown or replacement changes: the
        # action takes it as holding only where it is the very file whose content the module
        # last confirmed (its witness, on the controller).
        identity = [found.st_ino, found.st_ctime_ns]
        return {"state": "file", "sha256": None, "identity": identity,
                "mtime": int(found.st_mtime), **seen}  # fmt: skip
    return {"state": "other"}


def _name(lookup: Any, number: int) -> str:
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def read_json(path: Path) -> Any:
    """A JSON file the tool keeps on the node, or None where it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# What the roles read of a row of the head's node list (ray_node_list's filters): a cluster of
# hundreds of nodes answers with every row's labels and times besides.
NODE_ROW_FIELDS = ("node_id", "node_ip", "state", "resources_total")
# A head whose dashboard hangs must not hold the run: the roles ask again where this fails.
NODES_API_TIMEOUT_S = 5


def head_nodes(api: str | None, token_file: Path | None) -> dict[str, Any] | None:
    """The node list of the Ray running on this node, the head, as read_nodes' request gets it
    (status, and rows under json.data.result.result), from which a run that starts no Ray
    proves the cluster whole. None where not asked (any other node); a status of -1 where no
    dashboard answered (Ray not running)."""
    if api is None:
        return None
    token = _read(token_file) if token_file else ""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        request = urllib.request.Request(api, headers=headers)
        with urllib.request.urlopen(request, timeout=NODES_API_TIMEOUT_S) as answer:
            status, body = answer.status, json.load(answer)
        rows = body["data"]["result"]["result"]
    except urllib.error.HTTPError as refused:
        return {"status": refused.code, "msg": str(refused)}
    except (OSError, ValueError, KeyError, TypeError) as problem:
        return {"status": -1, "msg": str(problem)}
    cut = [{field: row.get(field) for field in NODE_ROW_FIELDS} for row in rows]
    return {"status": status, "json": {"data": {"result": {"result": cut}}}}


def observed_files(record: Path) -> dict[str, Any]:
    """Every path the node_files module recorded on the node, observed now: the action compares
    a re-run's entries with these and sends only those that differ."""
    paths = read_json(record) or []
    return {"record": str(record), "paths": {path: observe(path) for path in paths}}


def network() -> dict[str, Any]:
    """What Ansible's network facts gave the facts play, read as Ansible reads them: the source
    address of the route to a public address (ray_node_ip's default; none without such a
    route), and every interface with its addresses."""
    ip = sbin_command("ip") or "ip"
    route = run([ip, "-4", "route", "get", "8.8.8.8"])
    source = re.search(r"\bsrc (\S+)", route["stdout"]) if route["rc"] == 0 else None
    shown = run([ip, "-json", "address", "show"])
    links = json.loads(shown["stdout"] or "[]") if shown["rc"] == 0 else []
    return {
        "default_ipv4": source.group(1) if source else "",
        "interfaces": {
            link["ifname"]: [address["local"] for address in link.get("addr_info", [])]
            for link in links
        },
    }


# Accounts up to here are system accounts (Debian's SYS_UID_MAX), Ray's among them.
SYSTEM_UID_MAX = 999


def accounts(named: list[str], groups: list[grp.struct_group]) -> dict[str, dict[str, Any]]:
    """The system accounts and the `named` ones (the operators, looked up one by one: a
    directory service may not list its users), as the user module would compare them."""
    supplementary: dict[str, list[str]] = {}
    for group in groups:
        for member in group.gr_mem:
            supplementary.setdefault(member, []).append(group.gr_name)
    entries = {entry.pw_name: entry for entry in pwd.getpwall() if entry.pw_uid <= SYSTEM_UID_MAX}
    for name in named:
        try:
            entries[name] = pwd.getpwnam(name)
        except KeyError:
            continue
    return {
        name: {
            "group": _name(grp.getgrgid, entry.pw_gid),
            "groups": sorted(supplementary.get(name, [])),
            "home": entry.pw_dir,
            "home_exists": os.path.isdir(entry.pw_dir),
            "shell": entry.pw_shell,
        }
        for name, entry in entries.items()
    }


def probe(args: argparse.Namespace) -> dict[str, Any]:
    groups = grp.getgrall()
    return {
        "version": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "machine": platform.machine(),
        "glibc": platform.libc_ver()[1],
        "cpus": len(os.sched_getaffinity(0)),
        "network": network(),
        "rdma": rdma_devices(),
        "nvidia": nvidia(args.nvidia_smi, args.driver),
        # Ray's user joins the GPU and RDMA device groups the node has.
        "groups": sorted(group.gr_name for group in groups),
        "accounts": accounts(args.operator, groups),
        "units": units([args.firewall_unit, args.ray_unit]),
        # nftables' command, where the firewall would install the package.
        "nft": sbin_command("nft"),
        "firewall_table": firewall_table(args.firewall_unit),
        "venv": venv_packages(args.venv),
        "files": observed_files(args.files_record),
        # The head's record of the last passing proof (ray_verify), or None.
        "last_proof": read_json(args.proof_record),
        "head_nodes": head_nodes(args.nodes_api, args.token_file),
    }


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="node_probe.py", description=__doc__.split("\n")[0])
    parser.add_argument("--nvidia-smi", required=True, help="nvidia-smi's command")
    parser.add_argument("--driver", required=True, help="the NVIDIA driver's /proc file")
    parser.add_argument("--venv", required=True, type=Path, help="the cluster venv")
    parser.add_argument("--firewall-unit", required=True, help="the firewall's systemd unit")
    parser.add_argument("--ray-unit", required=True, help="Ray's systemd unit")
    parser.add_argument(
        "--files-record", required=True, type=Path, help="where node_files lists its paths"
    )
    parser.add_argument(
        "--proof-record", required=True, type=Path, help="where the head keeps the last proof"
    )
    parser.add_argument(
        "--operator", action="append", default=[], help="an account to read (repeated)"
    )
    parser.add_argument("--nodes-api", help="on the head: its dashboard's node list, to read")
    parser.add_argument(
        "--token-file", type=Path, help="on the head: the cluster token its Ray runs with"
    )
    return parser


def main(argv: list[str]) -> None:
    print(json.dumps(probe(parser().parse_args(argv))))


if __name__ == "__main__":
    main(sys.argv[1:])
