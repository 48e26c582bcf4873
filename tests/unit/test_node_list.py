"""The node_list module's wait: one process asks a real HTTP server standing in for the head's
state API, again every interval, until the nodes it waits for are there or its time is up,
and registers the last reply as ansible.builtin.uri did (status, json, msg)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible_collections.verl_debug.cluster.plugins.modules import node_list


def reply(*rows: dict) -> dict:
    return {"result": True, "data": {"result": {"total": len(rows), "result": list(rows)}}}


OLD = {"node_ip": "10.0.0.2", "node_id": "old", "state": "ALIVE", "resources_total": {}}
NEW = {**OLD, "node_id": "new"}


class Head:
    """Answers each request with the next of its replies, the last one again once they run out,
    and keeps each request's Authorization header."""

    def __init__(self, replies: list[tuple[int, dict]]) -> None:
        self.replies = replies
        self.seen: list[str | None] = []
        head = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                head.seen.append(self.headers.get("Authorization"))
                status, body = head.replies[min(len(head.seen), len(head.replies)) - 1]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/api/v0/nodes"


@pytest.fixture
def serve() -> Iterator[Callable[[list[tuple[int, dict]]], Head]]:
    started: list[Head] = []

    def start(replies: list[tuple[int, dict]]) -> Head:
        head = Head(replies)
        threading.Thread(target=head.server.serve_forever, daemon=True).start()
        started.append(head)
        return head

    yield start
    for head in started:
        head.server.shutdown()
        head.server.server_close()


def test_without_a_condition_it_asks_once(serve) -> None:
    head = serve([(200, reply(OLD))])
    got = node_list.wait(head.url, {}, None, None, timeout=30, interval=0.01)
    assert got == {"status": 200, "json": reply(OLD), "attempts": 1}


def test_joined_waits_for_a_node_id_that_was_not_there_before(serve) -> None:
    # Ray restarted at 10.0.0.2: its old id stays alive a while, then the new one joins.
    dead = {**OLD, "state": "DEAD"}
    head = serve([(200, reply(OLD)), (200, reply(OLD)), (200, reply(dead, NEW))])
    got = node_list.wait(head.url, {}, {"10.0.0.2": ["old"]}, None, timeout=30, interval=0.01)
    assert got["attempts"] == 3
    assert got["json"] == reply(dead, NEW)


def test_ready_waits_for_one_alive_node_with_its_gpus(serve) -> None:
    gpus = {**NEW, "resources_total": {"GPU": 8.0}}
    head = serve([(200, reply()), (200, reply(NEW)), (200, reply(gpus))])
    got = node_list.wait(head.url, {}, None, {"10.0.0.2": 8}, timeout=30, interval=0.01)
    assert (got["attempts"], got["json"]) == (3, reply(gpus))


def test_it_sends_the_headers_and_returns_a_refusal_when_its_time_is_up(serve) -> None:
    head = serve([(401, {"detail": "Unauthorized"})])
    got = node_list.wait(
        head.url, {"Authorization": "Bearer wrong"}, {"10.0.0.2": []}, None,
        timeout=1, interval=0.2,
    )  # fmt: skip
    assert got["status"] == 401 and got["json"] == {"detail": "Unauthorized"}
    assert 3 <= got["attempts"] <= 6
    assert set(head.seen) == {"Bearer wrong"}


def test_a_head_that_does_not_answer_is_status_minus_one_with_the_reason() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    got = node_list.wait(f"http://127.0.0.1:{port}/", {}, None, {"10.0.0.2": 0}, 0, 0.01)
    assert got["status"] == -1 and "json" not in got and got["attempts"] == 1
    assert "Connection refused" in got["msg"]
