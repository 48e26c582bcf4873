"""Open the cluster's debugger in a running Ray worker, on the hung rank, without a restart.

A rank that hangs never reaches breakpoint() and never raises, and its main thread is often
blocked in C (a collective waiting for a rank that never comes), where no signal handler
runs. So every Ray worker started by the Ray service (which sets ENV_VAR in the modes that
have a debugger) keeps one daemon thread blocked on an abstract Unix socket named for its
pid. `request(pid)`, run by a Ray task on the worker's node (`verl-debug rank` submits it),
asks that thread to open the debugger of the worker's mode on the main thread's frames:

- post_mortem: debugpy listens (in the port range, through the port-range hook) and the
  worker counts as paused, so the finder and the VS Code extension list it; once a client
  attaches, debugpy stops on a HungRank exception whose traceback is the main thread's
  stack, with its variables.
- legacy: Ray's remote pdb registers with `ray debug` and opens at the main thread's
  innermost frame; `where`, `up` and `p` read the hung stack.

The main thread keeps waiting where it was; the debugger reads its frames from beside it.
Only the worker's own user (or root) may ask: the thread checks the caller's credentials.
Imported at every start of the venv's Python by a .pth line, like the port-range hook; it
acts only in Ray's worker processes.
"""

from __future__ import annotations

import os
import sys

# Every Python of the venv imports this module; only Ray's workers need more than os and sys,
# so the rest is imported where it is used. Not `from typing import TYPE_CHECKING` either:
# importing typing costs ~10 ms in every interpreter.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from types import FrameType, TracebackType
    from typing import Any

    Reply = dict[str, Any]

ENV_VAR = "RAY_DEBUG_ON_DEMAND"
# The credentials a Unix socket's peer connected with: struct ucred, three ints (pid, uid, gid).
UCRED_FORMAT = "3i"
# How long the worker waits for its debugger to open and say where (the asker waits longer).
OPEN_TIMEOUT = 30.0
_session: dict[str, Any] = {}


class HungRank(Exception):
    """What debugpy shows as the stop's exception: where the main thread waits."""


def socket_name(pid: int) -> str:
    return f"\0ray-debug-on-demand-{pid}"


def mode_of(environ: dict[str, str] | os._Environ[str]) -> str:
    """The debug mode a Ray process of this cluster runs, from its environment."""
    if environ.get("RAY_DEBUG") == "legacy":
        return "legacy"
    if environ.get("RAY_DEBUG_POST_MORTEM") == "1":
        return "post_mortem"
    return "off"


def install() -> bool:
    """In a Ray worker of a debug mode, listen for requests; whether this process listens."""
    if os.environ.get(ENV_VAR) != "1":
        return False
    import socket

    from ray_debugger_port_range import is_ray_worker

    if not is_ray_worker(getattr(sys, "argv", None)):
        return False

    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(socket_name(os.getpid()))
        listener.listen(4)
    except OSError as error:
        # Runs at start-up of every worker: report and carry on, never break the worker.
        print(f"ray_debug_on_demand: no on-demand debugger: {error}", file=sys.stderr)
        return False
    import threading

    threading.Thread(
        target=_serve, args=(listener,), name="ray_debug_on_demand", daemon=True
    ).start()
    return True


def request(pid: int, timeout: float = OPEN_TIMEOUT + 10) -> Reply:
    """Ask worker `pid` of this node to open its debugger: {"mode", "address", ...} or
    {"error"}. Run on the worker's node, as the Ray service's user."""
    import json
    import socket

    mode = mode_of(os.environ)
    if mode == "off":
        return {
            "error": "this cluster runs debug_mode=off, which has no debugger to open: "
            "bring it up with debug_mode=post_mortem or debug_mode=legacy"
        }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as asker:
        asker.settimeout(timeout)
        try:
            asker.connect(socket_name(pid))
        except (ConnectionRefusedError, FileNotFoundError):
            return {
                "error": f"pid {pid} does not listen for a debugger request: it is not a Ray "
                "worker of this node, or it started before this cluster's debug hooks"
            }
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = asker.recv(4096)
            if not chunk:
                break
            reply += chunk
    if not reply:
        return {"error": f"pid {pid} closed the request without an answer (see its log)"}
    return json.loads(reply)


def _serve(listener: socket.socket) -> None:
    import contextlib
    import json
    import socket
    import struct

    ucred = struct.Struct(UCRED_FORMAT)
    while True:
        connection, _ = listener.accept()
        with connection:
            _, uid, _ = ucred.unpack(
                connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, ucred.size)
            )
            if uid not in (os.getuid(), 0):
                reply: Reply = {"error": f"uid {uid} may not open this worker's debugger"}
            else:
                reply = _open()
            # An asker gone before the answer (its task timed out) changes nothing here.
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps(reply).encode() + b"\n")


