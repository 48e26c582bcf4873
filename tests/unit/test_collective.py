"""The collective check's pure parts: which groups run, how failures are explained."""

from __future__ import annotations

from ray_debug_tools.collective import likely_cause, parse_env, row
from ray_debug_tools.collective_job import groups_to_check

NAMES = {"10.0.0.11": "w1", "10.0.0.12": "w2"}


def test_every_pair_then_all_nodes() -> None:
    assert groups_to_check(["a"]) == [["a"]]
    assert groups_to_check(["a", "b"]) == [["a", "b"]]
    assert groups_to_check(["a", "b", "c"]) == [["a", "b"], ["a", "c"], ["b", "c"], ["a", "b", "c"]]


def test_ring_neighbours_past_eight_nodes() -> None:
    ips = [f"n{i}" for i in range(10)]
    groups = groups_to_check(ips)
    assert len(groups) == 11
    assert groups[0] == ["n0", "n1"] and groups[9] == ["n9", "n0"] and groups[-1] == ips


def test_missing_interface_names_the_variable_the_nodes_and_the_fix() -> None:
    result = {
        "nodes": ["10.0.0.11", "10.0.0.12"],
        "backend": "gloo",
        "env": {
            "10.0.0.11": {"GLOO_SOCKET_IFNAME": "eth0"},
            "10.0.0.12": {"GLOO_SOCKET_IFNAME": "eth9"},
        },
        # torch 2.13's Gloo, word for word.
        "error": "RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/"
        "transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9",
    }
    cause = likely_cause(result, NAMES, 60)
    assert cause.startswith("w1 <-> w2: GLOO_SOCKET_IFNAME names an interface")
    assert "(w1: eth0, w2: eth9)" in cause
    assert "set ray_socket_ifname for that host" in cause


def test_a_group_that_never_forms_points_at_firewall_and_nic() -> None:
    result = {"nodes": ["10.0.0.11", "10.0.0.12"], "backend": "nccl",
              "error": "timed out: the group did not form within 60 s"}  # fmt: skip
    cause = likely_cause(result, NAMES, 60)
    assert "did not form within 60 s" in cause
    assert "NCCL_SOCKET_IFNAME" in cause and "firewall" in cause


def test_rows_show_time_and_bus_bandwidth() -> None:
    ok = {"nodes": ["10.0.0.11", "10.0.0.12"], "backend": "gloo", "seconds": 0.0123,
          "busbw_gbps": 1.5}  # fmt: skip
    assert row(ok, NAMES) == ("w1 <-> w2", "gloo", "ok", "12.3 ms", "1.50 GB/s")
    assert row({"nodes": ["10.0.0.11"], "error": "x"}, NAMES)[2] == "FAILED"


def test_env_overrides_by_node_name_or_address() -> None:
    assert parse_env(["w2:GLOO_SOCKET_IFNAME=eth9", "10.0.0.11:NCCL_DEBUG=INFO"], NAMES) == {
        "10.0.0.12": {"GLOO_SOCKET_IFNAME": "eth9"},
        "10.0.0.11": {"NCCL_DEBUG": "INFO"},
    }
