"""Tests of roles/ray_debug_hooks/files/ray_debugger_port_range.py, in this process and in Ray."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import ray_debugger_port_range as rdpr
import yaml
from ray_heads import NODE_HOOKS_PATH

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


@pytest.fixture(autouse=True)
def release_held_claims() -> Iterator[None]:
    """Claims a wrapped debugpy.listen keeps for the process's life, freed between tests."""
    yield
    while rdpr._held_claims:
        rdpr._held_claims.pop().close()


def test_claimed_port_is_in_range_and_bindable() -> None:
    port, claim = rdpr.claim_port("127.0.0.1", PORTS)
    with claim, socket.socket() as sock:
        assert port in PORTS
        # What Ray's remote pdb does with the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()


def test_claims_start_at_random_offsets() -> None:
    ports = set()
    for _ in range(40):
        port, claim = rdpr.claim_port("127.0.0.1", PORTS)
        claim.close()
        ports.add(port)
    assert len(ports) > 1


def test_claim_skips_ports_in_use() -> None:
    sockets = listening_sockets("127.0.0.1", PORTS[:-1])
    try:
        port, claim = rdpr.claim_port("127.0.0.1", PORTS)
        claim.close()
        assert port == PORTS[-1]
    finally:
        for sock in sockets:
            sock.close()


def test_claim_skips_ports_claimed_but_not_yet_bound() -> None:
    # debugpy's adapter binds the port a moment after the claim: the claim alone must keep
    # every other debugger off it. Claims until the range is full, so that a port this machine
    # uses for something else (an outgoing connection's ephemeral port) only shortens the run.
    held = []
    try:
        for _ in PORTS:
            try:
                held.append(rdpr.claim_port("127.0.0.1", PORTS))
            except RuntimeError:
                break
        ports = [port for port, _ in held]
        assert len(ports) >= 2, f"too few free ports in {RANGE} to test: {ports}"
        assert len(set(ports)) == len(ports), ports
    finally:
        for _, claim in held:
            claim.close()


def test_claim_skips_ports_asked_to_skip() -> None:
    port, claim = rdpr.claim_port("127.0.0.1", PORTS, skip=PORTS[1:])
    claim.close()
    assert port == PORTS[0]


def test_claim_dies_with_its_process() -> None:
    code = (
        "import os, ray_debugger_port_range as r\n"
        f"r.claim_port('127.0.0.1', range({PORTS[0]}, {PORTS[0] + 1}))\n"
        "os._exit(0)\n"
    )
    assert run_python(code, {"PYTHONPATH": NODE_HOOKS_PATH}).returncode == 0
    port, claim = rdpr.claim_port("127.0.0.1", PORTS, skip=PORTS[1:])
    claim.close()
    assert port == PORTS[0]


def test_claim_ipv6() -> None:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port, claim = rdpr.claim_port("::1", PORTS)
    claim.close()
    assert port in PORTS


def test_full_range_raises_and_tells_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = range(52320, 52323)
    sockets = listening_sockets("127.0.0.1", tiny)
    expected = (
        "ray debugger port range 52320-52322 is full on 127.0.0.1: all 3 ports are in use "
        "(workers that paused keep theirs until they exit); end the jobs whose tasks paused, "
        "or widen ray_debugger_port_range"
    )
    try:
        with pytest.raises(RuntimeError) as raised:
            rdpr.claim_port("127.0.0.1", tiny)
    finally:
        for sock in sockets:
            sock.close()
    assert str(raised.value) == expected
    assert capsys.readouterr().err == expected + "\n"


def test_unset_env_var_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(rdpr.ENV_VAR, raising=False)
    meta_path = list(sys.meta_path)
    rdpr.install()
    assert sys.meta_path == meta_path


def fake_debugpy(listen: Callable[..., object]) -> types.SimpleNamespace:
    module = types.SimpleNamespace(listen=listen)
    rdpr._patch_debugpy(module, PORTS)  # type: ignore[arg-type]
    return module


def test_debugpy_listen_wrapper_replaces_only_port_zero() -> None:
    calls: list[object] = []

    def listen(__endpoint: object, **kwargs: object) -> object:
        calls.append((__endpoint, kwargs))
        return __endpoint

    debugpy = fake_debugpy(listen)
    rdpr._patch_debugpy(debugpy, PORTS)  # type: ignore[arg-type]
    assert debugpy.listen.__wrapped__ is listen

    host, port = debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
    assert (host, port in PORTS) == ("127.0.0.1", True)
    assert calls[-1] == (("127.0.0.1", port), {"in_process_debug_adapter": True})
    assert debugpy.listen(0)[1] in PORTS
    assert debugpy.listen(("127.0.0.1", 5678)) == ("127.0.0.1", 5678)
    assert debugpy.listen(5678) == 5678


def test_debugpy_listen_retries_a_port_taken_after_the_claim() -> None:
    tried: list[int] = []

    def listen(__endpoint: tuple[str, int]) -> tuple[str, int]:
        tried.append(__endpoint[1])
        if len(tried) == 1:
            # What debugpy raises when its adapter cannot bind.
            raise RuntimeError(
                "Can't listen for client connections: [Errno 98] Address already in use"
            )
        return __endpoint

    assert fake_debugpy(listen).listen(("127.0.0.1", 0))[1] == tried[1] != tried[0]
    # The failed port's claim is released, the winning one is held for the process's life.
    port, claim = rdpr.claim_port("127.0.0.1", PORTS, skip=set(PORTS) - {tried[0]})
    claim.close()
    assert port == tried[0]
    assert rdpr._claim(tried[1]) is None


