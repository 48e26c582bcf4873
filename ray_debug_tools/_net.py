"""TCP helpers shared by the debugger clients."""

import socket


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
