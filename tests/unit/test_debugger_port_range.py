"""Tests of roles/ray_python/files/ray_debugger_port_range.py, in this process and in Ray."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray_debugger_port_range as rdpr

MODULE_DIR = Path(__file__).resolve().parents[2] / "roles" / "ray_python" / "files"

RANGE = "52300-52309"
PORTS = range(52300, 52310)
PTH_LINE = "import ray_debugger_port_range; ray_debugger_port_range.install()"


def listening_sockets(host: str, ports: range) -> list[socket.socket]:
    """Listen on every port of the range that is still free; the rest is taken already."""
    sockets = []
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Else a port left in TIME_WAIT by an earlier run would stay free for free_port().
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            continue
        sock.listen()
        sockets.append(sock)
    return sockets


@pytest.mark.parametrize(
    ("value", "expected"),
    [("52000-52099", range(52000, 52100)), (" 1-1\n", range(1, 2)), ("1-65535", range(1, 65536))],
)
def test_parse_port_range(value: str, expected: range) -> None:
    assert rdpr.parse_port_range(value) == expected


@pytest.mark.parametrize(
    "value", ["", "52000", "52099-52000", "0-10", "1-65536", "a-b", "52000-52099-1", "52000:52099"]
)
def test_parse_port_range_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        rdpr.parse_port_range(value)


def test_format_port_range() -> None:
    assert rdpr.format_port_range(range(52000, 52100)) == "52000-52099"


def test_free_port_is_in_range_and_bindable() -> None:
    port = rdpr.free_port("127.0.0.1", PORTS)
    assert port in PORTS
    with socket.socket() as sock:
        # What Ray's remote pdb does with the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()


def test_free_port_starts_at_random_offsets() -> None:
    assert len({rdpr.free_port("127.0.0.1", PORTS) for _ in range(40)}) > 1


def test_free_port_skips_ports_in_use() -> None:
    sockets = listening_sockets("127.0.0.1", PORTS[:-1])
    try:
        assert rdpr.free_port("127.0.0.1", PORTS) == PORTS[-1]
    finally:
        for sock in sockets:
            sock.close()


def test_free_port_ipv6() -> None:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    assert rdpr.free_port("::1", PORTS) in PORTS


def test_full_range_raises_and_tells_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = range(52320, 52323)
    sockets = listening_sockets("127.0.0.1", tiny)
    expected = (
        "ray debugger port range 52320-52322 is full on 127.0.0.1: all 3 ports are in use "
        "(other paused tasks?); release a paused task or widen ray_debugger_port_range"
    )
    try:
        with pytest.raises(RuntimeError) as raised:
            rdpr.free_port("127.0.0.1", tiny)
    finally:
        for sock in sockets:
            sock.close()
    assert str(raised.value) == expected
    assert capsys.readouterr().err == expected + "\n"


def test_malformed_env_var_warns_and_installs_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(rdpr.ENV_VAR, "52000_52099")
    meta_path = list(sys.meta_path)
    rdpr.install()
    assert sys.meta_path == meta_path
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "'52000_52099'" in err
    assert "expected LOW-HIGH" in err


def test_unset_env_var_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(rdpr.ENV_VAR, raising=False)
    meta_path = list(sys.meta_path)
    rdpr.install()
    assert sys.meta_path == meta_path


def test_debugpy_listen_wrapper_replaces_only_port_zero() -> None:
    calls: list[object] = []

    def listen(endpoint: object, **kwargs: object) -> object:
        calls.append((endpoint, kwargs))
        return endpoint

    fake_debugpy = types.SimpleNamespace(listen=listen)
    rdpr._patch_debugpy(fake_debugpy, PORTS)  # type: ignore[arg-type]
    rdpr._patch_debugpy(fake_debugpy, PORTS)  # type: ignore[arg-type]
    assert fake_debugpy.listen.__wrapped__ is listen

    host, port = fake_debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
    assert (host, port in PORTS) == ("127.0.0.1", True)
    assert calls[-1] == (("127.0.0.1", port), {"in_process_debug_adapter": True})
    assert fake_debugpy.listen(0) in PORTS
    assert fake_debugpy.listen(("127.0.0.1", 5678)) == ("127.0.0.1", 5678)
    assert fake_debugpy.listen(5678) == 5678


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_pth_line_patches_modules_imported_later(tmp_path: Path) -> None:
    # site.addsitedir() processes the .pth file as the venv's site-packages will.
    (tmp_path / "ray_debugger_port_range.pth").write_text(PTH_LINE + "\n")
    code = (
        f"import site, sys; site.addsitedir({str(tmp_path)!r})\n"
        "assert 'debugpy' not in sys.modules\n"
        "import debugpy\n"
        f"assert debugpy.listen.{rdpr._WRAPPED}\n"
        "print(debugpy.listen(('127.0.0.1', 0))[1])\n"
        "import ray.util.rpdb\n"
        f"assert ray.util.rpdb._RemotePdb.__init__.{rdpr._WRAPPED}\n"
    )
    result = run_python(code, {"PYTHONPATH": str(MODULE_DIR), rdpr.ENV_VAR: RANGE})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) in PORTS


def test_malformed_env_var_in_fresh_interpreter() -> None:
    code = f"{PTH_LINE}\nimport debugpy\nprint(hasattr(debugpy.listen, {rdpr._WRAPPED!r}))\n"
    result = run_python(code, {"PYTHONPATH": str(MODULE_DIR), rdpr.ENV_VAR: "52300"})
    assert (result.returncode, result.stdout) == (0, "False\n")
    assert result.stderr.splitlines() == [
        (
            "ray_debugger_port_range: ignoring RAY_DEBUGGER_PORT_RANGE='52300': expected LOW-HIGH "
            "with 1 <= LOW <= HIGH <= 65535, e.g. 52000-52099"
        )
    ]


# Real Ray workers. In production the .pth line runs install() at interpreter start-up; the
# cluster tests exercise that. Here worker_process_setup_hook runs install() in each worker
# instead (after `import ray`, so ray.util.rpdb is patched in place), which lets these tests
# check the patching inside a real worker without touching the venv's site-packages.


@pytest.fixture(scope="module")
def ray_workers() -> Iterator[types.ModuleType]:
    import ray

    with pytest.MonkeyPatch.context() as env:
        # Ray >= 2.52 turns token auth on for a local cluster and writes ~/.ray/auth_token.
        env.setenv("RAY_AUTH_MODE", os.environ.get("RAY_AUTH_MODE", "disabled"))
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={
                "env_vars": {
                    "PYTHONPATH": str(MODULE_DIR),
                    rdpr.ENV_VAR: RANGE,
                    # breakpoint() in a worker uses remote pdb, what `ray debug` attaches to.
                    "RAY_DEBUG": "legacy",
                },
                "worker_process_setup_hook": "ray_debugger_port_range.install",
            },
        )
        yield ray
        ray.shutdown()


def wait_for_pdb_address(timeout_s: float = 60) -> str:
    from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_list

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        keys = _internal_kv_list("RAY_PDB_", namespace="ray_pdb")
        if keys:
            entry = _internal_kv_get(keys[0], namespace="ray_pdb")
            return json.loads(entry)["pdb_address"]
        time.sleep(0.1)
    raise AssertionError("no task registered a remote pdb in the GCS")


def test_legacy_breakpoint_listens_in_range(ray_workers: types.ModuleType) -> None:
    ray = ray_workers

    @ray.remote
    def paused_task() -> str:
        breakpoint()
        return "resumed"

    result = paused_task.remote()
    host, _, port = wait_for_pdb_address().rpartition(":")
    assert int(port) in PORTS
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(b"c\n")
        # Hanging up before pdb has written its prompt would break its pipe; it hangs up on "c".
        while conn.recv(4096):
            pass
    assert ray.get(result, timeout=60) == "resumed"


def test_debugpy_listens_in_range(ray_workers: types.ModuleType) -> None:
    ray = ray_workers

    @ray.remote
    def open_debugger_port() -> int:
        # What Ray does before it waits for the VS Code extension to attach.
        ray.util.debugpy._ensure_debugger_port_open_thread_safe()
        return ray._private.worker.global_worker.debugger_port

    assert ray.get(open_debugger_port.remote(), timeout=60) in PORTS
