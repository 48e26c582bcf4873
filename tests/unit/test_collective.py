"""The collective check's pure parts: which groups run on which backend, how failures are
explained."""

from __future__ import annotations

from typing import Any

import pytest

from ray_debug_tools.collective import addresses, argument_parser, likely_cause, parse_env, row
from ray_debug_tools.collective_job import asks_gpu, choose_backend, groups_to_check, no_free_gpu

NAMES = {"10.0.0.11": "w1", "10.0.0.12": "w2"}
W1, W2 = "10.0.0.11", "10.0.0.12"


def member(ip: str, ray_gpus: float, cuda: bool, **facts: Any) -> dict[str, Any]:
    """A rank's describe() answer: CPU torch on a node without CUDA unless told otherwise."""
    described = {
        "ip": ip,
        "port": 29500,
        "cuda": cuda,
        "torch": "2.13.0+cu128" if cuda else "2.13.0+cpu",
        "torch_cuda": "12.8" if cuda else None,
        "cuda_visible_devices": "0" if ray_gpus else "",
        "ray_gpus": ray_gpus,
        "env": {},
    }
    return described | facts


def test_every_pair_then_all_nodes() -> None:
    assert groups_to_check(["a"], {}, "auto") == [["a"]]
    assert groups_to_check(["a", "b"], {}, "auto") == [["a", "b"]]
    assert groups_to_check(["a", "b", "c"], {}, "auto") == [
        ["a", "b"], ["a", "c"], ["b", "c"], ["a", "b", "c"]
    ]  # fmt: skip


def test_ring_neighbours_past_eight_nodes() -> None:
    ips = [f"n{i}" for i in range(10)]
    groups = groups_to_check(ips, dict.fromkeys(ips, 8), "auto")
    assert len(groups) == 11
    assert groups[0] == ["n0", "n1"] and groups[9] == ["n9", "n0"] and groups[-1] == ips


def test_a_lone_node_with_two_gpus_runs_two_ranks_on_it() -> None:
    assert groups_to_check(["a"], {"a": 2}, "auto") == [["a", "a"]]
    assert groups_to_check(["a"], {"a": 8}, "auto") == [["a", "a"]]


def test_a_lone_node_with_one_gpu_or_none_runs_one_rank() -> None:
    assert groups_to_check(["a"], {"a": 1}, "auto") == [["a"]]
    assert groups_to_check(["a"], {"a": 0}, "auto") == [["a"]]


def test_forced_gloo_leaves_a_lone_nodes_gpus_alone() -> None:
    assert groups_to_check(["a"], {"a": 2}, "gloo") == [["a"]]
    assert not asks_gpu("a", {"a": 2}, "gloo")


def test_ranks_ask_for_a_gpu_only_on_gpu_nodes() -> None:
    gpus = {W1: 0, W2: 2}
    assert asks_gpu(W2, gpus, "auto")
    assert not asks_gpu(W1, gpus, "auto")
    assert not asks_gpu("10.0.0.99", gpus, "auto")


def test_nccl_when_every_rank_sees_cuda() -> None:
    members = [member(W1, 8, cuda=True), member(W2, 8, cuda=True)]
    assert choose_backend(members, "auto", [], NAMES) == {"backend": "nccl", "note": ""}


def test_forced_gloo_says_so_even_where_cuda_is_seen() -> None:
    members = [member(W1, 8, cuda=True), member(W2, 8, cuda=True)]
    assert choose_backend(members, "gloo", [], NAMES) == {
        "backend": "gloo", "note": "asked for Gloo"
    }  # fmt: skip


def test_stand_in_gpus_run_gloo_with_a_note() -> None:
    members = [member(W1, 0, cuda=False), member(W2, 2, cuda=False)]
    choice = choose_backend(members, "auto", [W2], NAMES)
    assert choice == {
        "backend": "gloo",
        "note": "stand-in GPUs on w2: no CUDA, NCCL not checked; no GPU on w1",
    }


def test_a_lone_stand_in_nodes_two_ranks_are_named_once() -> None:
    members = [member(W2, 2, cuda=False), member(W2, 2, cuda=False, cuda_visible_devices="1")]
    assert choose_backend(members, "auto", [W2], NAMES) == {
        "backend": "gloo", "note": "stand-in GPUs on w2: no CUDA, NCCL not checked"
    }  # fmt: skip


def test_an_unmarked_gpu_node_without_cuda_fails_the_group() -> None:
    members = [member(W1, 0, cuda=False), member(W2, 2, cuda=False)]
    choice = choose_backend(members, "auto", [], NAMES)
    assert choice == {
        "backend": "gloo",
        "error": "w2 offers 2 GPUs to Ray but torch 2.13.0+cpu there sees no CUDA (built for "
        "CUDA none, CUDA_VISIBLE_DEVICES=0): verl's ranks would fall back to Gloo",
    }


def test_a_cuda_build_that_sees_no_gpu_names_its_cuda_and_devices() -> None:
    members = [
        member(W1, 4, cuda=True),
        member(W2, 4, cuda=False, torch="2.13.0+cu128", torch_cuda="12.8",
               cuda_visible_devices=None),
    ]  # fmt: skip
    error = choose_backend(members, "auto", [W1], NAMES)["error"]
    assert error.startswith("w2 offers 4 GPUs to Ray but torch 2.13.0+cu128 there sees no CUDA")
    assert "(built for CUDA 12.8, CUDA_VISIBLE_DEVICES=unset)" in error


