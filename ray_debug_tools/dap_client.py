"""Minimal Debug Adapter Protocol client for the debugpy server a Ray worker opens."""

import json
import socket
import time
from typing import Any, Self

from ray_debug_tools._net import RayDebugConnectionError, TcpSession, open_tcp

Message = dict[str, Any]


class DapError(RuntimeError):
    """The debug adapter answered a request with success=false."""


class DapSession(TcpSession):
    """A synchronous DAP session: requests block until their response arrives by seq."""

    protocol = "DAP"

    def __init__(self, sock: socket.socket, endpoint: str, timeout: float) -> None:
        super().__init__(sock, endpoint)
        self._timeout = timeout
        self._seq = 0
        self._buffer = b""
        self._responses: dict[int, Message] = {}
        self._events: list[Message] = []

    @classmethod
    def connect(cls, host: str, port: int, timeout: float = 10.0) -> Self:
        """Open the TCP connection; `timeout` also bounds every later wait."""
        return cls(open_tcp(host, port, timeout), f"{host}:{port}", timeout)

    def attach_for_post_mortem(self, path_mappings: list[Message] | None = None) -> Message:
        """Run the attach handshake and return the `stopped` event of the paused task.

        `path_mappings` is launch.json's: debugpy then names the client's paths, not the node's.
        """
        self.request(
            "initialize",
            {
                "clientID": "ray-debug-tools",
                "adapterID": "debugpy",
                "pathFormat": "path",
                "linesStartAt1": True,
                "columnsStartAt1": True,
            },
        )
        # debugpy answers `attach` only after configurationDone, so collect it last.
        attach_seq = self.send(
            "attach",
            {"justMyCode": False} | ({"pathMappings": path_mappings} if path_mappings else {}),
        )
        self.wait_event("initialized")
        self.request("setExceptionBreakpoints", {"filters": ["uncaught"]})
        self.request("configurationDone")
        self.wait_response(attach_seq)
        return self.wait_event("stopped")

    def exception_info(self, thread_id: int) -> Message:
        """Body of `exceptionInfo`: exceptionId, description, breakMode, details."""
        return self.request("exceptionInfo", {"threadId": thread_id})

    def stack_trace(self, thread_id: int) -> list[Message]:
        """Frames of a stopped thread, innermost first."""
        return self.request("stackTrace", {"threadId": thread_id})["stackFrames"]

    def evaluate(self, expression: str, frame_id: int) -> str:
        """Evaluate in a frame and return the adapter's string rendering of the result."""
        body = self.request(
            "evaluate", {"expression": expression, "frameId": frame_id, "context": "repl"}
        )
        return body["result"]

    def continue_(self, thread_id: int) -> None:
        """Resume after the stop; in post-mortem the task then fails with its exception."""
        self.request("continue", {"threadId": thread_id})

    def disconnect(self) -> None:
        """Detach without killing the worker, which resumes, then close the socket."""
        try:
            self.request("disconnect", {"terminateDebuggee": False})
        finally:
            self.close()

    def request(self, command: str, arguments: Message | None = None) -> Message:
        """Send a request and return the body of its successful response."""
        return self.wait_response(self.send(command, arguments))

    def send(self, command: str, arguments: Message | None = None) -> int:
        """Send a request without waiting; returns its seq for `wait_response`."""
        self._seq += 1
        message: Message = {"seq": self._seq, "type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        payload = json.dumps(message).encode()
        try:
            self._sock.sendall(b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        except OSError as exc:
            raise RayDebugConnectionError(f"DAP at {self._endpoint}: send failed: {exc}") from exc
        return self._seq

    def wait_response(self, seq: int) -> Message:
        """Wait for the response to request `seq`, queueing events that arrive meanwhile."""
        deadline = time.monotonic() + self._timeout
        while seq not in self._responses:
            self._receive(deadline, f"response to request {seq}")
        response = self._responses.pop(seq)
        if not response.get("success"):
            raise DapError(
                f"DAP at {self._endpoint}: {response.get('command')} failed: "
                f"{response.get('message')}"
            )
        return response.get("body", {})

    def wait_event(self, name: str) -> Message:
        """Return the oldest queued `name` event, reading more messages until one arrives."""
        deadline = time.monotonic() + self._timeout
        while True:
            for index, event in enumerate(self._events):
                if event.get("event") == name:
                    return self._events.pop(index)
            self._receive(deadline, f"'{name}' event")

    def _receive(self, deadline: float, waiting_for: str) -> None:
        message = json.loads(self._read_frame(deadline, waiting_for))
        kind = message.get("type")
        if kind == "response":
            self._responses[message["request_seq"]] = message
        elif kind == "event":
            self._events.append(message)
        # Reverse requests (runInTerminal, startDebugging) do not occur when attaching.

    def _read_frame(self, deadline: float, waiting_for: str) -> bytes:
        while True:
            header, sep, rest = self._buffer.partition(b"\r\n\r\n")
            if sep:
                length = _content_length(header)
                if len(rest) >= length:
                    self._buffer = rest[length:]
                    return rest[:length]
            self._buffer += self._recv(waiting_for, self._timeout, deadline)


def _content_length(header: bytes) -> int:
    for line in header.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise RayDebugConnectionError(f"DAP frame without Content-Length: {header!r}")
