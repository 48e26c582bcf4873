#!/usr/bin/python
"""The documentation of the node_upload action (plugins/action/node_upload.py), which sends a
large file to a node where the node lacks it, checksummed on neither end."""

DOCUMENTATION = r"""
module: node_upload
short_description: Send a large file to a node where it lacks a file of that name and size
description:
  - For a file whose name identifies its content, such as the wheelhouse archive named by its
    lock's digest. A file at O(dest) of the same size is taken to be it, and nothing is sent.
  - Otherwise sends O(src) over the connection, then renames it to O(dest) from beside it,
    owned by root with O(mode), so that a transfer cut off anywhere leaves nothing at O(dest).
  - Unlike M(ansible.builtin.copy), checksums the file on neither end, and starts no module on
    the node.
  - An action plugin; this file documents it.
options:
  src:
    description: The file on the controller, an absolute path.
    type: str
    required: true
  dest:
    description: Where the node keeps it; its directory must exist.
    type: str
    required: true
  mode:
    description: The file's mode, in octal, such as C("0644").
    type: str
    required: true
notes:
  - Supports check mode. Reports no diff.
"""

EXAMPLES = r"""
- name: Send the wheelhouse archive to the head
  verl_debug.cluster.node_upload:
    src: /home/operator/.cache/wheelhouse/7a9e6f62a7810411.tar
    dest: /var/cache/ray-cluster/wheelhouse/7a9e6f62a7810411.tar
    mode: "0644"
"""

RETURN = r"""
dest:
  description: Where the file is on the node.
  type: str
  returned: always
size:
  description: Its size in bytes.
  type: int
  returned: always
"""
