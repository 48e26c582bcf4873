"""The Ray Distributed Debugger extension's discovery, replayed as the extension makes it
(2ToTheNthPower/open-ray-debugger's docs/protocol.md): the state API's workers, with no
credentials of its own, against a dashboard URL; and the runbook's or README's
`verl-debug forward` line run in the background, which adds the token to each request."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

READY = "verl-debug forward: "


def paused_through(dashboard: str, timeout: float = 30) -> set[tuple[str, int]]:
    """(ip, debugger port) of every worker the dashboard at `dashboard` lists as paused."""
    url = f"{dashboard}/api/v0/workers?detail=1&limit=10000"
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        rows = json.load(reply)["data"]["result"]["result"]
    return {
        (row["ip"], row["debugger_port"])
        for row in rows
        if row.get("debugger_port") and (row.get("num_paused_threads") or 0) > 0
    }


@contextmanager
def forwarding(script: str, env: dict[str, str], timeout: float = 60) -> Iterator[str]:
    """Run `script` (set-up lines, then the forwarder's line) until the block ends; yield the
    URL the forwarder serves once it says it is ready."""
    lines = script.splitlines()
    forwarder = subprocess.Popen(
        ["bash", "-c", "\n".join([*lines[:-1], f"exec {lines[-1]}"])],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert forwarder.stderr is not None
        said = forwarder.stderr.readline()
        assert said.startswith(READY), said + forwarder.stderr.read()
        yield said.removeprefix(READY).split()[0].rstrip("/")
    finally:
        forwarder.terminate()
        forwarder.wait(timeout=timeout)
