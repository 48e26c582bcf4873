"""verl-debug stacks' reading of py-spy dumps (ray_debug_tools/worker_stacks.py) and its grouping
(stack_views.py). The dumps are py-spy 0.4's output format; the molecule clusters run the
command against a real hung job (molecule/shared/tests/test_hang.py)."""

from __future__ import annotations

import json

from ray_debug_tools.stack_views import format_report, group, report_json
from ray_debug_tools.worker_stacks import Stack, Worker, parse_dump

WAITING = """Process {pid}: ray::rank_step
Python v3.11.2 (/opt/ray-cluster/venv/bin/python3.11)

Thread {pid} (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2806)
    wrapper (torch/distributed/c10d_logger.py:81)
    rank_step (hung_allreduce.py:42)
    main_loop (ray/_private/workers/default_worker.py:289)
Thread {other} (idle): "ray_print_logs"
    wait (threading.py:{line})
"""
SLEEPING = """Process 900: ray::rank_step
Python v3.11.2 (/opt/ray-cluster/venv/bin/python3.11)

Thread 900 (idle): "MainThread"
    odd_rank_sleeps (hung_allreduce.py:28)
    rank_step (hung_allreduce.py:40)
    main_loop (ray/_private/workers/default_worker.py:289)
"""
NATIVE = """Thread 77 (idle): "MainThread"
    pthread_cond_wait (libc.so.6)
    gloo::AllreduceOptions::wait (libgloo.so)
    0x7fe1f624524a (libc.so.6)
"""


def worker(ip: str, pid: int) -> Worker:
    return Worker(ip, pid, f"w{pid}", "rank_step", "02000000")


def test_a_dump_is_read_as_threads_and_frames() -> None:
    threads = parse_dump(WAITING.format(pid=7, other=8, line=1))
    assert [name for name, _ in threads] == ["MainThread", "ray_print_logs"]
    assert threads[0][1][0] == "all_reduce (torch/distributed/distributed_c10d.py:2806)"


def test_ranks_group_by_their_task_threads_and_the_odd_one_stands_alone() -> None:
    """Ray's own threads differ between workers (here at another line) and do not split a
    group; the odd rank's stack is a group of its own, listed after the largest."""
    read = [
        Stack(worker("10.0.0.11", 100 + rank), parse_dump(
            WAITING.format(pid=100 + rank, other=200 + rank, line=300 + rank)))
        for rank in range(3)
    ] + [Stack(worker("10.0.0.12", 900), parse_dump(SLEEPING))]  # fmt: skip
    groups = group(read)
    assert [len(found.stacks) for found in groups] == [3, 1]
    assert groups[1].stacks[0].worker.pid == 900
    assert groups[1].signature[0][1][0].startswith("odd_rank_sleeps")
    every_thread = group(read, all_threads=True)
    assert len(every_thread) == 4


def test_native_addresses_do_not_split_a_group() -> None:
    other = NATIVE.replace("0x7fe1f624524a", "0x7f0000001234").replace("77", "78")
    read = [Stack(worker("10.0.0.11", 77), parse_dump(NATIVE)),
            Stack(worker("10.0.0.11", 78), parse_dump(other))]  # fmt: skip
    assert len(group(read)) == 1


def test_the_report_names_the_odd_rank_and_the_workers_not_read() -> None:
    read = [
        Stack(worker("10.0.0.11", 101), parse_dump(WAITING.format(pid=101, other=2, line=1))),
        Stack(worker("10.0.0.11", 102), parse_dump(WAITING.format(pid=102, other=3, line=1))),
        Stack(worker("10.0.0.12", 900), parse_dump(SLEEPING)),
    ]
    refused = Stack(worker("10.0.0.13", 5), error="HTTP 403: Profiling is disabled")
    groups = group([*read, refused])
    text = format_report(groups, [refused], workers=4, seconds=1.25)
    assert text.splitlines()[0] == "3 of 4 workers read on 2 nodes in 1.2 s, 2 distinct stacks"
    assert "[2] 1 worker (odd one out)\n    10.0.0.12 pid 900 rank_step" in text
    assert "not read (1):\n    10.0.0.13 pid 5 rank_step: HTTP 403: Profiling is disabled" in text
    parsed = json.loads(report_json(groups, [refused]))
    assert [group["workers"][0]["pid"] for group in parsed["groups"]] == [101, 900]
    assert parsed["not_read"][0]["error"].startswith("HTTP 403")


def test_a_dump_without_threads_is_an_error_not_an_empty_stack() -> None:
    assert parse_dump("Error: Permission denied (os error 13)\n") == []
