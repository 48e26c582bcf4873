"""Keep the ports of Ray's debuggers inside RAY_DEBUGGER_PORT_RANGE ("LOW-HIGH"), one each.

Ray opens its debuggers on ports the kernel picks at random (debugpy.listen((ip, 0)) in
ray/util/debugpy.py, a port-0 bind in ray/util/rpdb.py's _RemotePdb), which no firewall rule
can allow. A .pth file in the cluster's venv runs install() in every Python process:

    import ray_debugger_port_range; ray_debugger_port_range.install()

so each port-0 request gets a port of the range that no other debugger on the node holds.
When every rank of a training step pauses in the same instant, two processes must never get
one port: a process claims a port by binding a per-port lock (an abstract Unix socket, gone
with the process that holds it) before it hands the port to the debugger, and retries with
another port if the debugger still finds it taken by something outside the hook.

`python -m ray_debugger_port_range reserve|release` adds the range to, or takes it from, the
kernel's ip_local_reserved_ports, so that no outgoing connection is given a debugger port;
the Ray unit runs them when it starts and stops.
"""

from __future__ import annotations

import errno
import os
import sys

from ray_port_range import format_port_list, format_port_range, parse_port_list, port_range

# Not `from typing import TYPE_CHECKING`: importing typing costs ~10 ms in every interpreter.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from importlib.machinery import ModuleSpec
    from socket import socket
    from types import ModuleType
    from typing import Any

    Patch = Callable[[ModuleType], None]

ENV_VAR = "RAY_DEBUGGER_PORT_RANGE"
WORKER_SCRIPT = "default_worker.py"
RESERVED_PORTS = "/proc/sys/net/ipv4/ip_local_reserved_ports"
# Set on our wrappers so that a second install() in one process does not wrap twice.
_WRAPPED = "_ray_debugger_port_range_wrapped"
# The leading parameters of the callables we wrap, as Ray 2.60 and debugpy 1.8 define them.
# Another shape means the hook no longer knows where the port is: it leaves it alone.
RPDB_INIT_PARAMETERS = ("self", "breakpoint_uuid", "host", "port", "ip_address")
DEBUGPY_LISTEN_PARAMETERS = ("__endpoint",)
# Claims that debugpy's listening adapter outlives: debugpy serves one port for the life of
# the worker process, so the process keeps the claim as long.
_held_claims: list[socket] = []


def install() -> None:
    """Patch Ray's debuggers, now or when imported, if RAY_DEBUGGER_PORT_RANGE is set."""
    value = os.environ.get(ENV_VAR)
    if not value:
        return
    try:
        ports = port_range(value)
    except ValueError as error:
        # Runs at start-up of every interpreter: report and carry on, never break Python.
        print(
            f"ray_debugger_port_range: ignoring {ENV_VAR} (debugger ports stay random): {error}",
            file=sys.stderr,
        )
        return
    patch_on_import(
        {
            "debugpy": lambda module: _patch_debugpy(module, ports),
            "ray.util.rpdb": lambda module: _patch_rpdb(module, ports),
        }
    )


def patch_on_import(patches: dict[str, Patch]) -> None:
    """Run each patch on its module: now where it is imported, else right after its import.

    The venv's other hook of Ray's debuggers (ray_post_mortem_exception) patches this way too.
    Patches of modules some earlier call already patches are not added twice.
    """
    for finder in sys.meta_path:
        if isinstance(finder, _PatchingFinder):
            patches = {name: patch for name, patch in patches.items() if name not in finder.names}
    for name, patch in patches.items():
        if name in sys.modules:
            _apply(name, patch, sys.modules[name])
    if patches:
        sys.meta_path.insert(0, _PatchingFinder(patches))


