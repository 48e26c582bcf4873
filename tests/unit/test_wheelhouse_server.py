"""The head's wheelhouse server: every node's downloads fit in its listen queue at once."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from wheelhouse_server import WheelhouseServer

# Three nodes' uv opening its 50 downloads at once.
BURST = 150


@contextmanager
def server_on(address: str, directory: Path) -> Iterator[WheelhouseServer]:
    handler = partial(SimpleHTTPRequestHandler, directory=str(directory))
    with WheelhouseServer((address, 0), handler) as server:
        yield server


def test_a_burst_of_connections_waits_in_the_queue_not_on_tcp_retries(tmp_path: Path) -> None:
    """Not accepting at all, the server holds every connection of the burst: a queue of 5
    (`python -m http.server`) drops the rest's handshakes, and each of those would wait out
    TCP's retransmission backoff (its first retry comes after 1 s, past this timeout)."""
    with server_on("127.0.0.1", tmp_path) as server, ExitStack() as clients:
        for _ in range(BURST):
            client = clients.enter_context(socket.socket())
            client.settimeout(0.5)
            client.connect(server.server_address)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_serves_the_wheelhouse_on_the_heads_address(tmp_path: Path, address: str) -> None:
    if address == "::1" and not socket.has_ipv6:
        pytest.skip("this machine has no IPv6")
    (tmp_path / "lock").mkdir()
    (tmp_path / "lock" / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"wheel")
    with server_on(address, tmp_path) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            host = f"[{address}]" if ":" in address else address
            url = f"http://{host}:{server.server_address[1]}/lock/six-1.16.0-py2.py3-none-any.whl"
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.read() == b"wheel"
        finally:
            server.shutdown()
