"""Gather one node's evidence of a hang into a tar.gz, and print its index as JSON.

Run as root on the node by the ray_evidence role (the node's own python3, no packages): the
Ray logs of the session or of one job, the Ray unit's journal, the kernel's GPU fault lines,
`nvidia-smi -q`, the NCCL and PyTorch dumps, the NIC and RDMA state. Each part is capped,
newest first; what a node lacks is recorded with the reason, never fatal. The cluster token
is cut out of every file before it is archived.

    python3 ray_evidence_collect.py --cap-bytes N --dump-dir D [--job ID ...] [--token-file F]

It prints {"archive": PATH, "index": {...}}: the archive is a root-only file in the node's
temp directory, for the controller to fetch and remove.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REDACTED = b"<redacted: cluster token>"
# Every Ray process of a session logs here; session_latest links to the newest session.
RAY_LOGS = "/tmp/ray/session_latest/logs"
# A node's Ray-side context for a job's files: its raylet and dashboard agent.
NODE_LOGS = ("raylet.out", "raylet.err", "dashboard_agent.log")
COMMAND_TIMEOUT_S = 30


@dataclass
class Part:
    """One capped section of the archive: files newest first until its cap is spent."""

    name: str
    cap: int
    files: list[dict[str, object]] = field(default_factory=list)
    left_out: int = 0
    used: int = 0

    @property
    def room(self) -> int:
        return self.cap - self.used

    def add(
        self, archive: tarfile.TarFile, name: str, data: bytes, mtime: float, cut: bool = False
    ) -> None:
        """Add `data` (`cut`: already only the end of its file), or count it left out."""
        room = self.room
        if room <= 0:
            self.left_out += 1
            return
        # A log's newest lines are at its end: a file over the cap keeps its tail.
        truncated = cut or len(data) > room
        kept = data[-room:] if len(data) > room else data
        info = tarfile.TarInfo(f"{self.name}/{name}")
        info.size, info.mtime, info.mode = len(kept), int(mtime), 0o644
        archive.addfile(info, io.BytesIO(kept))
        self.used += len(kept)
        self.files.append({"name": name, "bytes": len(kept), "truncated": truncated})


class Collector:
    def __init__(self, archive: tarfile.TarFile, cap: int, token: bytes) -> None:
        self.archive, self.cap, self.token = archive, cap, token
        self.parts: list[Part] = []
        self.missing: dict[str, str] = {}

    def part(self, name: str) -> Part:
        part = Part(name, self.cap)
        self.parts.append(part)
        return part

    def scrub(self, data: bytes) -> bytes:
        return data.replace(self.token, REDACTED) if self.token else data

    def add_files(self, name: str, paths: list[str], what: str) -> None:
        """Add `paths` as part `name`, newest first; record `what` as missing when none."""
        found = [path for path in paths if os.path.isfile(path)]
        if not found:
            self.missing[name] = what
            return
        part = self.part(name)
        for path in sorted(found, key=os.path.getmtime, reverse=True):
            data, cut = self.read_end(path, part.room)
            part.add(self.archive, os.path.basename(path), data, os.path.getmtime(path), cut)

    def read_end(self, path: str, room: int) -> tuple[bytes, bool]:
        """The file's last `room` bytes, the token cut out, and whether its start was left
        behind: a log of gigabytes is never read whole, and a full part reads nothing."""
        if room <= 0:
            return b"", False
        # A token may straddle where the read starts: read one token's length more and drop
        # it after scrubbing, so no piece of a token is kept.
        margin = len(self.token)
        with open(path, "rb") as source:
            size = source.seek(0, os.SEEK_END)
            cut = size > room + margin
            source.seek(size - room - margin if cut else 0)
            data = self.scrub(source.read())
        return (data[margin:] if cut else data), cut

    def add_command(self, part: Part, name: str, argv: list[str]) -> bool:
        """Add a command's output to `part`; False (and recorded) when it cannot run."""
        if not shutil.which(argv[0]):
            self.missing[f"{part.name}/{name}"] = f"no {argv[0]} on this node"
            return False
        try:
            run = subprocess.run(argv, capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            self.missing[f"{part.name}/{name}"] = f"{' '.join(argv)} ran past {COMMAND_TIMEOUT_S} s"
            return False
        if run.returncode != 0 and not run.stdout:
            reason = run.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            self.missing[f"{part.name}/{name}"] = f"{' '.join(argv)}: {reason[0]}"
            return False
        part.add(self.archive, name, self.scrub(run.stdout), time.time())
        return True

    def index(self) -> dict[str, object]:
        return {
            "parts": {
                part.name: {"files": part.files, "bytes": part.used, "left_out": part.left_out}
                for part in self.parts
            },
            "missing": self.missing,
        }


def ray_log_paths(jobs: list[str]) -> list[str]:
    """The session's logs, or a job's: its driver's and its workers' (named by either id)."""
    every = glob.glob(os.path.join(RAY_LOGS, "**", "*"), recursive=True)
    return [
        path for path in every if not jobs or any(job in os.path.basename(path) for job in jobs)
    ]


def collect(collector: Collector, jobs: list[str], unit: str, dump_dir: str) -> None:
    what = f"no Ray log of job {' / '.join(jobs)}" if jobs else "no Ray session"
    collector.add_files("ray-logs", ray_log_paths(jobs), f"{what} under {RAY_LOGS}")
    if jobs:
        collector.add_files(
            "ray-node-logs",
            [os.path.join(RAY_LOGS, name) for name in NODE_LOGS],
            f"no raylet or dashboard agent log under {RAY_LOGS}",
        )

    journal = collector.part("journal")
    collector.add_command(journal, f"{unit}.log", ["journalctl", "-u", unit, "--no-pager"])

    kernel = collector.part("kernel")
    # Xid lines are the GPU's own fault reports (NVRM: Xid (PCI:...): 79, ...).
    collector.add_command(
        kernel, "gpu-faults.log", ["journalctl", "-k", "--no-pager", "--grep", "NVRM|Xid"]
    )

    gpu = collector.part("gpu")
    collector.add_command(gpu, "nvidia-smi-q.txt", ["nvidia-smi", "-q"])

    collector.add_files(
        "dumps", glob.glob(os.path.join(dump_dir, "*")), f"no NCCL or PyTorch dump in {dump_dir}"
    )

    network = collector.part("network")
    collector.add_command(network, "ip-addr.txt", ["ip", "-d", "-s", "address"])
    collector.add_command(network, "ip-route.txt", ["ip", "route"])
    if not collector.add_command(network, "rdma-link.txt", ["rdma", "link", "show"]):
        collector.add_command(network, "ibv-devinfo.txt", ["ibv_devinfo", "-v"])
    ports = glob.glob("/sys/class/infiniband/*/ports/*/*state")
    if ports:
        text = "".join(f"{path}: {Path(path).read_text()}" for path in sorted(ports))
        network.add(collector.archive, "infiniband-ports.txt", text.encode(), time.time())
    else:
        collector.missing["network/infiniband-ports.txt"] = "no /sys/class/infiniband device"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap-bytes", type=int, required=True)
    parser.add_argument("--job", action="append", default=[], help="submission or Ray job id")
    parser.add_argument("--token-file", default="")
    parser.add_argument("--unit", default="ray")
    parser.add_argument("--dump-dir", required=True)
    args = parser.parse_args(argv)
    token = b""
    if args.token_file and os.path.isfile(args.token_file):
        with open(args.token_file, "rb") as source:
            token = source.read().strip()
    # A new file only root may read (mkstemp: 0600, never an existing path).
    descriptor, path = tempfile.mkstemp(prefix="ray-evidence-", suffix=".tar.gz")
    with os.fdopen(descriptor, "wb") as out, tarfile.open(fileobj=out, mode="w:gz") as archive:
        collector = Collector(archive, args.cap_bytes, token)
        collect(collector, args.job, args.unit, args.dump_dir)
    json.dump({"archive": path, "index": collector.index()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
