"""TCP helpers shared by the debugger clients."""

import socket
from types import TracebackType
from typing import Self


class RayDebugConnectionError(ConnectionError):
    """A GCS, dashboard or debugger endpoint could not be reached or stopped answering."""


def open_tcp(host: str, port: int, timeout: float) -> socket.socket:
    """Connect to host:port, turning socket errors into errors that name the endpoint."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError as exc:
        raise RayDebugConnectionError(
            f"timed out after {timeout}s connecting to {host}:{port}"
        ) from exc
    except ConnectionRefusedError as exc:
        raise RayDebugConnectionError(
            f"connection refused by {host}:{port} (nothing listening, or bound to loopback)"
        ) from exc
    except OSError as exc:
        raise RayDebugConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
    sock.settimeout(timeout)
    return sock


class TcpSession:
    """A debugger connection that closes its socket when used as a context manager."""

    def __init__(self, sock: socket.socket, endpoint: str) -> None:
        self._sock = sock
        self._endpoint = endpoint

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