def claim_port(host: str, ports: range, skip: Iterable[int] = ()) -> tuple[int, socket]:
    """Claim a port of the range for one debugger on host: (port, claim); RuntimeError if none.

    The port is bindable on host now and no other process on the node holds its claim; the
    claim lasts until it is closed or this process exits.
    """
    # Imported here so that install() stays cheap in processes that never open a debugger.
    import random

    skipped = set(skip)
    # A random start spreads ranks that pause in the same instant over the range, so they
    # rarely contend for one claim.
    start = random.randrange(len(ports))
    for port in (*ports[start:], *ports[:start]):
        if port in skipped:
            continue
        claim = _claim(port)
        if claim is None:
            continue
        if _bindable(host, port):
            return port, claim
        claim.close()
    message = (
        f"ray debugger port range {format_port_range(ports)} is full on {host}: "
        f"all {len(ports)} ports are in use (workers that paused keep theirs until they exit); "
        "end the jobs whose tasks paused, or widen ray_debugger_port_range"
    )
    # The task's log is where operators look, so say it there too, not only in the traceback.
    print(message, file=sys.stderr, flush=True)
    raise RuntimeError(message)


def _claim(port: int) -> socket | None:
    import socket

    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # The kernel lets one socket at a time hold a name, in every process of the node's
        # network namespace, and frees it when the holder exits however it exits.
        claim.bind(f"\0ray-debugger-port-{port}")
    except OSError:
        claim.close()
        return None
    return claim


def _bindable(host: str, port: int) -> bool:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As Ray's remote pdb and debugpy's adapter do: a port whose last connection is in
        # TIME_WAIT is free for them, and every detach leaves one for a minute.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def _patch_debugpy(module: ModuleType, ports: range) -> None:
    original = module.listen
    if getattr(original, _WRAPPED, False) or not _recognised(
        "debugpy.listen", original, DEBUGPY_LISTEN_PARAMETERS
    ):
        return

    def listen(endpoint: tuple[str, int] | int, *args: Any, **kwargs: Any) -> Any:
        # debugpy's own default host for a bare port.
        host, port = ("127.0.0.1", endpoint) if isinstance(endpoint, int) else endpoint
        if port != 0:
            return original(endpoint, *args, **kwargs)
        taken: set[int] = set()
        while True:
            port, claim = claim_port(host, ports, taken)
            try:
                result = original((host, port), *args, **kwargs)
            except RuntimeError as exc:
                claim.close()
                # The adapter reports "Can't listen for client connections: [Errno 98] ...":
                # a process outside the hook took the port after we looked.
                if os.strerror(errno.EADDRINUSE) not in str(exc):
                    raise
                taken.add(port)
                continue
            _held_claims.append(claim)
            return result

    _copy_identity(listen, original)
    module.listen = listen


def _patch_rpdb(module: ModuleType, ports: range) -> None:
    remote_pdb = module._RemotePdb
    original = remote_pdb.__init__
    if getattr(original, _WRAPPED, False) or not _recognised(
        "ray.util.rpdb._RemotePdb.__init__", original, RPDB_INIT_PARAMETERS
    ):
        return

    def init(
        self: Any, breakpoint_uuid: Any, host: str, port: int, *args: Any, **kwargs: Any
    ) -> None:
        if port != 0:
            original(self, breakpoint_uuid, host, port, *args, **kwargs)
            return
        taken: set[int] = set()
        while True:
            port, claim = claim_port(host, ports, taken)
            try:
                original(self, breakpoint_uuid, host, port, *args, **kwargs)
                # Listen now rather than when Ray calls listen(), after it has published the
                # address: with SO_REUSEADDR two sockets may bind one port, and only the second
                # listen() fails.
                self._listen_socket.listen(1)
            except OSError as exc:
                claim.close()
                listener = getattr(self, "_listen_socket", None)
                if listener is not None:
                    listener.close()
                if exc.errno != errno.EADDRINUSE:
                    raise
                taken.add(port)
                continue
            # The claim lasts as long as the listening socket: Ray binds a new one, on a new
            # port, at every breakpoint.
            import weakref

            weakref.finalize(self._listen_socket, claim.close)
            return

    _copy_identity(init, original)
    remote_pdb.__init__ = init


