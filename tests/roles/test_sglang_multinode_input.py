"""A group that cannot form one server fails on the controller, naming the variable (issue 21).

The rules are plugins/module_utils/sglang_multinode.py (tested directly here), and the deploy play
runs them before any host is contacted: the inventory's hosts (mn21-x1, mn21-x2; indexes 224 and
225, never created) do not exist, so the play can only fail the way the test expects if the check
ran on the controller.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from roles_testlib import ROOT, run
from sglang_utils import sglang_multinode as mn

A, B = "mn21-x1", "mn21-x2"
GROUP = "mn21_xgroup"


def _settings(**over):
    base = {var: None for var, _ in mn.SAME_ON_EVERY_NODE}
    base.update(
        sglang_server_multinode_group=GROUP,
        sglang_server_multinode_head="",
        sglang_server_tp_size=16,
        sglang_server_gpus_per_node=8,
        sglang_server_dist_init_port=50000,
        sglang_server_engine="sglang",
    )
    base.update(over)
    return base


def test_rank_order_is_the_head_then_the_hosts_by_name():
    """Not Ansible's groups[G] order, which changes between runs for hosts from child groups."""
    assert mn.rank_order(["a", "b", "c"]) == ["a", "b", "c"]
    assert mn.rank_order(["c", "a", "b"]) == ["a", "b", "c"]
    assert mn.rank_order(["b", "a", "c"], "c") == ["c", "a", "b"]
    assert mn.rank_order(["a", "b", "c"], "zz") == ["a", "b", "c"]  # reported by group_errors
    assert mn.rank_order(["gpu-10", "gpu-2", "gpu-1"]) == ["gpu-1", "gpu-2", "gpu-10"]


def test_a_rank_that_never_ran_the_gate_has_not_passed_it():
    """Every inventory host is in hostvars: one that failed before the gate set no verdict."""
    hv = {A: {"__sglang_server_mn_rank_failure": "", "__sglang_server_mn_rank_tail": []}, B: {}}
    v = mn.group_verdict(GROUP, [A, B], hv)
    assert v["host"] == B and v["failure"].startswith(f"{B} did not report its gate")


def test_a_consistent_group_has_no_errors():
    assert mn.group_errors(GROUP, [A, B], "", {A: _settings(), B: _settings()}) == []
    # one value in two spellings is one value
    same = {A: _settings(sglang_server_max_running_requests=64), B: _settings(sglang_server_max_running_requests="64")}
    assert mn.group_errors(GROUP, [A, B], "", same) == []
    steps = {A: _settings(spec_steps=3), B: _settings(spec_steps="3")}  # -e gives a string
    assert mn.group_errors(GROUP, [A, B], "", steps) == []
    assert mn.group_errors("", [A], "", {}) == []


