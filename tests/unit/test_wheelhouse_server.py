"""The head's wheelhouse server: wheels out of the archive, every node's downloads at once."""

from __future__ import annotations

import io
import socket
import tarfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from wheelhouse_server import WheelhouseServer, notify_systemd_ready

# Three nodes' uv opening its 50 downloads at once.
BURST = 150
DIGEST = "cf2bb9ed5966713e"
WHEELS = {
    "six-1.16.0-py2.py3-none-any.whl": b"six's bytes",
    "torch-2.7.1+cu126-cp311-cp311-manylinux_2_28_x86_64.whl": b"a local version's bytes",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder holding one archive, as cluster-up sends it to the head."""
    with tarfile.open(tmp_path / f"{DIGEST}.tar", "w") as archive:
        for name, content in WHEELS.items():
            member = tarfile.TarInfo(name)
            member.size = len(content)
            archive.addfile(member, io.BytesIO(content))
    return tmp_path


@contextmanager
def serving(address: str, folder: Path) -> Iterator[str]:
    """The server's base URL while it serves from another thread."""
    with WheelhouseServer((address, 0), folder) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            host = f"[{address}]" if ":" in address else address
            yield f"http://{host}:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def test_a_burst_of_connections_waits_in_the_queue_not_on_tcp_retries(folder: Path) -> None:
    """Not accepting at all, the server holds every connection of the burst: a queue of 5
    (`python -m http.server`) drops the rest's handshakes, and each of those would wait out
    TCP's retransmission backoff (its first retry comes after 1 s, past this timeout)."""
    with WheelhouseServer(("127.0.0.1", 0), folder) as server, ExitStack() as clients:
        for _ in range(BURST):
            client = clients.enter_context(socket.socket())
            client.settimeout(0.5)
            client.connect(server.server_address)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_serves_each_wheel_out_of_the_archive(folder: Path, address: str) -> None:
    with serving(address, folder) as base:
        listing = get(f"{base}/{DIGEST}/").decode()
        for name, content in WHEELS.items():
            href = urllib.parse.quote(name)
            assert f'href="{href}"' in listing
            assert get(f"{base}/{DIGEST}/{href}") == content


@pytest.mark.parametrize(
    "path",
    [
        "/",
        f"/{DIGEST}/missing-1.0-py3-none-any.whl",
        f"/{DIGEST}.tar",
        f"/{DIGEST}/../{DIGEST}.tar",
        "/ffffffffffffffff/",
        "/%2e%2e/",
    ],
)
def test_anything_but_the_archives_wheels_is_not_found(folder: Path, path: str) -> None:
    with serving("127.0.0.1", folder) as base, pytest.raises(urllib.error.HTTPError) as refused:
        get(base + path)
    assert refused.value.code == 404


@pytest.mark.parametrize("abstract", [False, True])
def test_tells_systemd_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, abstract: bool
) -> None:
    """What systemd's Type=notify waits for before `systemctl restart` returns, on the socket
    it names in NOTIFY_SOCKET (a path, or an abstract name written with a leading @)."""
    name = f"@wheelhouse-test-{tmp_path.name}" if abstract else str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind("\0" + name[1:] if abstract else name)
        systemd.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", name)
        notify_systemd_ready()
        assert systemd.recv(64) == b"READY=1"
