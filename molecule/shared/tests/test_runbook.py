"""The runbook's commands, run as printed: from its checkout with its own `export` line, and
on the head over real SSH as the inventory's non-root login user."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
from pathlib import Path

import pexpect
import pytest
from conftest import PROJECT, Cluster, wait_for_job
from nodes import GPU_WORKER
from ray.job_submission import JobStatus
from test_debugger import WORKER, wait_for

from ray_debug_tools.pauses import legacy_breakpoints, paused_workers

sys.path.insert(0, str(PROJECT / "tests"))
from doc_commands import commands, derived, ran
from extension import forwarding, paused_through

OPERATOR_KEY = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "operator_key"
PROMPT = "RUNBOOK-TEST$ "
# Set in two quoted halves, so the shell's echo of the assignment never matches the prompt.
SET_PROMPT = "PS1='RUNBOOK''-TEST$ '"


def printed(cluster: Cluster) -> list[str]:
    return commands((cluster.artifacts / "RUNBOOK.md").read_text())


def printed_command(cluster: Cluster, pattern: str) -> str:
    """The one command of the runbook that matches `pattern` from its start."""
    found = [text for text in printed(cluster) if re.match(pattern, text)]
    assert len(found) == 1, f"runbook commands matching {pattern!r}: {found}"
    return found[0]


def run_printed(
    cluster: Cluster, text: str, cwd: Path | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """One printed command in bash after the runbook's `cd` and `export` lines, without this
    test run's own Ray client variables: the runbook's must suffice. `cwd` replaces the `cd`
    for commands run from a job's own directory."""
    return subprocess.run(
        ["bash", "-c", printed_script(cluster, text, cwd is None)],
        cwd=cwd,
        env=operator_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Attach through the tunnel, then release the paused task as VS Code's Continue would.
OUTSIDE_ATTACH = (
    "import sys; from ray_debug_tools.dap_client import DapSession; "
    's = DapSession.connect("127.0.0.1", int(sys.argv[1]), 30); '
    'stopped = s.attach_for_post_mortem()["body"]; '
    'print("stopped:", stopped["reason"]); '
    's.continue_(stopped["threadId"]); s.disconnect()'
)


def through_ssh_from_outside(cluster: Cluster, outsider, ip: str, port: int) -> None:
    """The runbook's SSH tunnels, run on a host the firewall does not trust (the outsider,
    which reaches only SSH): the dashboard lists the pause through the first, and a DAP
    client attaches to the paused worker through the second and releases it. The key stands
    for the operator's."""
    outsider.check_output("mkdir -p -m 0700 /root/.ssh")
    outsider.ansible(
        "copy", f"src={OPERATOR_KEY} dest=/root/.ssh/operator_key mode=0600", check=False
    )
    options = (
        "IdentityFile /root/.ssh/operator_key",
        "StrictHostKeyChecking no",
        "UserKnownHostsFile /dev/null",
        "BatchMode yes",
        "ExitOnForwardFailure yes",
    )
    outsider.check_output(
        "printf '%s\\n' 'Host *' " + " ".join(f"'  {option}'" for option in options)
        + " > /root/.ssh/config && chmod 0600 /root/.ssh/config"
    )  # fmt: skip
    dashboard = printed_command(cluster, r"ssh -N -L \d+:")
    debugger = printed_command(cluster, r"ssh -N -L PORT:WORKER_IP:PORT ")
    local = int(dashboard.split()[3].split(":")[0])
    debugger = derived(debugger, debugger.replace("PORT:WORKER_IP:PORT", f"{port}:{ip}:{port}"))
    try:
        for line in (dashboard, debugger):
            # -f: into the background once the tunnel is up, as a second terminal would hold it.
            text = derived(line, line.replace("ssh -N", "ssh -f -N", 1))
            ran(text)
            outsider.check_output(text)
        token = os.environ.get("RAY_AUTH_TOKEN_PATH")
        header = ""
        if os.environ.get("RAY_AUTH_MODE") == "token" and token:
            outsider.ansible("copy", f"src={token} dest=/root/cluster_token mode=0600", check=False)
            header = '-H "Authorization: Bearer $(cat /root/cluster_token)" '
        workers = outsider.check_output(
            f"curl -sf {header}'http://127.0.0.1:{local}/api/v0/workers?detail=1&limit=10000'"
        )
        rows = json.loads(workers)["data"]["result"]["result"]
        assert any((r["ip"], r["debugger_port"]) == (ip, port) for r in rows), workers[-2000:]
        # The operator's DAP client, on the outsider: ours, from this checkout, stdlib only.
        outsider.check_output("mkdir -p /root/dap/ray_debug_tools")
        for module in ("__init__.py", "_net.py", "dap_client.py"):
            outsider.ansible(
                "copy",
                f"src={PROJECT / 'ray_debug_tools' / module} dest=/root/dap/ray_debug_tools/",
                check=False,
            )
        attached = outsider.run(f"cd /root/dap && python3 -c '{OUTSIDE_ATTACH}' {port}")
        assert attached.stdout.strip() == "stopped: exception", attached.stdout + attached.stderr
    finally:
        outsider.run("pkill -f 'ssh -f -N -L'")


def printed_script(cluster: Cluster, text: str, with_cd: bool = True) -> str:
    """The runbook's `export` (and `cd`) lines, then `text`, each recorded as run."""
    setup = [
        line
        for line in printed(cluster)
        if line.startswith("export RAY_AUTH_MODE=") or (with_cd and line.startswith("cd /"))
    ]
    for line in [*setup, text]:
        ran(line)
    return "\n".join([*setup, text])


def operator_env() -> dict[str, str]:
    """This machine's environment less Ray's client variables and molecule's forced colour."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH")}
    return dict(kept, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def on_the_head(cluster: Cluster, then: str) -> tuple[str, str]:
    """The runbook's `ssh LOGIN` line followed by `then`: (the ssh line, `then`)."""
    lines = printed(cluster)
    pairs = [
        (lines[index], lines[index + 1])
        for index in range(len(lines) - 1)
        if lines[index].startswith("ssh ") and lines[index + 1] == then
    ]
    assert len(pairs) == 1, f"runbook has no single `ssh` then `{then}`: {lines}"
    return pairs[0]


def login(ssh_line: str) -> pexpect.spawn:
    """A login shell from the runbook's ssh line; the key stands for the operator's agent."""
    _, destination = ssh_line.split()
    ran(ssh_line)
    shell = pexpect.spawn(
        "ssh",
        [
            "-tt",
            "-i",
            str(OPERATOR_KEY),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            destination,
        ],
        encoding="utf-8",
        timeout=120,
    )
    shell.sendline(SET_PROMPT)
    shell.expect_exact(PROMPT)
    return shell


def test_ray_status_as_the_login_user(cluster: Cluster) -> None:
    ssh_line, status = on_the_head(cluster, "ray status")
    shell = login(ssh_line)
    user = ssh_line.split()[1].split("@")[0]
    shell.sendline("id -un")
    shell.expect_exact(PROMPT)
    # Terminal control sequences may precede the line.
    assert re.search(rf"[\r\n]{user}\r?\n", shell.before), shell.before
    ran(status)
    shell.sendline(status)
    shell.expect_exact(PROMPT)
    output = shell.before
    shell.close()
    # Three nodes alive: the login user reached the GCS with the token.
    assert "Active:" in output and output.count(" node_") == 3, output


@pytest.mark.every_mode
def test_find_and_attach(cluster: Cluster, submit, jobs, outsider) -> None:
    find_and_attach(cluster, submit, jobs, outsider)


def find_and_attach(cluster: Cluster, submit, jobs, outsider) -> None:
    """The runbook's way to a paused task in the cluster's mode, as printed: list it, then
    attach (VS Code's launch.json and DAP in post_mortem; `ray debug` in a login shell on the
    head and `verl-debug breakpoints --attach` in legacy); in mode off nothing pauses."""
    ip = cluster.worker_ips[WORKER]
    listing = printed_command(cluster, r"verl-debug breakpoints --head \S+$")
    if cluster.mode == "post_mortem":
        job_id = submit("post_mortem_crash.py", ip)
        pause = wait_for(lambda: paused_workers(cluster.dashboard), "paused worker")[0]
        listed = run_printed(cluster, listing)
        assert f"{pause.ip}:{pause.port}" in listed.stdout, listed.stdout + listed.stderr

        vscode = run_printed(
            cluster, printed_command(cluster, r"verl-debug breakpoints .* --vscode 1$")
        )
        launch = json.loads(vscode.stdout)["configurations"][0]
        assert launch["connect"] == {"host": pause.ip, "port": pause.port}, vscode.stdout

        state_api = run_printed(cluster, printed_command(cluster, r"curl -s "))
        assert f"{pause.ip} {pause.port}" in state_api.stdout.splitlines(), state_api.stdout

        # The extension's way on a token cluster: its discovery, with no token of its own,
        # through the runbook's forwarder; straight at the head it is refused.
        if os.environ.get("RAY_AUTH_MODE") == "token":
            forward = printed_command(cluster, r"verl-debug forward ")
            with forwarding(printed_script(cluster, forward), operator_env()) as dashboard:
                assert (pause.ip, pause.port) in paused_through(dashboard)
            with pytest.raises(urllib.error.HTTPError, match="401"):
                paused_through(cluster.dashboard)
        else:
            assert not [line for line in printed(cluster) if "verl-debug forward" in line]

        # Attached from outside the trusted networks, through the runbook's tunnels (the
        # controller's own DAP attach is test_debugger.py's round trip).
        through_ssh_from_outside(cluster, outsider, pause.ip, pause.port)
        assert wait_for_job(jobs, job_id) == JobStatus.FAILED
    elif cluster.mode == "legacy":
        # `ray debug` on the head, over SSH as the login user, as the runbook says.
        job_id = submit("legacy_breakpoint.py", ip)
        pause = wait_for(lambda: legacy_breakpoints(cluster.gcs), "breakpoint")[0]
        listed = run_printed(cluster, listing)
        assert f"{pause.ip}:{pause.port}" in listed.stdout, listed.stdout + listed.stderr
        ssh_line, debug = on_the_head(cluster, "ray debug")
        shell = login(ssh_line)
        ran(debug)
        shell.sendline(debug)
        shell.expect_exact("Enter breakpoint index or press enter to refresh: ")
        shell.sendline("0")
        pdb_session(shell)
        # Released: the pdb connection ends and `ray debug` lists breakpoints again. Leaving
        # before then would cut the connection under the paused task.
        shell.expect_exact("Enter breakpoint index or press enter to refresh: ")
        shell.close()
        assert wait_for_job(jobs, job_id) == JobStatus.SUCCEEDED

        # `verl-debug breakpoints --attach 1` from here.
        job_id = submit("legacy_breakpoint.py", ip)
        wait_for(lambda: legacy_breakpoints(cluster.gcs), "breakpoint")
        attach = printed_command(cluster, r"verl-debug breakpoints .* --attach 1$")
        setup = [line for line in printed(cluster) if re.match(r"cd /|export RAY_AUTH_MODE=", line)]
        for line in [*setup, attach]:
            ran(line)
        local = pexpect.spawn(
            "bash",
            ["-c", "\n".join([*setup, attach])],
            env=operator_env(),
            encoding="utf-8",
            timeout=120,
        )
        pdb_session(local)
        local.expect(pexpect.EOF)
        assert wait_for_job(jobs, job_id) == JobStatus.SUCCEEDED
    else:
        # Mode off, as the runbook says: a breakpoint() in the driver or a task returns at once,
        # a task that raises fails the job at once, and nothing is left paused to list.
        job_id = submit("breakpoints_return.py", ip)
        assert wait_for_job(jobs, job_id, timeout=120) == JobStatus.SUCCEEDED
        assert "RESULT 43" in jobs.get_job_logs(job_id)
        crashed = submit("post_mortem_crash.py", ip)
        assert wait_for_job(jobs, crashed, timeout=120) == JobStatus.FAILED
        assert "probe crash with answer=42" in jobs.get_job_logs(crashed)
        listed = run_printed(cluster, listing)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert ip not in listed.stdout, listed.stdout


def pdb_session(terminal: pexpect.spawn) -> None:
    """At a legacy_breakpoint.py pause: read the local, then continue."""
    terminal.expect_exact("(Pdb) ")
    terminal.sendline("p answer")
    terminal.expect_exact("42")
    terminal.expect_exact("(Pdb) ")
    terminal.sendline("c")


def test_submit_and_read_logs(cluster: Cluster, tmp_path: Path) -> None:
    """The verl job line, from a job's own directory (working_dir: ./ uploads it); its
    arguments (`...`) become --help, which loads verl's trainer and its config."""
    if cluster.verl_version is None:
        pytest.skip("this scenario installs no verl")
    submit_line = printed_command(cluster, r"ray job submit (?!.*nccl-debug)")
    assert submit_line.endswith(" ...")
    help_line = derived(submit_line, submit_line[: -len("...")] + "--help")
    submitted = run_printed(cluster, help_line, cwd=tmp_path)
    output = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, output[-4000:]
    job_id = re.search(r"Job '(\S+)' succeeded", output)
    assert job_id, output[-4000:]
    logs_line = printed_command(cluster, r"ray job logs ")
    logs = run_printed(cluster, derived(logs_line, logs_line.replace("JOB_ID", job_id.group(1))))
    assert logs.returncode == 0, logs.stdout + logs.stderr
    assert "Powered by Hydra" in logs.stdout, logs.stdout[-4000:]


@pytest.mark.faults
def test_probe_as_printed(cluster: Cluster) -> None:
    probe = run_printed(
        cluster, printed_command(cluster, r"ansible-playbook -i \S+ playbooks/debug_probe")
    )
    output = probe.stdout[-4000:] + probe.stderr[-2000:]
    # Mode off (the faults scenario): the runbook says the probe stops, naming every worker.
    assert (probe.returncode == 0) == (cluster.mode != "off"), output
    for worker in cluster.worker_ips:
        assert worker in probe.stdout
    # The probe's table row: node, ip, ray, GPUs. The GPU worker's are stand-ins and say so.
    row = rf"{GPU_WORKER}\s+\S+\s+\S+\s+2 \(stand-in\)\s"
    assert re.search(row, probe.stdout), probe.stdout[-4000:]
    if cluster.mode == "off":
        for worker in cluster.worker_ips:
            assert f"FAILED {worker}: debug mode is off" in probe.stdout, output
