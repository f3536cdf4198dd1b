"""The plan holds a configuration to what the role refuses for the hosts' other settings
(tuner/spec/refusals.py, plugins/module_utils/sglang_flags.py `spec_host_errors`): LoRA beside
speculation, UNO's needs, an algorithm the release lacks, a schedule SGLang would run static. The
tuner planned and deployed those, and every deployment failed in the play's preflight, one after
another; now they are set aside in the play's words, and a sweep left with nothing stops before any
host changes, naming what to change."""

from __future__ import annotations

import json

import pytest
import yaml
from tuner_testlib import ROOT

from tuner import cli
from tuner.run.inventory import Inventory
from tuner.spec.configs import ConfigPlan, SpecConfig
from tuner.spec.refusals import NODE_VARS, role_defaults

LORA = {"sglang_server_extra_flags": {"lora-paths": "chat=/models/lora-chat"}}
LORA_WORDS = "sglang_server_extra_flags' LoRA adapter with spec_algorithm=NEXTN: SGLang 0.5.9 refuses it at start"
TBO = {"sglang_server_sglang_version": "0.5.23", "sglang_server_extra_flags": {"enable-two-batch-overlap": True}}


def write_inventory(tmp_path, hosts: dict, groups: dict | None = None):
    inv = tmp_path / "inv.yml"
    servers = {"hosts": hosts, "vars": {"ansible_connection": "local"}}
    if groups:
        servers["children"] = {g: {"hosts": dict.fromkeys(members)} for g, members in groups.items()}
    inv.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": servers}}}))
    return inv


def run_cli(tmp_path, capsys, inv, *flags: str) -> tuple[int, str, str]:
    rc = cli.main(["sweep", "--out", str(tmp_path / "o"), "--inventory", str(inv), "--search", "grid", *flags])
    got = capsys.readouterr()
    return rc, got.out, got.err


@pytest.mark.parametrize(
    ("hosts", "extra", "set_aside"),
    [
        ({"gpu1": LORA}, [], True),
        # -e wins over the inventory, as in the play
        ({"gpu1": LORA}, ["-e", json.dumps({"sglang_server_extra_flags": {}})], False),
        ({"gpu1": {}}, ["-e", json.dumps(LORA)], True),
        # a release that runs LoRA with the EAGLE family
        ({"gpu1": {**LORA, "sglang_server_sglang_version": "0.5.19"}}, [], False),
        # another host may run it: the plan keeps it (the play judges each host)
        ({"gpu1": LORA, "gpu2": {}}, [], False),
        # a template is the play's to render: not judged
        ({"gpu1": {**LORA, "sglang_server_sglang_version": "{{ sglang_release }}"}}, [], False),
        ({"gpu1": {"sglang_server_extra_flags": {"lora-paths": "{{ adapter }}"}}}, [], False),
    ],
    ids=["inventory", "cleared-by-e", "given-by-e", "later-release", "one-host-of-two", "templated", "templated-flags"],
)
def test_a_configuration_every_hosts_role_refuses_is_set_aside_in_its_words(
    tmp_path, capsys, no_hosts, hosts, extra, set_aside
):
    """A LoRA adapter beside NEXTN on SGLang 0.5.9 (the role's default release): the plan deployed
    k1 and k2, and each play stopped at its preflight ('Currently LoRA is only compatible with NGRAM
    speculative decoding.'); no speculation (k0) still runs."""
    rc, out, err = run_cli(tmp_path, capsys, write_inventory(tmp_path, hosts), "--steps", "0-2", "--dry-run", *extra)
    assert rc == 0, err
    assert "deploy k0: " in out
    if set_aside:
        assert f"skip k1-t1: {LORA_WORDS}" in out and "skip k2-t1: " in out, out
        assert "deploy k1-t1" not in out
    else:
        assert "deploy k1-t1: " in out and "deploy k2-t1: " in out and "skip k" not in out, out
    # kept off the one host of two that refuses it, and the dry run says so (it said nothing)
    assert (f"  not on gpu1: {LORA_WORDS}" in out) == (hosts == {"gpu1": LORA, "gpu2": {}}), out
    assert "not on gpu2" not in out and "  not on gpu1: " not in out.split("deploy k1-t1")[0], out


