"""The one grammar of Ray's ports and port ranges, for the controller and the nodes alike.

Validation (the filters) and the nodes' debugger hook (roles/ray_debug_hooks, which installs
this file beside it) read ray_debugger_port_range with it, so that what validation passes the
hook accepts; the kernel's list of reserved ports, which the hook writes and the proof
reads, is spelled here too. The hook imports it at start-up of every interpreter on a node:
it imports nothing and stays small.
"""

from __future__ import annotations


def port_span(value: int | str) -> tuple[int, int]:
    """A port (6379, "6379") or an inclusive range ("10002-19999") as (low, high).

    ValueError, naming the value and what to write instead, if it is neither.
    """
    return _span(value, "a port or 'LOW-HIGH'")


def port_range(value: int | str) -> range:
    """An inclusive range written "LOW-HIGH" (one port is "52000-52000"), as a range of ports.

    A lone port is refused: a debugger range needs a port per worker that may pause at once,
    so one port is rarely meant, and "52000-52000" says that it is.
    """
    low, high = _span(value, "'LOW-HIGH'")
    if "-" not in str(value):
        raise ValueError(f"'{low}' is a single port; write it as a range, e.g. {low}-{low}")
    return range(low, high + 1)


def format_port_range(ports: range) -> str:
    """The "LOW-HIGH" that port_range reads back as `ports`."""
    return f"{ports.start}-{ports.stop - 1}"


def _span(value: int | str, expected: str) -> tuple[int, int]:
    low_text, sep, high_text = str(value).strip().partition("-")
    low = _port(low_text)
    high = _port(high_text) if sep else low
    if low is None or high is None:
        raise ValueError(
            f"port range {value!r} is malformed: expected {expected}, e.g. '52000-52099'"
        )
    if not (1 <= low <= 65535 and 1 <= high <= 65535):
        raise ValueError(f"port range {value!r} is outside 1-65535")
    if low > high:
        raise ValueError(
            f"port range {value!r} is reversed: the low port must come first, e.g. '{high}-{low}'"
        )
    return low, high


def _port(text: str) -> int | None:
    digits = text.strip()
    # int() alone would also take "+1", "5_000" and non-ASCII digits; the runbook and the Ray
    # unit show the value as written, so only plain digits may spell a port.
    if not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits)


def parse_port_list(value: str) -> set[int]:
    """Ports of a kernel port list such as "8080,52000-52099" (empty: none).

    ValueError, as port_span's, for an item that is neither a port nor a range.
    """
    ports: set[int] = set()
    for item in value.replace("\n", ",").split(","):
        if item.strip():
            low, high = port_span(item)
            ports.update(range(low, high + 1))
    return ports


def format_port_list(ports: set[int]) -> str:
    """The kernel's own spelling: sorted, runs joined as LOW-HIGH, items by commas."""
    runs: list[list[int]] = []
    for port in sorted(ports):
        if runs and port == runs[-1][1] + 1:
            runs[-1][1] = port
        else:
            runs.append([port, port])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)
