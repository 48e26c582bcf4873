#!/usr/bin/env python3
"""Serve the offline wheelhouse to every node of the cluster at once, out of its archive.

Each archive `DIGEST.tar` in the folder is served as the folder `/DIGEST/`: a page that
links every wheel (what `uv --find-links` and pip read) and each wheel's bytes, sent
straight from the archive, which the head never unpacks.

`python -m http.server` listens with a queue of 5 connections (socketserver's
request_queue_size). Each node's `uv pip sync` opens dozens of downloads together, so with
more than one node the queue overflowed; the kernel dropped the connections that did not
fit, and each waited out TCP's retransmission backoff (1, 2, 4, 8, 16 s) while the machine
idled. This server's queue holds every node's downloads.

    python wheelhouse_server.py --bind ADDRESS --directory FOLDER PORT
"""

from __future__ import annotations

import argparse
import html
import os
import socket
import tarfile
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, unquote, urlsplit

# uv opens up to 50 downloads at once per node (UV_CONCURRENT_DOWNLOADS); the kernel caps the
# queue at net.core.somaxconn (4096 by default since Linux 5.4).
LISTEN_QUEUE = 4096


class Member(NamedTuple):
    offset: int
    size: int


@cache
def members(archive: Path) -> dict[str, Member]:
    """Where each wheel's bytes lie in the archive. An archive is named by its content's
    digest, so what it holds never changes under its name."""
    with tarfile.open(archive) as tar:
        return {m.name: Member(m.offset_data, m.size) for m in tar.getmembers() if m.isfile()}


class WheelhouseHandler(BaseHTTPRequestHandler):
    # HTTP/1.0, as http.server: one request per connection, no keep-alive to time out.
    server: WheelhouseServer

    def do_GET(self) -> None:
        self.answer(body=True)

    def do_HEAD(self) -> None:
        self.answer(body=False)

    def answer(self, body: bool) -> None:
        digest, _, name = unquote(urlsplit(self.path).path).strip("/").partition("/")
        # The digest holds no "/": the archive lies in the folder; a wheel is named from the
        # archive's own index, so no other path of the request reaches the file system.
        archive = self.server.directory / f"{digest}.tar"
        if not digest or not archive.is_file():
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        wheels = members(archive)
        if not name:
            self.send_listing(digest, sorted(wheels), body)
        elif name in wheels:
            self.send_member(archive, wheels[name], body)
        else:
            self.send_error(HTTPStatus.NOT_FOUND)

    def send_listing(self, digest: str, names: list[str], body: bool) -> None:
        links = "".join(f'<a href="{quote(n)}">{html.escape(n)}</a><br>\n' for n in names)
        page = f"<!DOCTYPE html>\n<title>{html.escape(digest)}</title>\n{links}".encode()
        self.send_head("text/html; charset=utf-8", len(page))
        if body:
            self.wfile.write(page)

    def send_member(self, archive: Path, member: Member, body: bool) -> None:
        self.send_head("application/octet-stream", member.size)
        if body:
            with archive.open("rb") as wheel:
                self.connection.sendfile(wheel, member.offset, member.size)

    def send_head(self, content_type: str, length: int) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.end_headers()


class WheelhouseServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_QUEUE

    def __init__(self, address: tuple[str, int], directory: Path) -> None:
        # The head's cluster address may be IPv6, where http.server's class binds IPv4 only.
        self.address_family = socket.getaddrinfo(*address, type=socket.SOCK_STREAM)[0][0]
        self.directory = directory
        super().__init__(address, WheelhouseHandler)


def notify_systemd_ready() -> None:
    """Tell systemd the server listens (Type=notify): its start returns only then, so the
    nodes' downloads never race the bind."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.connect("\0" + address[1:] if address.startswith("@") else address)
        notify.sendall(b"READY=1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="the head's cluster address")
    parser.add_argument("--directory", required=True, type=Path, help="the archives' folder")
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    with WheelhouseServer((args.bind, args.port), args.directory) as server:
        notify_systemd_ready()
        server.serve_forever()


if __name__ == "__main__":
    main()
