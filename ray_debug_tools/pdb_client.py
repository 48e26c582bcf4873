"""Client for Ray's legacy remote pdb (ray/util/rpdb.py), a pdb prompt on a plain TCP socket."""

import socket
from typing import Self

from ray_debug_tools._net import RayDebugConnectionError, TcpSession, open_tcp

PROMPT = b"(Pdb) "


class PdbSession(TcpSession):
    """One pdb session; Ray's remote pdb accepts a single client and closes on `c`."""

    protocol = "pdb"

    def __init__(self, sock: socket.socket, endpoint: str) -> None:
        super().__init__(sock, endpoint)
        self._buffer = b""
        self.banner = ""

    @classmethod
    def connect(cls, host: str, port: int, timeout: float = 10.0) -> Self:
        """Connect and read up to the first prompt, kept in `banner` (where pdb stopped)."""
        session = cls(open_tcp(host, port, timeout), f"{host}:{port}")
        try:
            session.banner = session._read_to_prompt()
        except BaseException:
            session.close()
            raise
        return session

    def command(self, line: str) -> str:
        """Run one pdb command and return its output up to the next prompt."""
        self._send(line)
        return self._read_to_prompt()

    def continue_(self) -> None:
        """Resume the task; the worker closes the socket on `c`, so close ours too."""
        try:
            self._send("c")
        finally:
            self.close()

    def _send(self, line: str) -> None:
        try:
            self._sock.sendall(f"{line}\n".encode())
        except OSError as exc:
            raise RayDebugConnectionError(f"pdb at {self._endpoint}: send failed: {exc}") from exc

    def _read_to_prompt(self) -> str:
        while PROMPT not in self._buffer:
            self._buffer += self._recv("prompt", self._sock.gettimeout())
        output, _, self._buffer = self._buffer.partition(PROMPT)
        # The worker rewrites every newline to CRLF.
        return output.decode(errors="replace").replace("\r\n", "\n").rstrip("\n")