def test_debugpy_listen_passes_other_errors_on() -> None:
    def listen(__endpoint: tuple[str, int]) -> tuple[str, int]:
        raise RuntimeError("timed out waiting for adapter to connect")

    with pytest.raises(RuntimeError, match="timed out"):
        fake_debugpy(listen).listen(("127.0.0.1", 0))


def test_unknown_signature_is_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    def listen(address: object, port: int = 0) -> object:
        return address

    assert fake_debugpy(listen).listen is listen
    err = capsys.readouterr().err
    assert "not wrapping debugpy.listen: its parameters ('address', 'port')" in err
    assert "its debugger ports stay random" in err
    assert "installed: ray " in err


class FakeRemotePdb:
    """Ray 2.60's _RemotePdb up to the point where it binds its port."""

    def __init__(self, breakpoint_uuid: str, host: str, port: int, ip_address: str) -> None:
        self._listen_socket = socket.socket()
        self._listen_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, True)
        self._listen_socket.bind((host, port))


def test_rpdb_listens_in_range_before_ray_publishes_the_port() -> None:
    rpdb = types.SimpleNamespace(_RemotePdb=type("RemotePdb", (FakeRemotePdb,), {}))
    rdpr._patch_rpdb(rpdb, PORTS)  # type: ignore[arg-type]
    pdb = rpdb._RemotePdb("uuid", "127.0.0.1", 0, "127.0.0.1")
    port = pdb._listen_socket.getsockname()[1]
    assert port in PORTS
    # Listening already: a connection is queued before Ray calls listen() and accept().
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert rdpr._claim(port) is None
    pdb._listen_socket.close()
    del pdb
    claim = rdpr._claim(port)
    assert claim is not None
    claim.close()


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
    result = run_python(code, {"PYTHONPATH": NODE_HOOKS_PATH, rdpr.ENV_VAR: RANGE})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) in PORTS


def test_reserve_and_release_keep_the_operators_own_ports(tmp_path: Path) -> None:
    kernel = tmp_path / "ip_local_reserved_ports"
    kernel.write_text("40000\n")
    assert rdpr.reserve("reserve", PORTS, str(kernel)) == "40000,52300-52309"
    assert kernel.read_text() == "40000,52300-52309"
    assert rdpr.reserve("reserve", PORTS, str(kernel)) == "40000,52300-52309"
    assert rdpr.reserve("release", PORTS, str(kernel)) == "40000"
    assert kernel.read_text() == "40000"


def test_reserve_on_a_read_only_proc_says_so_and_lets_ray_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv(rdpr.ENV_VAR, RANGE)
    monkeypatch.setattr(rdpr, "RESERVED_PORTS", str(tmp_path / "missing" / "ports"))
    assert rdpr.main(["reserve"]) == 0
    assert "ray_debugger_port_range: could not reserve 52300-52309 in " in capsys.readouterr().err
    assert rdpr.main(["free"]) == 2


# A crowd: every rank of a training step opens its debugger in the same instant.
CROWD = 8
OPEN_DEBUGGER = {
    "debugpy": "import debugpy\nopen_port = lambda: debugpy.listen(('127.0.0.1', 0))[1]\n",
    "rpdb": (
        "from ray.util.rpdb import _RemotePdb\n"
        # Held until the rank exits, as a paused task holds its debugger.
        "held = []\n"
        "open_port = lambda: held.append(_RemotePdb('crowd', '0.0.0.0', 0, '127.0.0.1')) or "
        "held[0]._listen_socket.getsockname()[1]\n"
    ),
}


@pytest.mark.parametrize("debugger", sorted(OPEN_DEBUGGER))
def test_a_crowd_opening_debuggers_at_once_gets_distinct_ports(debugger: str) -> None:
    code = (
        f"{PTH_LINE}\nimport sys\n{OPEN_DEBUGGER[debugger]}"
        "print('ready', flush=True)\nsys.stdin.readline()\n"
        "print(open_port(), flush=True)\nsys.stdin.readline()\n"
    )
    crowd = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": NODE_HOOKS_PATH, rdpr.ENV_VAR: "52330-52339"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(CROWD)
    ]
    try:
        assert [rank.stdout.readline() for rank in crowd] == ["ready\n"] * CROWD  # type: ignore[union-attr]
        for rank in crowd:
            rank.stdin.write("go\n")  # type: ignore[union-attr]
            rank.stdin.flush()  # type: ignore[union-attr]
        ports = [rank.stdout.readline().strip() for rank in crowd]  # type: ignore[union-attr]
    finally:
        for rank in crowd:
            rank.kill()
            rank.wait()
    assert len(set(ports)) == CROWD, ports
    assert all(int(port) in range(52330, 52340) for port in ports), ports


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
                    "PYTHONPATH": NODE_HOOKS_PATH,
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


def test_breakpoint_does_nothing_in_mode_off(ray_workers: types.ModuleType) -> None:
    ray = ray_workers
    defaults = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "roles/ray_defaults/defaults/main.yml").read_text()
    )

    @ray.remote(runtime_env={"env_vars": defaults["ray_debug_modes"]["off"]["env"]})
    def forgotten_breakpoint() -> str:
        breakpoint()
        return "went on"

    assert ray.get(forgotten_breakpoint.remote(), timeout=60) == "went on"
