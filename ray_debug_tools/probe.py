"""Debug-readiness probe: prove from the operator's seat that every node can be debugged.

Submits probe_job.py, which pauses one task on every target node in that node's debug mode,
then finds each pause (GCS registry or dashboard state API), attaches to it from this machine
(pdb or DAP), releases it, and reports per node. Exits 1 with a diagnosis per failing node.
Only the probe job's own pauses are touched: on a shared cluster, others' are left waiting.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ray.job_submission import JobSubmissionClient

from ray_debug_tools import PROGRAM
from ray_debug_tools._jobs import cluster_parser, connect, parse_nodes, table_of
from ray_debug_tools._net import RayDebugConnectionError
from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import job_workers, legacy_breakpoints, paused_workers
from ray_debug_tools.pdb_client import PdbSession

PROG = f"{PROGRAM} probe"

JOB_SCRIPT = "probe_job.py"
COLUMNS = ("node", "ip", "ray", "GPUs", "NCCL/GLOO", "mode", "debugger", "reachable")


@dataclass
class NodeReport:
    name: str
    ip: str
    ray: str = "-"
    gpus: str = "-"
    ifname: str = "-"
    mode: str = "-"
    debugger: str = "-"
    reachable: str = "no"
    problem: str = ""
    # The node's RAY_DEBUGGER_PORT_RANGE as written, and as its hook reads it ([low, high])
    # or why it cannot.
    port_range: str | None = None
    debugger_ports: list[int] | str = "-"

    def row(self) -> tuple[str, ...]:
        return (self.name, self.ip, self.ray, self.gpus, self.ifname, self.mode, self.debugger,
                self.reachable)  # fmt: skip


def controller_address(toward: str) -> str:
    """The source address this machine uses to reach `toward` (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((toward, 9))
        return str(probe.getsockname()[0])


def apply_facts(report: NodeReport, facts: dict, stand_in: bool = False) -> None:
    """What the node's Ray said of itself; GPUs that are stand-ins (tests) are marked so."""
    if not facts.get("alive"):
        report.problem = "no alive Ray node with this address: run cluster-up.yml"
        return
    env = facts["env"]
    report.ray, report.gpus, report.mode = facts["ray"], f"{facts['gpus']:g}", facts["mode"]
    if stand_in and facts["gpus"]:
        report.gpus += " (stand-in)"
    report.ifname = f"{env['NCCL_SOCKET_IFNAME'] or '-'}/{env['GLOO_SOCKET_IFNAME'] or '-'}"
    report.port_range = env["RAY_DEBUGGER_PORT_RANGE"]
    report.debugger_ports = facts["debugger_ports"]
    if report.mode == "off":
        report.problem = (
            "debug mode is off: run cluster-up.yml -e debug_mode=post_mortem (or legacy)"
        )


def port_range_problem(report: NodeReport, port: int, expected: str) -> str:
    """Why the debugger on `port` shows the node's Ray not keeping to `expected`, or ''."""
    if isinstance(report.debugger_ports, str):
        return f"no debugger port range on this node: {report.debugger_ports}"
    if report.port_range != expected:
        return (
            f"the node's Ray runs with RAY_DEBUGGER_PORT_RANGE={report.port_range}, not "
            f"ray_debugger_port_range {expected}: run cluster-up.yml again"
        )
    low, high = report.debugger_ports
    if not low <= port <= high:
        return (
            f"debugger {report.ip}:{port} is outside ray_debugger_port_range {expected}: "
            "the port-range hook is not active on this node"
        )
    return ""


def attach(report: NodeReport, port: int, port_range: str) -> None:
    """Attach to the pause on report.ip:port from here, check it, and release it."""
    report.debugger = f"{report.ip}:{port}"
    report.problem = port_range_problem(report, port, port_range)
    try:
        if report.mode == "legacy":
            with PdbSession.connect(report.ip, port, timeout=5) as session:
                token = session.command("p probe_token")
                session.continue_()
            if f"probe-{report.ip}" not in token:
                report.problem = f"pdb answered {token.strip()!r} instead of the probe's token"
        else:
            with DapSession.connect(report.ip, port, timeout=5) as session:
                stopped = session.attach_for_post_mortem()
                session.continue_(stopped["body"]["threadId"])
                session.disconnect()
    except RayDebugConnectionError as error:
        seen_from = controller_address(report.ip)
        if "timed out" in str(error):
            report.problem = (
                f"debugger {report.debugger} filtered from {seen_from}: "
                f"add {seen_from}/32 (or its network) to ray_trusted_cidrs"
            )
        else:
            report.problem = f"debugger {report.debugger} not reachable from {seen_from}: {error}"
        return
    report.reachable = "yes"


@dataclass(frozen=True)
class SeenPause:
    """A pause waiting on a node, and whether the probe job is the one that made it."""

    ip: str
    port: int
    own: bool
    # Names another job's pause in the diagnosis, so the operator knows what was left alone.
    label: str


def seen_pauses(mode: str, head: str, ports: dict[str, int], job_id: str) -> list[SeenPause]:
    """Every pause currently waiting in `mode`, each marked own if Ray job `job_id` made it."""
    if mode == "legacy":
        # The registry entry names the job that set the breakpoint: Ray's own record, so
        # unlike the file name it tells this probe from another user's running the same script.
        return [
            SeenPause(pause.ip, pause.port, pause.job_id == job_id, f"job {pause.job_id}")
            for pause in legacy_breakpoints(f"{head}:{ports['gcs']}")
        ]
    dashboard = f"http://{head}:{ports['dashboard']}"
    # Worker rows carry no job id, but a worker only ever runs one job's tasks and the task
    # rows name both, as recorded by Ray itself; a marker printed to the job log could be
    # merged away by Ray's log deduplication. A fresh pause whose task row has not arrived
    # yet counts as foreign until it does: it is left alone, never attached to wrongly.
    ours = job_workers(dashboard, job_id)
    return [
        SeenPause(worker.ip, worker.port, worker.worker_id in ours, f"worker pid {worker.pid}")
        for worker in paused_workers(dashboard)
    ]


def wait_for_facts(client: JobSubmissionClient, submission_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = client.get_job_logs(submission_id)
        for line in logs.splitlines():
            if line.startswith("FACTS "):
                return json.loads(line.removeprefix("FACTS "))
        if client.get_job_status(submission_id).is_terminal():
            raise RuntimeError(f"probe job {submission_id} ended before reporting:\n{logs}")
        time.sleep(1)
    raise TimeoutError(f"probe job {submission_id} reported nothing within {timeout:g} s")


def ray_job_id(client: JobSubmissionClient, submission_id: str, timeout: float) -> str:
    """The hex Ray job id that pauses are recorded under, not the submission id of the job."""
    deadline = time.monotonic() + timeout
    # Unset until the job's driver has connected to Ray.
    while (job_id := client.get_job_info(submission_id).job_id) is None:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"probe job {submission_id} got no Ray job id within {timeout:g} s")
        time.sleep(1)
    return job_id


def probe(
    client: JobSubmissionClient,
    head: str,
    nodes: dict[str, str],
    runtime_env: dict,
    port_range: str,
    ports: dict[str, int],
    timeout: float,
    stand_ins: frozenset[str] = frozenset(),
) -> list[NodeReport]:
    """Every node's report; `stand_ins` are the names or addresses of nodes whose GPUs are
    stand-ins."""
    reports = {ip: NodeReport(name, ip) for name, ip in nodes.items()}
    submission_id = client.submit_job(
        entrypoint=" ".join(["python", JOB_SCRIPT, *reports]),
        runtime_env={**runtime_env, "working_dir": str(Path(__file__).parent)},
    )
    try:
        for ip, facts in wait_for_facts(client, submission_id, timeout).items():
            report = reports[ip]
            apply_facts(report, facts, report.name in stand_ins or ip in stand_ins)
        job_id = ray_job_id(client, submission_id, timeout)
        waiting = {ip for ip, report in reports.items() if not report.problem}
        foreign: dict[str, set[str]] = {ip: set() for ip in waiting}
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for mode in {reports[ip].mode for ip in waiting}:
                for seen in seen_pauses(mode, head, ports, job_id):
                    if seen.ip not in waiting or reports[seen.ip].mode != mode:
                        continue
                    if seen.own:
                        attach(reports[seen.ip], seen.port, port_range)
                        waiting.discard(seen.ip)
                    else:
                        foreign[seen.ip].add(seen.label)
            time.sleep(1)
        for ip in waiting:
            ignored = (
                f"; ignored another job's pause on this node ({', '.join(sorted(foreign[ip]))})"
                if foreign[ip]
                else ""
            )
            reports[ip].problem = (
                f"no paused task of probe job {job_id} seen within {timeout:g} s{ignored}: "
                "check the task log on the node (/tmp/ray/session_latest/logs/worker-*.err)"
            )
    finally:
        # Also ends any pause nobody could reach.
        with contextlib.suppress(RuntimeError):
            client.stop_job(submission_id)
    return list(reports.values())


def table(reports: list[NodeReport]) -> str:
    return table_of(COLUMNS, [report.row() for report in reports])


def main(argv: list[str] | None = None) -> int:
    parser = cluster_parser(PROG, __doc__)
    parser.add_argument(
        "--debugger-port-range", required=True, metavar="LOW-HIGH",
        help="ray_debugger_port_range as the inventory has it: every node's Ray must run with it",
    )  # fmt: skip
    parser.add_argument("--gcs-port", type=int, default=6379)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument(
        "--stand-in", action="append", default=[], metavar="NODE",
        help="a node (name or address) whose GPUs are stand-ins (tests): its GPUs say so",
    )  # fmt: skip
    args = parser.parse_args(argv)
    client, runtime_env = connect(args)

    reports = probe(
        client,
        args.head,
        parse_nodes(args.nodes),
        runtime_env,
        args.debugger_port_range,
        {"gcs": args.gcs_port, "dashboard": args.dashboard_port},
        args.timeout,
        frozenset(args.stand_in),
    )
    print(table(reports))
    failed = [report for report in reports if report.problem]
    for report in failed:
        print(f"FAILED {report.name}: {report.problem}")
    return 1 if failed else 0
