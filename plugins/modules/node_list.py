#!/usr/bin/python
"""Ask the head for its node list, once or until a condition holds, in one process on the
head: a wait that asked through ansible.builtin.uri started a module on the head at every
poll (SSH's session, a Python start and its imports, about 0.4 s of the node's CPU), once a
second, while Ray started there (docs/performance.md)."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.verl_debug.cluster.plugins.module_utils.ray_nodes_api import (
    node_rows,
    nodes_not_joined,
    nodes_not_ready,
)

DOCUMENTATION = r"""
module: node_list
short_description: Read a Ray head's node list, once or until the nodes are there
description:
  - Asks Ray's state API (O(url), C(/api/v0/nodes)) for the cluster's nodes, from the node
    it runs on, usually the head itself.
  - Without a condition it asks once. With O(joined) or O(ready) it asks again every
    O(interval) seconds, in the same process, until the condition holds or O(timeout)
    seconds have passed. It does not fail when they pass; its caller checks the reply.
  - Read-only.
options:
  url:
    description: The state API's node list, such as C(http://10.0.0.1:8265/api/v0/nodes).
    type: str
    required: true
  headers:
    description: Request headers, such as the cluster token's C(Authorization). Never logged.
    type: dict
    default: {}
  joined:
    description:
      - "Wait until every address has an ALIVE node id other than those listed for it: the
        node ids alive there before Ray stopped (an empty list for a node whose Ray did not
        run)."
    type: dict
  ready:
    description:
      - "Wait until every address has exactly one ALIVE node offering its number of GPUs."
    type: dict
  timeout:
    description: How long to wait for O(joined) or O(ready), in seconds; 0 asks once.
    type: int
    default: 0
  interval:
    description: Seconds between two requests.
    type: float
    default: 1
notes:
  - Supports check mode: it changes nothing.
"""

EXAMPLES = r"""
- name: Wait for the nodes of this batch to be alive in the cluster
  verl_debug.cluster.node_list:
    url: http://10.0.0.1:8265/api/v0/nodes
    joined:
      10.0.0.2: []
      10.0.0.3: ["8bd1c37e0d3c4ab9a0b1a3c4f0e4b1b1c0d9e8f7a6b5c4d3e2f1a0b9"]
    timeout: 180
  delegate_to: head
  register: ray_nodes_reply
  no_log: true
"""

RETURN = r"""
status:
  description: The last reply's HTTP status, -1 where nothing answered.
  type: int
  returned: always
json:
  description: The last reply's body, where it was JSON; the rows are under C(data.result.result).
  type: dict
  returned: when the head answered with JSON
msg:
  description: Why the last request got no reply, or the HTTP error's reason.
  type: str
  returned: when the last request failed
attempts:
  description: How many requests were made.
  type: int
  returned: always
"""

# A head whose dashboard hangs must not hold a poll for long: the next one asks again.
REQUEST_TIMEOUT_S = 5


def ask(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """One request, shaped as ansible.builtin.uri registers it: status, json where the body
    is JSON, msg where it failed."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as answer:
            status, body = answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        status, body = refused.code, refused.read()
        reply: dict[str, Any] = {"status": status, "msg": f"HTTP Error {status}: {refused.reason}"}
    except (OSError, ValueError) as problem:
        return {"status": -1, "msg": f"Request failed: {problem}"}
    else:
        reply = {"status": status}
    with contextlib.suppress(ValueError):
        reply["json"] = json.loads(body)
    return reply


def holds(reply: dict[str, Any], joined: dict | None, ready: dict | None) -> bool:
    """Whether the reply shows what the caller waits for (always, where it waits for nothing)."""
    rows = node_rows(reply)
    if joined is not None and nodes_not_joined(rows, joined):
        return False
    return ready is None or ("json" in reply and not nodes_not_ready(rows, ready))


def wait(
    url: str,
    headers: dict[str, str],
    joined: dict | None,
    ready: dict | None,
    timeout: float,
    interval: float,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    attempts = 0
    while True:
        attempts += 1
        reply = ask(url, headers)
        if holds(reply, joined, ready) or time.monotonic() + interval > deadline:
            return {**reply, "attempts": attempts}
        time.sleep(interval)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "headers": {"type": "dict", "default": {}, "no_log": True},
            "joined": {"type": "dict"},
            "ready": {"type": "dict"},
            "timeout": {"type": "int", "default": 0},
            "interval": {"type": "float", "default": 1},
        },
        supports_check_mode=True,
    )
    params = module.params
    reply = wait(
        params["url"],
        params["headers"],
        params["joined"],
        params["ready"],
        params["timeout"],
        params["interval"],
    )
    module.exit_json(changed=False, **reply)


if __name__ == "__main__":
    main()