@pytest.mark.parametrize(
    ("a", "b", "head", "expected"),
    [
        ({}, {"sglang_server_gpus_per_node": 4}, "", "sglang_server_gpus_per_node differs across the hosts"),
        ({"sglang_server_tp_size": 15}, {"sglang_server_tp_size": 15}, "", "sglang_server_tp_size=15 is not divisible"),
        ({}, {}, "mn21-elsewhere", "sglang_server_multinode_head='mn21-elsewhere' is not a host of"),
        ({}, {"sglang_server_dist_init_port": 50001}, "", "sglang_server_dist_init_port differs"),
        # every rank's scheduler runs on rank 0's requests: other limits build other batches
        ({}, {"sglang_server_mem_fraction_static": 0.7}, "", "sglang_server_mem_fraction_static differs"),
        ({}, {"sglang_server_max_running_requests": 64}, "", "sglang_server_max_running_requests differs"),
        (
            {"sglang_server_extra_flags": {"attention-backend": "fa3"}},
            {"sglang_server_extra_flags": {"attention-backend": "fa3", "kv-cache-dtype": "fp8_e4m3"}},
            "",
            "sglang_server_extra_flags differs",
        ),
        (
            {"sglang_server_gpus_per_node": 4},
            {"sglang_server_gpus_per_node": 4},
            "",
            "sglang_server_gpus_per_node=4 x 2 nodes",
        ),
        # the ranks draft what rank 0 schedules: another depth or draft model hangs the group
        ({"spec_steps": 3}, {"spec_steps": 2}, "", "spec_steps differs across the hosts"),
        ({"spec_algorithm": "EAGLE3"}, {"spec_algorithm": "NEXTN"}, "", "spec_algorithm differs"),
        # what each host resolves an unset spec_steps / spec_algorithm to: its own default
        (
            {"sglang_server_spec_steps_default": 3},
            {"sglang_server_spec_steps_default": 5},
            "",
            "sglang_server_spec_steps_default differs",
        ),
        (
            {"sglang_server_spec_algorithm_default": "NEXTN"},
            {"sglang_server_spec_algorithm_default": "EAGLE"},
            "",
            "sglang_server_spec_algorithm_default differs",
        ),
        (
            {"sglang_server_spec_draft_model_path": "/m/a"},
            {"sglang_server_spec_draft_model_path": "/m/b"},
            "",
            "sglang_server_spec_draft_model_path differs",
        ),
    ],
)
def test_group_rules_name_the_variable(a, b, head, expected):
    errors = mn.group_errors(GROUP, [A, B], head, {A: _settings(**a), B: _settings(**b)})
    assert any(expected in e for e in errors), errors


def test_the_speculative_defaults_compare_as_the_flag_line_carries_them():
    """An INI group var is text and a YAML host var a number: 3 and "3", NEXTN and nextn are one."""
    a = _settings(sglang_server_spec_steps_default=3, sglang_server_spec_algorithm_default="NEXTN")
    b = _settings(sglang_server_spec_steps_default="3", sglang_server_spec_algorithm_default="nextn")
    assert mn.group_errors(GROUP, [A, B], "", {A: a, B: b}) == []


def test_member_settings_fall_back_to_this_hosts_values():
    own = _settings()
    got = mn.member_settings([A, B], {A: {"sglang_server_tp_size": 8}, B: {}}, own)
    assert got[A]["sglang_server_tp_size"] == 8 and got[B]["sglang_server_tp_size"] == 16


def test_group_verdict_names_the_first_failed_rank():
    hv = {
        A: {"__sglang_server_mn_rank_failure": "", "__sglang_server_mn_rank_tail": []},
        B: {"__sglang_server_mn_rank_failure": "unit died", "__sglang_server_mn_rank_tail": ["x"]},
    }
    v = mn.group_verdict(GROUP, [A, B], hv)
    assert v["failure"] == f"unit died (on {B}, node rank 1 of sglang_server_multinode_group='{GROUP}')"
    assert v["tail"] == ["x"] and v["host"] == B
    hv[B]["__sglang_server_mn_rank_failure"] = ""
    assert mn.group_verdict(GROUP, [A, B], hv)["failure"] == ""


def test_the_rollbacks_verdict_numbers_the_ranks_the_restored_units_run():
    """A run moved the head to B and failed; the rollback restored A as rank 0 (its restored unit's
    --node-rank 0) and gated the group in those ranks: a failure of A is rank 0's, not rank 1's."""
    hv = {
        A: {"__sglang_server_mn_rank_failure": "rank 0 did not come back", "__sglang_server_mn_restored_head": True},
        B: {"__sglang_server_mn_rank_failure": "", "__sglang_server_mn_restored_head": False},
    }
    moved = mn.rank_order([A, B], B)  # the run's new ranks: B first
    v = mn.group_verdict(GROUP, moved, hv, restored=True)
    assert v["failure"] == f"rank 0 did not come back (on {A}, node rank 0 of sglang_server_multinode_group='{GROUP}')"
    # the forward gate keeps the run's own ranks
    assert "node rank 1" in mn.group_verdict(GROUP, moved, hv)["failure"]


# ---- through the deploy play, on the controller ------------------------------------------------

