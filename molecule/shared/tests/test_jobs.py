"""Tasks on every worker see the runtime env, their node's NCCL/GLOO interface and verl."""

from __future__ import annotations

import json

from conftest import Cluster, wait_for_job
from ray.job_submission import JobStatus


def test_tasks_see_runtime_env_interfaces_and_verl(cluster: Cluster, submit, jobs, host_of) -> None:
    # A model on a home directory (often NFS on GPU clusters): tasks must read it. Its
    # directory lets anyone write, so a failed write can only be the read-only mount (homes
    # themselves may be 0700, as Debian 13 makes them).
    for worker in cluster.worker_ips:
        host_of(worker).check_output(
            "install -d -m 1777 /home/models && install -m 0644 /dev/null /home/models/model.bin"
        )
    job_id = submit("environment.py", *cluster.worker_ips.values())
    assert wait_for_job(jobs, job_id) == JobStatus.SUCCEEDED, jobs.get_job_logs(job_id)
    logs = jobs.get_job_logs(job_id)
    seen = json.loads(logs.split("RESULT ", 1)[1].splitlines()[0])

    assert sorted(seen) == sorted(cluster.worker_ips.values())
    for task in seen.values():
        env = task["env"]
        assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"
        assert env["TORCH_NCCL_AVOID_RECORD_STREAMS"] == "1"
        assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
        assert (
            env["RAY_DEBUGGER_PORT_RANGE"]
            == f"{cluster.debugger_range[0]}-{cluster.debugger_range[-1]}"
        )
        assert (env["RAY_DEBUG"] == "legacy") == (cluster.mode == "legacy")
        assert (env["RAY_DEBUG_POST_MORTEM"] == "1") == (cluster.mode == "post_mortem")
        assert task["verl"] == cluster.verl_version
        assert task["python"].startswith("/opt/ray-cluster/venv/")
        # ProtectHome=read-only: readable, and a write fails on the mount, not on permissions.
        assert task["home"] == {"read": True, "write": "EROFS"}
        # The venv is root's: a worker writes the bytecode of what it loads, verl included, in
        # Ray's home, where the next start reads it (a directory of root's there would refuse it).
        assert task["pycache_prefix"] == "/var/lib/ray/bytecode"
        assert task["uncompiled"] == [], task["uncompiled"]
