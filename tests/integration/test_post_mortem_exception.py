"""The venv's post-mortem hook on a real local head: a crashed task's exception, message and
raising frame reach a DAP client through the hook's wrapper of Ray's post-mortem. Ray alone
loses them on Python 3.12+ (ray-project/ray#54044); this controller runs 3.11, so the loss
itself is proven absent on Debian 13's nodes by the online scenario
(molecule/shared/tests/test_debugger.py), and here the wrapper's path is."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest
import ray_post_mortem_exception as hook
from ray_heads import NODE_HOOKS_PATH, finish, ray_head, start_driver, wait_for_pauses

from ray_debug_tools.dap_client import DapSession
from ray_debug_tools.pauses import paused_workers

# The task loads the hook as the .pth line does in a node's workers, then crashes.
CRASH_DRIVER = """\
import sys

import ray

ray.init(address=sys.argv[1])


def crashes():
    answer = 42
    raise ValueError(f"crash with answer={answer}")


@ray.remote(max_retries=0)
def task():
    import ray_post_mortem_exception

    assert ray_post_mortem_exception.install()
    crashes()


try:
    ray.get(task.remote())
except ValueError as exc:
    print("FAILED", exc, flush=True)
"""
RAISE_LINE = (
    CRASH_DRIVER.splitlines().index('    raise ValueError(f"crash with answer={answer}")') + 1
)


def test_a_crash_reaches_dap_with_its_exception_and_frame(tmp_path: Path) -> None:
    env = {
        "RAY_DEBUG_POST_MORTEM": "1",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [NODE_HOOKS_PATH, os.environ.get("PYTHONPATH")])
        ),
    }
    with ray_head(env, tmp_path / "ray.log") as head:
        driver, script = start_driver(CRASH_DRIVER, tmp_path, head)
        [pause] = wait_for_pauses(lambda: paused_workers(head.dashboard_url), driver)
        with DapSession.connect(pause.ip, pause.port, timeout=30) as dap:
            thread = dap.attach_for_post_mortem()["body"]["threadId"]
            info = dap.exception_info(thread)
            assert info["exceptionId"].startswith("ValueError"), info
            assert info["description"] == "crash with answer=42", info
            raised = dap.stack_trace(thread)[0]
            assert (raised["name"], raised["line"]) == ("crashes", RAISE_LINE), raised
            assert raised["source"]["path"] == str(script)
            assert dap.evaluate("answer", raised["id"]) == "42"
            # The stop came through the hook's wrapper, not Ray's function alone.
            wrapped = "__import__('ray.util.debugpy').util.debugpy._debugpy_excepthook.__wrapped__"
            assert "function _debugpy_excepthook" in dap.evaluate(wrapped, raised["id"])
            dap.continue_(thread)
            dap.disconnect()
        output = finish(driver)
        assert "FAILED" in output and "ValueError: crash with answer=42" in output, output


def test_a_function_of_another_shape_is_left_alone_and_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def _debugpy_excepthook(error: object) -> None: ...

    module = types.SimpleNamespace(_debugpy_excepthook=_debugpy_excepthook)
    hook.wrap(module)  # type: ignore[arg-type]
    assert module._debugpy_excepthook is _debugpy_excepthook
    assert "is not the function this hook knows" in capsys.readouterr().err


def test_only_a_post_mortem_worker_is_wrapped() -> None:
    worker = ["/venv/lib/python3.11/site-packages/ray/_private/workers/default_worker.py"]
    post_mortem = {"RAY_DEBUG_POST_MORTEM": "1"}
    assert hook.needed(post_mortem, worker)
    assert not hook.needed(post_mortem, ["/venv/bin/ray"])
    assert not hook.needed({}, worker)
    # The modes never mix: legacy's pdb post-mortem is Ray's own.
    assert not hook.needed({**post_mortem, "RAY_DEBUG": "legacy"}, worker)