CASES = {
    "gpus-disagree": (
        {B: {"sglang_server_gpus_per_node": 1}},
        {"sglang_server_tp_size": 4},
        "sglang_server_gpus_per_node differs across the hosts of sglang_server_multinode_group",
    ),
    "tp-not-divisible": ({}, {"sglang_server_tp_size": 3}, "sglang_server_tp_size=3 is not divisible by the 2 nodes"),
    # pipeline stages over the nodes: the role's default gpus_per_node reads the pp-size too
    "pp-not-divisible": (
        {},
        {"sglang_server_tp_size": 1, "sglang_server_extra_flags": {"pp-size": 3}},
        "sglang_server_tp_size=1 x pp-size 3 is not divisible by the 2 nodes",
    ),
    "head-not-in-group": (
        {},
        {"sglang_server_tp_size": 4, "sglang_server_multinode_head": "emu-other"},
        "sglang_server_multinode_head='emu-other' is not a host of sglang_server_multinode_group",
    ),
    # the output check is not wired into the group's gate: it was skipped and the group kept
    "verify-on-a-group": (
        {},
        {"sglang_server_tp_size": 4, "sglang_server_verify_outputs": True},
        "sglang_server_verify_outputs=true on sglang_server_multinode_group",
    ),
    # the ranks draft what rank 0 schedules
    "draft-disagree": (
        {
            A: {"sglang_server_spec_draft_model_path": "/models/draft"},
            B: {"sglang_server_spec_draft_model_path": "/models/other"},
        },
        {"sglang_server_tp_size": 4},
        "sglang_server_spec_draft_model_path differs across the hosts of sglang_server_multinode_group",
    ),
}


