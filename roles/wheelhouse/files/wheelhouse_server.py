#!/usr/bin/env python3
"""Serve the offline wheelhouse to every node of the cluster at once.

`python -m http.server` listens with a queue of 5 connections (socketserver's
request_queue_size). Each node's `uv pip sync` opens dozens of downloads together, so with
more than one node the queue overflows; the kernel drops the connections that do not fit,
and each waits out TCP's retransmission backoff (1, 2, 4, 8, 16 s) while the machine idles.
This server is http.server's with a queue long enough for every node's downloads.
"""

from __future__ import annotations

import argparse
import functools
import socket
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

# uv opens up to 50 downloads at once per node (UV_CONCURRENT_DOWNLOADS); the kernel caps the
# queue at net.core.somaxconn (4096 by default since Linux 5.4).
LISTEN_QUEUE = 4096


class WheelhouseServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_QUEUE

    def __init__(self, address: tuple[str, int], handler: type | functools.partial) -> None:
        # The head's cluster address may be IPv6, where http.server's class binds IPv4 only.
        self.address_family = socket.getaddrinfo(*address, type=socket.SOCK_STREAM)[0][0]
        super().__init__(address, handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="the head's cluster address")
    parser.add_argument("--directory", required=True, help="the folder to serve")
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=args.directory)
    with WheelhouseServer((args.bind, args.port), handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
