"""Let Ray's dashboard agent read the stacks of Ray's workers where Yama restricts ptrace.

The agent runs py-spy as the Ray service's user, the same user as every worker, but it is
not their ancestor: where Yama allows ptrace only from ancestors (kernel.yama.ptrace_scope=1,
Ubuntu's default) py-spy may not read a worker, and the dashboard's stack and flame graph
answer with an error. A process may name who may trace it (PR_SET_PTRACER); each Python
started under the Ray service (which sets ENV_VAR) says "any process", and the kernel's own
checks still apply: only the same user, or root, may then attach, as without Yama. Nothing
gains a capability, and no process outside the service changes. Imported at every start of
the venv's Python by a .pth line, like the debugger port-range hook.
"""

from __future__ import annotations

import ctypes
import os

ENV_VAR = "RAY_STACK_READABLE"
# From linux/prctl.h.
PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = ctypes.c_ulong(-1)


def declare() -> bool:
    """Whether this process now lets any process of its user trace it. False outside the Ray
    service, and where the kernel has no Yama (EINVAL): there nothing needs declaring."""
    if os.environ.get(ENV_VAR) != "1":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    return libc.prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0