@pytest.fixture(scope="module")
def group_inventory(tmp_path_factory) -> Path:
    inv = yaml.safe_load((ROOT / "inventory" / "emulator.yml").read_text())
    hosts = inv["all"]["children"]["emulator_hosts"]
    hosts["hosts"] = {A: {"emulator_host_index": 224}, B: {"emulator_host_index": 225}}
    hosts["vars"]["sglang_server_multinode_group"] = GROUP
    inv["all"]["children"][GROUP] = {"hosts": {A: {}, B: {}}}
    path = tmp_path_factory.mktemp("inv") / "multinode-absent.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_group_fails_on_the_controller_naming_the_variable(group_inventory, tmp_path, case):
    # One playbook run per case, in the test itself: a module-scoped fixture running every case
    # ran them all again on each pytest-xdist worker that drew one of the module's tests.
    host_vars, extra, message = CASES[case]
    inv = yaml.safe_load(group_inventory.read_text())
    for h, hv in host_vars.items():
        inv["all"]["children"]["emulator_hosts"]["hosts"][h].update(hv)
    path = tmp_path / f"{case}.yml"
    path.write_text(yaml.safe_dump(inv))
    args = ["-e", yaml.safe_dump({"spec_steps": 3, **extra}, default_flow_style=True).strip()]
    proc = run([str(ROOT / ".venv/bin/ansible-playbook"), "deploy.yml", "-i", str(path), *args], timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert message in out, out[-3000:]
    assert "UNREACHABLE" not in out and "unreachable=0" in out and "changed=0" in out, out[-3000:]


def test_two_hosts_that_are_one_machine_are_not_a_group():
    hv = {A: {"ansible_host": "192.0.2.31"}, B: {"ansible_host": "192.0.2.31"}}
    [err] = mn.address_errors(GROUP, mn.member_addresses([A, B], hv))
    assert err.startswith(f"hosts {A}, {B} of sglang_server_multinode_group='{GROUP}' are one machine")
    assert mn.address_errors(GROUP, mn.member_addresses([A, B], {A: {"ansible_host": "192.0.2.31"}, B: {}})) == []
    # one SSH proxy (or Vagrant) address, a port per machine: two machines, not one
    ports = {
        A: {"ansible_host": "127.0.0.1", "ansible_port": 2222},
        B: {"ansible_host": "127.0.0.1", "ansible_port": 2200},
    }
    assert mn.address_errors(GROUP, mn.member_addresses([A, B], ports)) == []
    same = {
        A: {"ansible_host": "127.0.0.1", "ansible_port": 2222},
        B: {"ansible_host": "127.0.0.1", "ansible_port": "2222"},
    }
    assert len(mn.address_errors(GROUP, mn.member_addresses([A, B], same))) == 1
    default = {A: {"ansible_host": "10.0.0.5"}, B: {"ansible_host": "10.0.0.5", "ansible_port": 22}}  # 22: SSH's
    assert len(mn.address_errors(GROUP, mn.member_addresses([A, B], default))) == 1


def test_pipeline_stages_over_the_nodes():
    """SGLang needs (tp_size x pp_size) % nnodes == 0 and runs tp x pp ranks, one per GPU
    (server_args.py; engine.py `_calculate_rank_ranges`): TP 8 x PP 3 over 3 nodes of 8 GPUs and
    TP 8 x PP 2 over 2 nodes of 8 were refused (the TP size alone had to divide and fill the nodes)."""
    assert mn.pp_size({"pp-size": 3}) == 3 and mn.pp_size({"--pipeline-parallel-size": "2"}) == 2
    assert mn.pp_size({}) == 1 and mn.pp_size(None) == 1 and mn.pp_size({"pp-size": "x"}) == 1
    three = {"sglang_server_extra_flags": {"pp-size": 3}, "sglang_server_tp_size": 8, "sglang_server_gpus_per_node": 8}
    hosts = [A, B, "mn21-c"]
    assert mn.group_errors(GROUP, hosts, "", {h: _settings(**three) for h in hosts}) == []
    two = {"sglang_server_extra_flags": {"pp-size": 2}, "sglang_server_tp_size": 8, "sglang_server_gpus_per_node": 8}
    assert mn.group_errors(GROUP, [A, B], "", {A: _settings(**two), B: _settings(**two)}) == []
    short = {"sglang_server_extra_flags": {"pp-size": 2}, "sglang_server_tp_size": 8, "sglang_server_gpus_per_node": 4}
    [error] = mn.group_errors(GROUP, [A, B], "", {A: _settings(**short), B: _settings(**short)})
    assert "sglang_server_gpus_per_node=4 x 2 nodes" in error and "sglang_server_tp_size=8 x pp-size 2" in error
    odd = {"sglang_server_extra_flags": {"pp-size": 3}, "sglang_server_tp_size": 1, "sglang_server_gpus_per_node": 1}
    [error] = mn.group_errors(GROUP, [A, B], "", {A: _settings(**odd), B: _settings(**odd)})
    assert "sglang_server_tp_size=1 x pp-size 3 is not divisible by the 2 nodes" in error


def test_a_rank_whose_gate_module_failed_without_a_reason_has_not_passed(tmp_path):
    """tasks/multinode_gate.yml runs the gate with failed_when: false and reads each rank's result:
    a result the module failed without a `failure_kind` (its options refused, a crash) or with one
    is a failed rank, a result with `ready_seconds` a passed one, a skipped gate (check mode on a
    stopped group) nothing. The role's own task, run through ansible-playbook on hand-made results."""
    import subprocess

    import yaml
    from roles_testlib import ROOT, VENV_BIN

    tasks = yaml.safe_load((ROOT / "roles/sglang_server/tasks/multinode_gate.yml").read_text())
    say = next(t for t in tasks if t["name"] == "Say how this rank did")
    skipped = {"skipped": True, "changed": False}
    cases = {
        "refused": ({"msg": "interval must be > 0, got 0.0", "changed": False}, skipped),
        "gate-said": ({"msg": "the unit died", "failure_kind": "unit_dead"}, skipped),
        "passed": ({"ready_seconds": 1.2, "invocation_id": "a"}, skipped),
        "worker-recheck-refused": ({"ready_seconds": 1.2, "invocation_id": "a"}, {"msg": "boom"}),
        "check-mode-skipped": (skipped, skipped),
    }
    inv = {
        "all": {
            "hosts": {
                name: {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                    "__sglang_server_gate": g,
                    "__sglang_server_gate_recheck": r,
                }
                for name, (g, r) in cases.items()
            }
        }
    }
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(inv))
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                say,
                {
                    "ansible.builtin.debug": {
                        "msg": "RANK {{ inventory_hostname }} |{{ __sglang_server_mn_rank_failure }}|"
                    }
                },
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    out = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(tmp_path / "inv.yml"), str(tmp_path / "play.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    ).stdout
    got = dict(re.findall(r"RANK (\S+) \|(.*?)\|", out))
    assert got == {
        "refused": "interval must be > 0, got 0.0",
        "gate-said": "the unit died",
        "passed": "",
        "worker-recheck-refused": "boom",
        "check-mode-skipped": "",
    }, out[-3000:]


def test_a_host_of_the_group_that_does_not_name_it_is_refused():
    """The group set on the head only (host_vars): the other host's missing value was read as the
    head's own, so the check passed; that host, with the role's default "", deployed a server of its
    own while the head waited for it as rank 1 until the dist timeout."""
    # hostvars as Ansible gives them (B sets nothing; role defaults are not in hostvars), read on A
    settings = mn.member_settings([A, B], {A: _settings(), B: {}}, own=_settings())
    errors = mn.group_errors(GROUP, [A, B], "", settings)
    assert any(e.startswith("sglang_server_multinode_group differs") for e in errors), errors
    # every other variable a host leaves unset is this host's, as before (the role default on both)
    assert settings[B]["sglang_server_tp_size"] == 16


def _gpus(*mib: int) -> list[dict]:
    return [{"index": i, "name": f"GPU-{m}", "memory_mib": m} for i, m in enumerate(mib)]


def _one(gpus: list[dict]) -> list[tuple[str, list[dict]]]:
    """A single host's GPUs, as the filter hands them over."""
    return [("h1", gpus)]


def test_a_world_of_unequal_gpu_memory_is_refused_as_sglang_refuses_it():
    """SGLang refuses a world (tp x pp ranks, tp above 1) where one GPU's free memory is below 0.9
    times another's (model_runner.py init_torch_distributed, 0.5.9-0.5.23), after the host changed.
    Its worlds are placed from --base-gpu-id and one per data-parallel replica: GPUs no world
    shares are never compared."""
    mixed = _gpus(97887, 97887, 48938, 48938)
    [error] = mn.tp_memory_errors(_one(mixed), {}, 4)
    assert error.startswith("the GPUs of one tensor-parallel world differ in memory (0: GPU-97887 97887 MiB, ")
    assert "3: GPU-48938 48938 MiB" in error and "The memory capacity is unbalanced" in error
    assert "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false in sglang_server_environment" in error
    assert mn.tp_memory_errors(_one(mixed), {}, 2) == []  # GPUs 0 and 1
    assert mn.tp_memory_errors(_one(mixed), {"base-gpu-id": 2}, 2) == []  # GPUs 2 and 3
    assert mn.tp_memory_errors(_one(mixed), {"dp-size": 2}, 2) == []  # {0, 1} and {2, 3}, each of one size
    assert len(mn.tp_memory_errors(_one(mixed), {"gpu-id-step": 2}, 2)) == 1  # GPUs 0 and 2: 97887 and 48938 MiB
    assert mn.gpu_worlds({"gpu-id-step": 2}, 2) == [[0, 2]]
    assert mn.gpu_worlds({"dp-size": 2, "base-gpu-id": 1}, 2) == [[1, 2], [3, 4]]
    assert mn.gpu_worlds({"pp-size": 2}, 4, 2) == [[0, 1, 2, 3]]
    assert mn.tp_memory_errors(_one(_gpus(143771, 143771, int(143771 * 0.91))), {}, 3) == []  # within 10%
    assert mn.tp_memory_errors(_one(mixed), {"pp-size": 4}, 1) == []  # tp 1: SGLang checks nothing
    assert mn.tp_memory_errors(_one(mixed[:2]), {}, 4) == []  # too few GPUs: cuda_env's preflight refuses it


def test_a_multi_node_world_is_compared_over_every_node():
    """SGLang takes the minimum free memory over the whole world group, every node's ranks
    (model_runner.py: `distributed=get_world_group().world_size > 1`): H100s on one node and H200s
    on the other are refused, though each node's GPUs are alike; a node whose facts were not read
    is not compared."""
    h100, h200 = _gpus(81559, 81559, 81559, 81559), _gpus(143771, 143771, 143771, 143771)
    [error] = mn.tp_memory_errors([("gpu-a", h100), ("gpu-b", h200)], {}, 8, 2)
    assert "(gpu-a 0: GPU-81559 81559 MiB, " in error and "gpu-b 3: GPU-143771 143771 MiB)" in error
    assert len(mn.tp_memory_errors([("gpu-a", h100), ("gpu-b", h200)], {"pp-size": 2}, 4, 2)) == 1
    assert mn.tp_memory_errors([("gpu-a", h100), ("gpu-b", h100)], {}, 8, 2) == []
    assert mn.tp_memory_errors([("gpu-a", h100), ("gpu-b", None)], {}, 8, 2) == []
    hostvars = {"gpu-a": {"cuda_env_visible_gpus": h100}, "gpu-b": {}}
    assert mn.node_gpus(["gpu-a", "gpu-b", "gpu-c"], hostvars) == [("gpu-a", h100), ("gpu-b", None), ("gpu-c", None)]


def test_the_memory_balance_check_is_off_only_where_every_release_reads_it_off():
    """srt/environ.py's EnvBool reads false, 0, no, n (lower-cased) as off; 0.5.9 copies the old
    SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK, when set, over the new name ("1" then turns it on), and
    0.5.23 reads the old name nowhere."""
    mixed = _gpus(97887, 48938)
    for off in ("false", "False", "0", "no", "n"):
        assert mn.tp_memory_errors(_one(mixed), {}, 2, 1, {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": off}) == [], off
    for on in ("off", "true", "1", " false"):
        assert mn.tp_memory_errors(_one(mixed), {}, 2, 1, {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": on}), on
    assert mn.tp_memory_errors(_one(mixed), {}, 2, 1, {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"})
    both = {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1", "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "false"}
    assert mn.tp_memory_errors(_one(mixed), {}, 2, 1, both)


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        ({"dp-size": 2}, True),  # replicas of TP 16 over the two nodes
        ({"dp": "2"}, True),  # argparse's unique prefix, as SGLang's docs write it
        ({"data-parallel-size": 2, "enable-dp-attention": False}, True),
        ({"dp-size": 2, "enable-dp-attention": True}, False),  # DP attention: ranks inside the TP group
        ({"dp-size": 2, "attn-dp-size": 2}, True),  # 0.5.23: --dp-size still counts replicas
        ({"dp-size": 2, "attn-dp-size": 2, "enable-dp-attention": True}, True),  # the deprecated form yields to it
        ({"attn-dp-size": 4}, False),
        ({"dp-size": 1}, False),
        ({"dp-size": [2]}, True),  # a list, written as its last item (`--dp-size 2`)
        ({"dp-size": [4, 1]}, False),
        ({"dp-size": 2, "enable-dp-attention": True, "attn-dp-size": [2]}, True),
        ({"dp-size": 2, "enable-dp-attention": True, "attention-data-parallel-size": 2}, True),  # 0.5.23's alias
    ],
)
def test_data_parallel_replicas_across_nodes_are_refused_as_sglang_refuses_them(flags, refused):
    """SGLang asserts `not (dp_size > 1 and nnodes != 1 and not enable_dp_attention)` (server_args.py
    0.4.10-0.5.16, arg_groups/validation_hook.py 0.5.20-0.5.21) and, on 0.5.23, `not (dp_size > 1 and
    nnodes != 1)` after the deprecated `--dp-size N --enable-dp-attention` became `--attn-dp-size N`
    (only where no --attn-dp-size is given): TP 16 with `dp-size: 2` over two nodes passed the play's
    checks and every rank died at start on that assertion."""
    one = {"sglang_server_extra_flags": flags, "sglang_server_tp_size": 16, "sglang_server_gpus_per_node": 8}
    errors = mn.group_errors(GROUP, [A, B], "", {A: _settings(**one), B: _settings(**one)})
    if refused:
        [error] = errors  # not also counted as GPUs the nodes lack
        assert "dp-size 2 across the 2 nodes of sglang_server_multinode_group=" in error, error
        assert "multi-node data parallel is not supported unless dp attention!" in error
    else:
        assert errors == []


def test_the_gpus_a_node_needs_count_data_parallel_replicas_and_their_placement():
    """SGLang gives each data-parallel replica the next tp x pp GPUs (data_parallel_controller.py
    launch_dp_schedulers, 0.5.9-0.5.23) unless DP attention keeps the DP ranks inside the TP group,
    and places ranks from --base-gpu-id every --gpu-id-step GPUs: TP 4 with `dp-size: 2` passed the
    GPU check on a 4-GPU host, where the second replica has no GPU to start on."""
    assert mn.gpus_per_node({}, 4) == 4 and mn.gpus_per_node({"pp-size": 2}, 8, 2) == 8
    assert mn.gpus_per_node({"dp-size": 2}, 4) == 8 and mn.gpus_per_node({"dp": "2"}, 4) == 8
    assert mn.gpus_per_node({"data-parallel-size": 2}, 2) == 4
    assert mn.gpus_per_node({"dp-size": 8, "enable-dp-attention": True}, 8) == 8
    assert mn.gpus_per_node({"dp-size": 2, "attn-dp-size": 2}, 4) == 4
    assert mn.gpus_per_node({"base-gpu-id": 4}, 4) == 8
    assert mn.gpus_per_node({"gpu-id-step": 2}, 4) == 7
    assert mn.gpus_per_node({"base-gpu-id": "x", "dp-size": True}, 4) == 4  # unreadable values: as SGLang's default
    # a multi-node group with a base GPU id: the group check holds gpus_per_node to the same rule
    placed = {
        "sglang_server_extra_flags": {"base-gpu-id": 2},
        "sglang_server_tp_size": 4,
        "sglang_server_gpus_per_node": 2,
    }
    [error] = mn.group_errors(GROUP, [A, B], "", {A: _settings(**placed), B: _settings(**placed)})
    assert "sglang_server_gpus_per_node=2 x 2 nodes" in error and "4 per node" in error, error
    placed["sglang_server_gpus_per_node"] = 4  # GPUs 2 and 3 on each node: four to have
    assert mn.group_errors(GROUP, [A, B], "", {A: _settings(**placed), B: _settings(**placed)}) == []
    placed["sglang_server_gpus_per_node"] = 4
    placed["sglang_server_extra_flags"] = {}
    assert mn.group_errors(GROUP, [A, B], "", {A: _settings(**placed), B: _settings(**placed)})
    placed["sglang_server_gpus_per_node"] = 2
    assert mn.group_errors(GROUP, [A, B], "", {A: _settings(**placed), B: _settings(**placed)}) == []


def test_rank_0s_port_check_reads_its_address_and_its_port():
    """roles/sglang_server/files/port_free.py, which the preflight runs on rank 0's host: SGLang
    binds its cross-node queue to rank 0's SGLANG_HOST_IP, so an address no interface has (a
    cloud's NAT or floating IP) failed the start after every host had changed."""
    import os
    import socket
    import subprocess
    import sys

    script = ROOT / "roles/sglang_server/files/port_free.py"

    def check(port: int, *host_ip: str) -> str:
        out = subprocess.run([sys.executable, str(script), str(port), "x.service", *host_ip], capture_output=True)
        return out.stdout.decode().strip()

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    try:
        # the holder named where /proc shows it (this test's process, in no unit here)
        assert check(port) == f"in use: address already in use (pid {os.getpid()})"
        assert check(port, "203.0.113.77").startswith("not local: ")  # TEST-NET-3: on no interface
        assert check(port, "fe80::1").startswith("not local: ")  # link-local, no scope: not bindable
        assert check(port, "127.0.0.1").startswith("in use: ")
    finally:
        held.close()
    assert check(port, "127.0.0.1") == "free" and check(port) == "free"
