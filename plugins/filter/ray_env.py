"""The environment Ray's processes and clients run with: the auth mode's variables, and NCCL's
from a node's RDMA devices."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def auth_env(mode: str, token_path: str) -> dict[str, str]:
    """The environment a Ray process or client needs for the cluster's auth mode.

    The controller's clients and the nodes' processes keep the token in different files;
    everything else about the environment is the same.
    """
    if mode == "token":
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path}
    return {"RAY_AUTH_MODE": "disabled"}


def nccl_env(
    debug: str,
    hcas: Iterable[str],
    roce_hcas: Iterable[str],
    roce_gid_index: int | str | None,
    hca_override: str = "",
    gid_index_override: str | int = "",
) -> dict[str, str]:
    """NCCL's variables for a node from its RDMA devices; the overrides win over detection.

    Without an HCA NCCL_IB_DISABLE=1 keeps NCCL from probing for one; with RoCE it needs a
    GID index that routes (its default, 0, does not on RoCE v2).
    """
    env = {"NCCL_DEBUG": debug}
    hca = hca_override or ",".join(hcas)
    if not hca:
        return {**env, "NCCL_IB_DISABLE": "1"}
    env["NCCL_IB_HCA"] = hca
    found = str(roce_gid_index) if list(roce_hcas) and roce_gid_index is not None else ""
    gid_index = str(gid_index_override) or found
    return {**env, "NCCL_IB_GID_INDEX": gid_index} if gid_index else env


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_nccl_env": nccl_env,
            "ray_auth_env": auth_env,
        }