def _recognised(name: str, function: Callable[..., Any], expected: Sequence[str]) -> bool:
    import inspect

    try:
        parameters = tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = ()
    if parameters[: len(expected)] == tuple(expected):
        return True
    # Printed in the worker's log, where the operator looks when a pause cannot be reached.
    print(
        f"ray_debugger_port_range: not wrapping {name}: its parameters {parameters} do not "
        f"start with {tuple(expected)}, the signature this hook knows; its debugger ports stay "
        f"random (and the firewall drops them){_versions()}",
        file=sys.stderr,
    )
    return False


def _versions() -> str:
    found = installed_versions()
    return f"; installed: {found}" if found else ""


def installed_versions() -> str:
    """ "ray X, debugpy Y" as installed here, for messages about Ray's debuggers; each of the
    venv's debugger hooks names them when it leaves Ray alone."""
    from importlib import metadata

    found = []
    for package in ("ray", "debugpy"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def is_ray_worker(argv: list[str] | None) -> bool:
    """Whether this is one of Ray's worker processes, which Ray starts as
    `python .../ray/_private/workers/default_worker.py ...`."""
    return os.path.basename((argv or [""])[0]) == WORKER_SCRIPT


def _copy_identity(wrapper: Callable[..., Any], original: Callable[..., Any]) -> None:
    # By hand rather than functools.wraps, to keep imports at start-up minimal.
    wrapper.__name__ = original.__name__
    wrapper.__qualname__ = original.__qualname__
    wrapper.__doc__ = original.__doc__
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(wrapper, _WRAPPED, True)


def _apply(name: str, patch: Patch, module: ModuleType) -> None:
    try:
        patch(module)
    except AttributeError as exc:
        # A changed debugger API must not make `import ray` or `import debugpy` fail.
        print(
            f"ray_debugger_port_range: could not patch {name}, its debugger ports stay "
            f"random: {exc!r}{_versions()}",
            file=sys.stderr,
        )


class _PatchingFinder:
    """Meta path finder that patches the target modules right after they execute."""

    def __init__(self, patches: dict[str, Patch]) -> None:
        self._patches = patches
        self.names = frozenset(patches)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        patch = self._patches.get(fullname)
        if patch is None:
            return None
        spec = self._find_with_other_finders(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(fullname, spec.loader, patch)
        return spec

    def _find_with_other_finders(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        # importlib.util.find_spec would come back to this finder.
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


class _PatchingLoader:
    """Delegates to the real loader; patches the module once it has executed."""

    def __init__(self, name: str, loader: Any, patch: Patch) -> None:
        self._name = name
        self._loader = loader
        self._patch = patch

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _apply(self._name, self._patch, module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_resource_reader, is_package, ... of the real loader.
        return getattr(self._loader, name)


# ---- the kernel's reserved ports -----------------------------------------------------------


def reserve(action: str, ports: range, path: str) -> str:
    """Add the range to the reserved ports ("reserve") or take it out ("release")."""
    with open(path) as current:
        reserved = parse_port_list(current.read())
    wanted = reserved | set(ports) if action == "reserve" else reserved - set(ports)
    if wanted != reserved:
        with open(path, "w") as kernel:
            # The kernel takes "" as a value only as a newline.
            kernel.write(format_port_list(wanted) or "\n")
    return format_port_list(wanted)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("reserve", "release"):
        print("usage: python -m ray_debugger_port_range reserve|release", file=sys.stderr)
        return 2
    value = os.environ.get(ENV_VAR, "")
    try:
        ports = port_range(value)
    except ValueError as error:
        print(f"ray_debugger_port_range: {ENV_VAR}: {error}", file=sys.stderr)
        return 2
    try:
        reserved = reserve(argv[0], ports, RESERVED_PORTS)
    except OSError as exc:
        # A node whose /proc/sys is read-only (a container) still runs Ray: its debuggers keep
        # their claims, only an outgoing connection may take a free debugger port there.
        print(
            f"ray_debugger_port_range: could not {argv[0]} {value} in {RESERVED_PORTS}: {exc}",
            file=sys.stderr,
        )
        return 0
    print(f"ray_debugger_port_range: {RESERVED_PORTS} = {reserved or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