def test_a_gpu_less_node_alone_needs_no_note() -> None:
    members = [member(W1, 0, cuda=False), member(W2, 0, cuda=False)]
    assert choose_backend(members, "auto", [], NAMES) == {"backend": "gloo", "note": ""}


def test_a_gpu_less_node_beside_cuda_ones_is_noted() -> None:
    members = [member(W1, 0, cuda=False), member(W2, 2, cuda=True)]
    assert choose_backend(members, "auto", [], NAMES) == {
        "backend": "gloo", "note": "no GPU on w1"
    }  # fmt: skip


def test_gpus_held_elsewhere_say_another_job_holds_them() -> None:
    assert no_free_gpu("w2", 60) == "no free GPU on w2 within 60 s: another job holds its GPUs"


def test_missing_interface_names_the_variable_the_nodes_and_the_fix() -> None:
    result = {
        "nodes": [W1, W2],
        "backend": "gloo",
        "env": {
            W1: {"GLOO_SOCKET_IFNAME": "eth0"},
            W2: {"GLOO_SOCKET_IFNAME": "eth9"},
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
    result = {"nodes": [W1, W2], "backend": "nccl",
              "error": "timed out: the group did not form within 60 s"}  # fmt: skip
    cause = likely_cause(result, NAMES, 60)
    assert "did not form within 60 s" in cause
    assert "NCCL_SOCKET_IFNAME" in cause and "firewall" in cause


@pytest.mark.parametrize(
    "error",
    [
        "w2 offers 2 GPUs to Ray but torch 2.13.0+cpu there sees no CUDA (built for CUDA none, "
        "CUDA_VISIBLE_DEVICES=0): verl's ranks would fall back to Gloo",
        "no free GPU on w2 within 60 s: another job holds its GPUs",
    ],
)
def test_gpu_causes_pass_through_unchanged(error: str) -> None:
    result = {"nodes": [W1, W2], "backend": "gloo", "error": error}
    assert likely_cause(result, NAMES, 60) == f"w1 <-> w2: {error}"


def test_rows_show_time_and_bus_bandwidth() -> None:
    ok = {"nodes": [W1, W2], "backend": "gloo", "note": "", "seconds": 0.0123,
          "busbw_gbps": 1.5}  # fmt: skip
    assert row(ok, NAMES) == ("w1 <-> w2", "gloo", "ok", "12.3 ms", "1.50 GB/s")
    assert row({"nodes": [W1], "error": "x"}, NAMES) == ("w1", "-", "FAILED", "-", "-")


def test_rows_carry_the_backends_note() -> None:
    note = "stand-in GPUs on w2: no CUDA, NCCL not checked"
    ok = {"nodes": [W1, W2], "backend": "gloo", "note": note, "seconds": 0.002,
          "busbw_gbps": 0.5}  # fmt: skip
    assert row(ok, NAMES)[:3] == ("w1 <-> w2", f"gloo ({note})", "ok")
    failed = {"nodes": [W1, W2], "backend": "gloo", "error": "w2 offers 2 GPUs"}
    assert row(failed, NAMES)[:3] == ("w1 <-> w2", "gloo", "FAILED")


def test_a_lone_nodes_two_ranks_read_as_the_node_twice() -> None:
    ok = {"nodes": [W2, W2], "backend": "nccl", "note": "", "seconds": 0.001,
          "busbw_gbps": 120.0}  # fmt: skip
    assert row(ok, NAMES) == ("w2 <-> w2", "nccl", "ok", "1.0 ms", "120.00 GB/s")


def test_env_overrides_by_node_name_or_address() -> None:
    assert parse_env(["w2:GLOO_SOCKET_IFNAME=eth9", "10.0.0.11:NCCL_DEBUG=INFO"], NAMES) == {
        W2: {"GLOO_SOCKET_IFNAME": "eth9"},
        W1: {"NCCL_DEBUG": "INFO"},
    }


def test_stand_ins_by_node_name_or_address() -> None:
    assert addresses(["w2", "10.0.0.11"], NAMES) == [W2, W1]


def test_options_after_the_node_list_parse() -> None:
    """The role puts --backend and --stand-in after --nodes, whose list takes every word."""
    args = argument_parser().parse_args(
        ["--head", "10.0.0.1", "--runtime-env", "r.yaml", "--nodes", "w1=10.0.0.11",
         "w2=10.0.0.12", "--timeout", "60", "--backend", "gloo", "--stand-in=w2",
         "--stand-in", "10.0.0.11"]
    )  # fmt: skip
    assert args.nodes == ["w1=10.0.0.11", "w2=10.0.0.12"]
    assert args.backend == "gloo"
    assert args.stand_in == ["w2", "10.0.0.11"]


def test_backend_defaults_to_auto_and_refuses_others() -> None:
    common = ["--head", "h", "--runtime-env", "r.yaml", "--nodes", "w1=10.0.0.11"]
    assert argument_parser().parse_args(common).backend == "auto"
    with pytest.raises(SystemExit):
        argument_parser().parse_args([*common, "--backend", "nccl"])
