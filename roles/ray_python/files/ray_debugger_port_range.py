"""Keep the ports of Ray's debuggers inside RAY_DEBUGGER_PORT_RANGE ("LOW-HIGH").

Ray opens its debuggers on ports the kernel picks at random (debugpy.listen((ip, 0)) in
ray/util/debugpy.py, a port-0 bind in ray/util/rpdb.py's _RemotePdb), which no firewall rule
can allow. A .pth file in the cluster's venv runs install() in every Python process:

    import ray_debugger_port_range; ray_debugger_port_range.install()

so each port-0 request is turned into a free port of the range before the debugger binds it.
"""

from __future__ import annotations

import os
import sys

# Not `from typing import TYPE_CHECKING`: importing typing costs ~10 ms in every interpreter.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

    Patch = Callable[[ModuleType], None]

ENV_VAR = "RAY_DEBUGGER_PORT_RANGE"
# Set on our wrappers so that a second install() in one process does not wrap twice.
_WRAPPED = "_ray_debugger_port_range_wrapped"


def install() -> None:
    """Patch Ray's debuggers, now or when imported, if RAY_DEBUGGER_PORT_RANGE is set."""
    value = os.environ.get(ENV_VAR)
    if not value:
        return
    try:
        ports = parse_port_range(value)
    except ValueError:
        # Runs at start-up of every interpreter: report and carry on, never break Python.
        print(
            f"ray_debugger_port_range: ignoring {ENV_VAR}={value!r}: expected LOW-HIGH "
            "with 1 <= LOW <= HIGH <= 65535, e.g. 52000-52099",
            file=sys.stderr,
        )
        return
    patches: dict[str, Patch] = {
        "debugpy": lambda module: _patch_debugpy(module, ports),
        "ray.util.rpdb": lambda module: _patch_rpdb(module, ports),
    }
    for name, patch in patches.items():
        if name in sys.modules:
            _apply(name, patch, sys.modules[name])
    if not any(isinstance(finder, _PatchingFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchingFinder(patches))


def parse_port_range(value: str) -> range:
    """Parse "LOW-HIGH" (inclusive) into the range of ports; ValueError if malformed."""
    low_text, sep, high_text = value.strip().partition("-")
    if not sep:
        raise ValueError(f"no '-' in port range {value!r}")
    low, high = int(low_text), int(high_text)
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"port range {value!r} is empty or outside 1-65535")
    return range(low, high + 1)


def format_port_range(ports: range) -> str:
    return f"{ports.start}-{ports.stop - 1}"


def free_port(host: str, ports: range) -> int:
    """Return a port of the range that can be bound on host now; RuntimeError if none."""
    # Imported here so that install() stays cheap in processes that never open a debugger.
    import random
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # A random start spreads tasks that pause at the same moment over the range.
    start = random.randrange(len(ports))
    for port in (*ports[start:], *ports[:start]):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # As Ray's remote pdb and debugpy's adapter do: a port whose last connection is in
            # TIME_WAIT is free for them, and every detach leaves one for a minute.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                continue
        return port
    message = (
        f"ray debugger port range {format_port_range(ports)} is full on {host}: "
        f"all {len(ports)} ports are in use (other paused tasks?); "
        "release a paused task or widen ray_debugger_port_range"
    )
    # The task's log is where operators look, so say it there too, not only in the traceback.
    print(message, file=sys.stderr, flush=True)
    raise RuntimeError(message)


def _patch_debugpy(module: ModuleType, ports: range) -> None:
    original = module.listen
    if getattr(original, _WRAPPED, False):
        return

    def listen(endpoint: tuple[str, int] | int, *args: Any, **kwargs: Any) -> Any:
        if isinstance(endpoint, int) and endpoint == 0:
            # debugpy's own default host for a bare port.
            endpoint = free_port("127.0.0.1", ports)
        elif isinstance(endpoint, tuple) and endpoint[1] == 0:
            endpoint = (endpoint[0], free_port(endpoint[0], ports))
        return original(endpoint, *args, **kwargs)

    _copy_identity(listen, original)
    module.listen = listen


def _patch_rpdb(module: ModuleType, ports: range) -> None:
    remote_pdb = module._RemotePdb
    original = remote_pdb.__init__
    if getattr(original, _WRAPPED, False):
        return

    def init(
        self: Any, breakpoint_uuid: Any, host: str, port: int, *args: Any, **kwargs: Any
    ) -> None:
        if port == 0:
            port = free_port(host, ports)
        original(self, breakpoint_uuid, host, port, *args, **kwargs)

    _copy_identity(init, original)
    remote_pdb.__init__ = init


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
            f"random: {exc!r}",
            file=sys.stderr,
        )


class _PatchingFinder:
    """Meta path finder that patches the target modules right after they execute."""

    def __init__(self, patches: dict[str, Patch]) -> None:
        self._patches = patches

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
