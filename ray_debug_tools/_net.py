"""TCP helpers shared by the debugger clients."""

import socket
import time
from types import TracebackType
from typing import ClassVar, Self


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

    # How errors name the peer: "pdb at HOST:PORT ...".
    protocol: ClassVar[str]

    def __init__(self, sock: socket.socket, endpoint: str) -> None:
        self._sock = sock
        self._endpoint = endpoint

    def close(self) -> None:
        self._sock.close()

    def _recv(self, waiting_for: str, within: float | None, deadline: float | None = None) -> bytes:
        """Up to 64 KiB from the peer, within the socket's timeout or by `deadline`.

        `within` is the wait an error names: with a deadline spread over several reads, the
        whole of it rather than what this read had left.
        """
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timed_out(waiting_for, within)
            self._sock.settimeout(remaining)
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError as exc:
            raise self._timed_out(waiting_for, within) from exc
        if not chunk:
            raise RayDebugConnectionError(
                f"{self.protocol} at {self._endpoint} closed the connection"
            )
        return chunk

    def _timed_out(self, waiting_for: str, within: float | None) -> RayDebugConnectionError:
        return RayDebugConnectionError(
            f"{self.protocol} at {self._endpoint}: no {waiting_for} within {within}s"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