@pytest.mark.parametrize(
    ("hosts", "groups", "flags", "flag", "words"),
    [
        ({"gpu1": LORA}, None, [], "--inventory", [LORA_WORDS, "spec_algorithm=NGRAM"]),
        ({"gpu1": {}}, None, ["-e", json.dumps(LORA)], "-e/--extra-vars", [LORA_WORDS]),
        # a multi-node group is one server: its worker's adapter refuses the group's play
        (
            {"n1": {"sglang_server_multinode_group": "pair"}, "n2": {"sglang_server_multinode_group": "pair", **LORA}},
            {"pair": ["n1", "n2"]},
            [],
            "--inventory",
            [LORA_WORDS],
        ),
        (
            {"gpu1": {"sglang_server_sglang_version": "0.5.23", "sglang_server_tp_size": 2}},
            None,
            ["--algorithm", "UNO", "--draft-tokens", "3"],
            "--algorithm",
            ["spec_algorithm=UNO needs its LoRA adapter", "UNO requires TP=PP=1."],
        ),
        # k2 is DSPARK's own refusal (one step), k1 the release's: the release is what to change
        ({"gpu1": {}}, None, ["--algorithm", "DSPARK"], "--algorithm", ["is not an algorithm of SGLang 0.5.9"]),
    ],
    ids=["lora-inventory", "lora-e", "lora-on-a-worker", "uno", "release"],
)
def test_a_sweep_with_nothing_left_stops_before_any_host_changes(
    tmp_path, capsys, no_hosts, hosts, groups, flags, flag, words
):
    """Every configuration refused on every host: the sweep (not only its dry run) exits 2 with the
    role's message and the flag or variable to change, and nothing is deployed or written."""
    inv = write_inventory(tmp_path, hosts, groups)
    rc, _, err = run_cli(tmp_path, capsys, inv, "--steps", "1" if "UNO" in flags else "1-2", *flags)
    assert rc == 2, err
    assert f"error: {flag}: no configuration SGLang can run: k1-t1" in err, err
    for w in words:
        assert w in err, err
    assert not (tmp_path / "o" / "sweep.json").exists()


def test_the_dry_run_says_the_schedule_phase_is_off_where_the_role_refuses_a_schedule(tmp_path, capsys, no_hosts):
    """Two-batch overlap on 0.5.23: SGLang would run any schedule static, so the role refuses it; the
    dry run promised the schedule phase's deployments."""
    rc, out, err = run_cli(tmp_path, capsys, write_inventory(tmp_path, {"gpu1": TBO}), "--steps", "1-2", "--dry-run")
    assert rc == 0, err
    assert "deploy k1-t1: " in out  # a static depth runs beside two-batch overlap
    assert "schedule: off (the role refuses an adaptive deployment on every host: spec_schedule with " in out, out
    assert "enable-two-batch-overlap: SGLang runs the server static instead" in out
    rc, out, err = run_cli(tmp_path, capsys, write_inventory(tmp_path, {"gpu1": TBO, "gpu2": {}}), "--dry-run")
    assert rc == 0 and "schedule: after the static depths" in out, out + err


def test_a_play_of_the_users_own_is_not_held_to_the_roles_refusals(tmp_path, capsys, no_hosts):
    """Only the project's play runs the role with the inventory's variables as they stand: a
    --playbook of the user's own may set them itself (or not run the role), so its plan is whole."""
    own = tmp_path / "own.yml"
    own.write_text("- hosts: sglang_servers\n  gather_facts: false\n  tasks: []\n")
    inv = write_inventory(tmp_path, {"gpu1": LORA})
    rc, out, err = run_cli(tmp_path, capsys, inv, "--steps", "1-2", "--dry-run", "--playbook", str(own))
    assert rc == 0 and "deploy k1-t1: " in out and "skip k" not in out, out + err


def test_the_role_defaults_stand_where_a_host_sets_nothing():
    """A host without the variables is judged by roles/sglang_server/defaults/main.yml (the sglang
    engine, 0.5.9, TP 1); a value neither sets leaves the node to the play."""
    defaults = role_defaults(ROOT)
    assert defaults["sglang_server_sglang_version"] == "0.5.9" and defaults["sglang_server_engine"] == "sglang"
    inv = Inventory(hosts=["a"], hostvars={"a": LORA}, groups={}, has_group=True)
    plan = ConfigPlan(nodes=inv.slot_nodes(NODE_VARS, {}, defaults))
    assert plan.refusal(SpecConfig(2)) is not None and plan.refusal(SpecConfig(0)) is None
    assert plan.refusal(SpecConfig(2, spec_algorithm="NGRAM")) is None  # what 0.5.9 runs LoRA with
    emulated = Inventory(hosts=["a"], hostvars={"a": {**LORA, "sglang_server_engine": "emulator"}}, groups={})
    assert ConfigPlan(nodes=emulated.slot_nodes(NODE_VARS, {}, defaults)).refusal(SpecConfig(2)) is None
    assert inv.slot_nodes(NODE_VARS, {}, {}) == [[None]]