def _open() -> Reply:
    """Start a debugger session on the main thread, or name the one already open."""
    import queue
    import threading

    if _session.get("thread") is not None and _session["thread"].is_alive():
        return {**_session["reply"], "already_open": True}
    sessions: dict[str, Callable[[Callable[[Reply], None]], None]] = {
        "post_mortem": _debugpy_session,
        "legacy": _pdb_session,
    }
    mode = mode_of(os.environ)
    if mode not in sessions:
        return {"error": f"this worker runs debug_mode={mode}, which has no debugger to open"}
    replies: queue.Queue[Reply] = queue.Queue()

    def run() -> None:
        try:
            sessions[mode](replies.put)
        except Exception as error:  # the asker must hear why, whatever it is
            from ray_debugger_port_range import installed_versions

            replies.put({"error": f"{type(error).__name__}: {error} ({installed_versions()})"})

    thread = threading.Thread(target=run, name="ray_debug_on_demand_session", daemon=True)
    thread.start()
    try:
        reply = replies.get(timeout=OPEN_TIMEOUT)
    except queue.Empty:
        return {"error": f"the {mode} debugger did not open within {OPEN_TIMEOUT:g} s"}
    if "error" not in reply:
        _session.update(thread=thread, reply=reply)
    return reply


def _main_thread() -> tuple[FrameType, str]:
    """The main thread's innermost frame, and its stack as Python prints a traceback."""
    import threading
    import traceback

    frame = sys._current_frames()[threading.main_thread().ident]  # type: ignore[index]
    return frame, "".join(traceback.format_stack(frame))


def _traceback_of(frame: FrameType) -> TracebackType:
    """A traceback through `frame`'s stack, outermost first, as an exception raised there
    would carry: debugpy shows an exception's frames, with their variables, from it."""
    from types import TracebackType

    stack: list[FrameType] = []
    current: FrameType | None = frame
    while current is not None:
        stack.append(current)
        current = current.f_back
    tb: TracebackType | None = None
    for each in stack:
        tb = TracebackType(tb, each, each.f_lasti, each.f_lineno)
    assert tb is not None
    return tb


def _debugpy_session(ready: Callable[[Reply], None]) -> None:
    import debugpy
    import ray
    from ray.util import debugpy as ray_debugpy

    trigger = debugpy.trigger_exception_handler  # debugpy >= 1.8.20; older raises here
    worker = ray._private.worker.global_worker
    ray_debugpy._ensure_debugger_port_open_thread_safe()
    frame, stack = _main_thread()
    error = HungRank(f"pid {os.getpid()}: the main thread waits at {_where(frame)}")
    with worker.worker_paused_by_debugger():
        ready(
            {
                "mode": "post_mortem",
                "address": f"{worker.node_ip_address}:{worker.debugger_port}",
                "where": _where(frame),
                "stack": stack,
            }
        )
        debugpy.wait_for_client()
    trigger((HungRank, error, _traceback_of(frame)), as_uncaught=False)


def _pdb_session(ready: Callable[[Reply], None]) -> None:
    import json
    import threading
    import uuid

    import ray
    from ray._private import ray_constants
    from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_put
    from ray.util import rpdb

    worker = ray._private.worker.global_worker
    frame, stack = _main_thread()
    key = f"RAY_PDB_{uuid.uuid4().hex}"
    namespace = ray_constants.KV_NAMESPACE_PDB
    opened: dict[str, rpdb._RemotePdb] = {}

    def connect() -> None:
        opened["pdb"] = rpdb._connect_ray_pdb(
            breakpoint_uuid=key.removeprefix("RAY_PDB_"),
            debugger_external=worker.ray_debugger_external,
        )

    waiter = threading.Thread(target=connect, name="ray_debug_on_demand_pdb", daemon=True)
    waiter.start()
    # Ray registers its pdb at the line that opened it, here; `ray debug` and the finder
    # should name where the main thread waits instead.
    entry = _registered(_internal_kv_get, key, namespace, waiter)
    entry.update(filename=frame.f_code.co_filename, lineno=frame.f_lineno, traceback=stack)
    _internal_kv_put(key, json.dumps(entry), overwrite=True, namespace=namespace)
    ready({"mode": "legacy", "address": entry["pdb_address"], "where": _where(frame),
           "stack": stack})  # fmt: skip
    waiter.join()
    pdb = opened["pdb"]
    try:
        pdb.reset()
        pdb.interaction(frame, None)
    except OSError:
        pass  # the client went away
    finally:
        sys.settrace(None)
        if not pdb.handle.closed:
            pdb.handle.close()


def _registered(
    kv_get: Callable[..., bytes | None], key: str, namespace: str, waiter: Any
) -> dict[str, Any]:
    import json
    import time

    deadline = time.monotonic() + OPEN_TIMEOUT
    while time.monotonic() < deadline and waiter.is_alive():
        value = kv_get(key, namespace=namespace)
        if value:
            return json.loads(value)
        time.sleep(0.05)
    raise RuntimeError("Ray's remote pdb did not register")


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
