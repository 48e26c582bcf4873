"""Hand debugpy a crashed task's real exception in post_mortem mode, on every Python.

When a task raises, Ray's post-mortem (ray/util/debugpy.py's _debugpy_excepthook, run while
Ray handles the error) waits for a debugger, then reads `sys.exc_info()` for debugpy. On
Python 3.12 and newer its read comes back empty (ray-project/ray#54044): the worker pauses
and a debugger attaches, but it sees no exception and none of the frames that raised it.
Read at the start of a wrapper in that function's place, `sys.exc_info()` still holds the
task's exception (seen on Python 3.12 with Ray 2.60 and debugpy 1.8.22: the wrapper reads
the task's ValueError, and Ray's function, called next, reads nothing). So this hook wraps
the function in each Ray worker of post_mortem mode, reads the exception first, and hands it
to debugpy itself with the public `debugpy.trigger_exception_handler`, which honours the
client's exception breakpoints as Ray's own call does. Where Ray or debugpy is not what it
knows, it leaves Ray's function as it is and says so in the worker's log. Imported at every
start of the venv's Python by a .pth line, like the port-range hook, whose import patching
it shares.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

NAME = "ray_post_mortem_exception"
# What this hook wraps (Ray 2.60): a function without parameters that reads sys.exc_info().
RAY_MODULE, RAY_FUNCTION = "ray.util.debugpy", "_debugpy_excepthook"
_WRAPPED = "_ray_post_mortem_exception_wrapped"


def needed(environ: dict[str, str] | os._Environ[str], argv: list[str]) -> bool:
    """Whether this process is a Ray worker whose crashes pause for debugpy (post_mortem)."""
    if environ.get("RAY_DEBUG_POST_MORTEM") != "1" or environ.get("RAY_DEBUG", "1") != "1":
        return False
    from ray_debugger_port_range import is_ray_worker

    return is_ray_worker(argv)


def install() -> bool:
    """Wrap Ray's post-mortem where it is needed, now or when imported; whether it will."""
    if not needed(os.environ, getattr(sys, "argv", [])):
        return False
    from ray_debugger_port_range import patch_on_import

    patch_on_import({RAY_MODULE: wrap})
    return True


def wrap(module: ModuleType) -> None:
    """Replace the module's post-mortem function with one that keeps the exception."""
    original = getattr(module, RAY_FUNCTION, None)
    code = getattr(original, "__code__", None)
    if code is None or code.co_argcount != 0:
        _say(f"{RAY_MODULE}.{RAY_FUNCTION} is not the function this hook knows")
        return
    if getattr(original, _WRAPPED, False):
        return

    def excepthook() -> None:
        # First, before anything can clear it.
        error = sys.exc_info()
        import debugpy

        trigger = getattr(debugpy, "trigger_exception_handler", None)
        if error[1] is None or trigger is None:
            if trigger is None:
                _say("debugpy has no trigger_exception_handler (1.8.20 and newer have it)")
            original()
            return
        trigger(error)
        # What Ray's own does after the stop: the task's traceback in the worker's log.
        sys.excepthook(*error)

    excepthook.__name__ = excepthook.__qualname__ = RAY_FUNCTION
    excepthook.__doc__ = original.__doc__
    excepthook.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(excepthook, _WRAPPED, True)
    setattr(module, RAY_FUNCTION, excepthook)


def _say(why: str) -> None:
    # Printed in the worker's log, where the operator looks when a crash shows no exception.
    from ray_debugger_port_range import installed_versions

    print(
        f"{NAME}: leaving Ray's post-mortem as it is; on Python 3.12 and newer a crash then "
        f"reaches the debugger without its exception (ray-project/ray#54044): {why}; "
        f"installed: {installed_versions()}",
        file=sys.stderr,
    )
