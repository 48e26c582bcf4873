"""Serve a token cluster's dashboard on this machine's loopback, adding the cluster token to
every request: the Ray Distributed Debugger extension and a browser then use the cluster at
http://127.0.0.1:8265 with token auth still on at the head.

    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/path/to/artifacts/CLUSTER/auth_token
    verl-debug forward --head 10.0.0.10      # then add 127.0.0.1:8265 to the extension

It listens on loopback alone and passes on each request's method, path, query and body; it
drops the client's own credentials and hop-by-hop headers, and adds the token. Whoever can
open a connection to this machine's loopback acts with the token while it runs
(docs/security.md).
"""

from __future__ import annotations

import argparse
import http.server
import sys
import urllib.error
import urllib.request
from http.client import HTTPResponse

from ray._private.authentication.http_token_authentication import (
    get_auth_headers_if_auth_enabled,
)

from ray_debug_tools import PROGRAM
from ray_debug_tools.endpoints import DASHBOARD_PORT, dashboard_parser, dashboard_url

PROG = f"{PROGRAM} forward"

LOOPBACK = "127.0.0.1"
# Hop-by-hop headers (RFC 9110, 7.6.1) end at this forwarder; the client's own credentials
# never reach the head, and the head's Host is the upstream's.
NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "authorization", "cookie", "content-length"}
)  # fmt: skip


def forwarding_handler(
    upstream: str, token_headers: dict[str, str], timeout: float
) -> type[http.server.BaseHTTPRequestHandler]:
    """A request handler that sends each request on to `upstream` with `token_headers`."""

    class Forward(http.server.BaseHTTPRequestHandler):
        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {
                key: value
                for key, value in self.headers.items()
                if key.lower() not in NOT_FORWARDED
            }
            request = urllib.request.Request(
                upstream + self.path, data=body, headers=headers | token_headers,
                method=self.command,
            )  # fmt: skip
            try:
                response: HTTPResponse | urllib.error.HTTPError = urllib.request.urlopen(
                    request, timeout=timeout
                )
            except urllib.error.HTTPError as refused:
                response = refused
            except (urllib.error.URLError, TimeoutError) as exc:
                self.send_error(502, f"{upstream} unreachable: {exc}")
                return
            with response:
                self.send_response(response.status)
                for key, value in response.headers.items():
                    if key.lower() not in NOT_FORWARDED:
                        self.send_header(key, value)
                # HTTP/1.0: the end of the connection ends the body, so streams pass as they come.
                self.end_headers()
                while chunk := response.read1(65536):
                    self.wfile.write(chunk)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

    return Forward


def build_parser() -> argparse.ArgumentParser:
    parser = dashboard_parser(PROG, __doc__)
    parser.add_argument(
        "--port", type=int, default=DASHBOARD_PORT, help="loopback port to serve on (8265)"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    upstream = dashboard_url(args)
    token_headers = get_auth_headers_if_auth_enabled({})
    if not token_headers:
        print(
            f"{PROG}: no cluster token to add: set RAY_AUTH_MODE=token and "
            "RAY_AUTH_TOKEN_PATH to the cluster's token file (see the runbook); a cluster "
            "without token auth needs no forwarder",
            file=sys.stderr,
        )
        return 2
    handler = forwarding_handler(str(upstream), token_headers, args.timeout)
    server = http.server.ThreadingHTTPServer((LOOPBACK, args.port), handler)
    print(
        f"{PROG}: http://{LOOPBACK}:{args.port} -> {upstream}, with the token",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
