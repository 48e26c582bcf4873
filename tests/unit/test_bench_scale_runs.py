"""The bench's report lists each scale run with its nodes' CPU and longest tasks, so that a
slow sample says what it spent its time on."""

from bench.report import scale_runs

ROW = {"what": "scale", "method": "cluster-up", "at": "2026-12-06 21:00"}


def test_each_run_shows_its_nodes_cpu_and_three_longest_tasks() -> None:
    tasks = [
        ["verl_debug.cluster.ray_defaults : Ask the head for its nodes", 30.14],
        ["verl_debug.cluster.ray_python : Sync the venv with the lock", 25.0],
        ["verl_debug.cluster.ray_verify : Prove every node's debugger and GPUs", 6.04],
        ["verl_debug.cluster.wheelhouse : Unpack the wheelhouse archive on the head", 3.6],
    ]
    four = {"node_cpu_s": {"head": 40.2, "w1": 20.1}, "tasks": tasks}
    one = {"node_cpu_s": {"head": 30.0}, "tasks": tasks[3:]}
    rows = [
        {**ROW, "workers": 4, "seconds": 81.2, **four},
        {**ROW, "workers": 1, "seconds": 32.0, **one},
    ]
    # By worker count, the fewest first.
    assert [
        line for line in scale_runs(rows) if line.startswith("| 1") or line.startswith("| 4")
    ] == [
        "| 1 | 32 s | 30 s | Unpack the wheelhouse archive on the head 3.6 s |",
        "| 4 | 81 s | 60 s | Ask the head for its nodes 30.1 s, Sync the venv with the lock 25.0 s,"
        " Prove every node's debugger and GPUs 6.0 s |",
    ]


def test_samples_without_tasks_add_nothing() -> None:
    assert scale_runs([{**ROW, "workers": 1, "seconds": 32.0, "sent_mb": 136.0}]) == []
