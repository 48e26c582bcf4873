"""The evidence archive's two halves without a cluster: the node collector (run as a script,
as the role runs it) and the controller's assembler. The molecule clusters run them for real
(test_hang.py, test_faults.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import ray_evidence_collect

from ray_debug_tools import evidence

TOKEN = "s3cr3t-token-value"


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A node's Ray logs, dumps and token, under tmp_path."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "job-driver-raysubmit_A.log").write_text(f"driver of A, token {TOKEN}\n")
    (logs / "worker-ff-02000000-123.out").write_text("worker of A\n")
    (logs / "worker-ee-03000000-456.out").write_text("worker of B\n")
    (logs / "raylet.out").write_text("raylet\n")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for age, name in enumerate(["nccl_trace_rank_0", "nccl_trace_rank_1"]):
        (dumps / name).write_bytes(b"x" * 600 + name.encode())
        os.utime(dumps / name, (1000 - age, 1000 - age))
    (tmp_path / "token").write_text(TOKEN + "\n")
    monkeypatch.setattr(ray_evidence_collect, "RAY_LOGS", str(logs))
    return tmp_path


def collect(node: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    code = ray_evidence_collect.main(
        [
            "--cap-bytes",
            "1000",
            "--token-file",
            str(node / "token"),
            "--dump-dir",
            str(node / "dumps"),
            *extra,
        ]
    )
    assert code == 0
    return json.loads(capsys.readouterr().out)


def members(archive: str) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_job_s_logs_are_its_driver_s_and_workers_and_the_token_is_cut_out(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = collect(node, capsys, "--job", "raysubmit_A", "--job", "02000000")
    files = members(report["archive"])
    assert stat.S_IMODE(os.stat(report["archive"]).st_mode) == 0o600
    os.unlink(report["archive"])
    assert {name for name in files if name.startswith("ray-")} == {
        "ray-logs/job-driver-raysubmit_A.log",
        "ray-logs/worker-ff-02000000-123.out",
        "ray-node-logs/raylet.out",
    }
    assert not any(TOKEN.encode() in data for data in files.values())
    assert b"<redacted: cluster token>" in files["ray-logs/job-driver-raysubmit_A.log"]


def test_each_part_keeps_its_newest_files_up_to_its_cap(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = collect(node, capsys)
    files = members(report["archive"])
    os.unlink(report["archive"])
    dumps = report["index"]["parts"]["dumps"]
    # 617 bytes each under a 1000-byte cap: the newer whole, the older its last 383 bytes.
    assert [(f["name"], f["truncated"]) for f in dumps["files"]] == [
        ("nccl_trace_rank_0", False),
        ("nccl_trace_rank_1", True),
    ]
    assert dumps["bytes"] == 1000
    assert files["dumps/nccl_trace_rank_1"].endswith(b"nccl_trace_rank_1")


def test_a_file_over_the_cap_keeps_its_end_and_no_piece_of_a_token_where_it_was_cut(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A real token's length (48), longer than what replaces it: the read of 1048 bytes (the
    # 1000-byte cap and one token) starts inside the first token, at byte 60 of 1108.
    token = b"Z" * 48
    (node / "token").write_bytes(token + b"\n")
    log = b"x" * 40 + token + b"y" * 500 + token + b"y" * 472
    (node / "logs" / "raylet.out").write_bytes(log)
    report = collect(node, capsys)
    files = members(report["archive"])
    os.unlink(report["archive"])
    assert files["ray-logs/raylet.out"] == b"y" * 480 + ray_evidence_collect.REDACTED + b"y" * 472
    logs = {f["name"]: f for f in report["index"]["parts"]["ray-logs"]["files"]}
    assert logs["raylet.out"]["truncated"]


def test_what_a_node_lacks_is_named_with_the_reason(
    node: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    report = collect(node, capsys, "--job", "raysubmit_Z")
    os.unlink(report["archive"])
    missing = report["index"]["missing"]
    assert missing["gpu/nvidia-smi-q.txt"] == "no nvidia-smi on this node"
    assert missing["journal/ray.log"] == "no journalctl on this node"
    assert missing["ray-logs"].startswith("no Ray log of job raysubmit_Z under ")


def test_the_collector_runs_as_a_script_on_the_node_s_python(tmp_path: Path) -> None:
    script = Path(ray_evidence_collect.__file__)
    run = subprocess.run(
        [sys.executable, str(script), "--cap-bytes", "100", "--dump-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(run.stdout)
    os.unlink(report["archive"])
    assert "dumps" in report["index"]["missing"]


def test_the_archive_names_every_node_and_why_one_is_missing(
    node: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = collect(node, capsys)
    staging = tmp_path / "staging"
    staging.mkdir()
    os.replace(report["archive"], staging / "head.tar.gz")
    results = {
        "head": {"rc": 0, "stdout": json.dumps(report)},
        "worker1": {"unreachable": True, "msg": "Failed to connect to the host via ssh"},
        "worker2": {"rc": 1, "stderr": "Traceback\nPermissionError: denied\n"},
    }
    nodes = {name: evidence.node_entry(result) for name, result in results.items()}
    out = evidence.assemble(
        staging, nodes, tmp_path / "out", {"cluster": "c", "job": "", "part_cap_bytes": 1000}
    )
    assert not staging.exists()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    files = members(str(out))
    index = json.loads(files["index.json"])
    assert index["nodes"]["worker1"] == {
        "status": "unreachable",
        "reason": "Failed to connect to the host via ssh",
    }
    assert index["nodes"]["worker2"] == {"status": "failed", "reason": "PermissionError: denied"}
    assert "head/ray-logs/raylet.out" in files
    assert "## worker1: unreachable" in files["INDEX.md"].decode()
    assert "| dumps | nccl_trace_rank_1 (its end) | 383 |" in files["INDEX.md"].decode()


def test_make_evidence_runs_the_playbook_for_a_job_or_the_session() -> None:
    def recipe(*variables: str) -> list[str]:
        run = subprocess.run(
            ["make", "-n", "--no-print-directory", "evidence", "INVENTORY=inv.yml", *variables],
            cwd=Path(__file__).parents[2],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return [line for line in run.stdout.splitlines() if "playbooks/evidence.yml" in line]

    assert recipe("JOB=raysubmit_1") == [
        "ansible-playbook -i inv.yml playbooks/evidence.yml -e ray_evidence_job=raysubmit_1"
    ]
    assert recipe() == ["ansible-playbook -i inv.yml playbooks/evidence.yml "]
