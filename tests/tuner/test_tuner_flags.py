"""Flag parsing and validation (tuner/spec/flags.py, tuner/spec/configs.py): every refusal names its flag."""

from __future__ import annotations

import os

import pytest

from tuner.spec.configs import SpecConfig, plan_configs
from tuner.spec.flags import (
    BadInput,
    check_out_dir,
    parse_concurrency,
    parse_draft_tokens,
    parse_extra_vars,
    parse_requests_per_level,
    parse_steps,
    parse_target_concurrency,
    parse_temperature,
    requests_for_level,
)


@pytest.mark.parametrize(
    "text,want",
    [
        ("1-5", [1, 2, 3, 4, 5]),
        ("1,2,4", [1, 2, 4]),
        ("3", [3]),
        ("4,1-2", [1, 2, 4]),
        ("0-2", [0, 1, 2]),
        (" 2 , 1 ", [1, 2]),
        ("2-2", [2]),
        ("1 - 3", [1, 2, 3]),
    ],
)
def test_steps_ok(text, want):
    assert list(parse_steps(text)) == want


@pytest.mark.parametrize("text", ["5-1", "0-x", "", "  ", "a", "1,,2", "-1", "1-2-3", "1.5", None])
def test_steps_bad(text):
    with pytest.raises(BadInput) as e:
        parse_steps(text)
    assert e.value.flag == "--steps"
    assert "--steps" in str(e.value)


@pytest.mark.parametrize("text", ["0", "", "1,0", "x", "4-8", "-4"])
def test_concurrency_bad(text):
    with pytest.raises(BadInput) as e:
        parse_concurrency(text)
    assert e.value.flag == "--concurrency"


def test_concurrency_sorted_unique():
    assert parse_concurrency("64,1,16,4,32,4") == (1, 4, 16, 32, 64)


def test_requests_per_level():
    assert parse_requests_per_level("auto") is None
    assert requests_for_level(1, None) == 4
    assert requests_for_level(64, None) == 128
    assert requests_for_level(1, 10) == 10
    assert requests_for_level(64, 10) == 64  # a closed loop of 64 needs 64 requests in flight
    with pytest.raises(BadInput):
        parse_requests_per_level("0")


def test_temperature():
    assert parse_temperature("0.7") == 0.7
    for bad in ("hot", "-1", "5", "nan"):
        with pytest.raises(BadInput) as e:
            parse_temperature(bad)
        assert e.value.flag == "--temperature"


def test_target_concurrency():
    assert parse_target_concurrency("mix", (1, 4)) is None
    assert parse_target_concurrency("4", (1, 4)) == (4,)
    with pytest.raises(BadInput) as e:
        parse_target_concurrency("8", (1, 4))
    assert e.value.flag == "--target-concurrency"


def test_extra_vars_forms(tmp_path):
    f = tmp_path / "v.yml"
    f.write_text("a: 1\nb: [x]\n")
    j = tmp_path / "v.json"
    j.write_text('{"c": true}')
    got = parse_extra_vars(["x=1 y='two words'", f"@{f}", f"@{j}", '{"d": 4}'])
    assert got == {"x": "1", "y": "two words", "a": 1, "b": ["x"], "c": True, "d": 4}


def test_a_relative_controller_file_is_taken_from_where_the_tuner_runs(tmp_path, monkeypatch):
    """The play runs in the project's directory (ansible-runner's project_dir): `-e
    sglang_server_emulator_profile=my.yaml` from another directory read the project's my.yaml,
    or failed every deploy."""
    monkeypatch.chdir(tmp_path)
    got = parse_extra_vars(
        ["sglang_server_emulator_profile=p/my.yaml sglang_server_verify_baseline=b.json", "other=rel/x.yaml"]
    )
    assert got["sglang_server_emulator_profile"] == str(tmp_path / "p/my.yaml")
    assert got["sglang_server_verify_baseline"] == str(tmp_path / "b.json") and got["other"] == "rel/x.yaml"
    # `~` expanded (the role expands it for the profile only), a template left to the play
    kept = ["sglang_server_emulator_profile=/abs/p.yaml", "sglang_server_verify_baseline=~/b.json"]
    assert parse_extra_vars(kept) == {
        "sglang_server_emulator_profile": "/abs/p.yaml",
        "sglang_server_verify_baseline": os.path.expanduser("~/b.json"),
    }
    templated = {"sglang_server_emulator_profile": "{{ playbook_dir }}/p.yaml"}
    assert parse_extra_vars(['{"sglang_server_emulator_profile": "{{ playbook_dir }}/p.yaml"}']) == templated
    # a templated environment is the play's to check once rendered
    env = {"sglang_server_environment": "{{ my_env }}"}
    assert parse_extra_vars(['{"sglang_server_environment": "{{ my_env }}"}']) == env


@pytest.mark.parametrize(
    "item",
    [
        "novalue",
        "@/does/not/exist.yml",
        "spec_steps=3",
        "1x=2",
        "[1, 2]",
        "sglang_server_api_key=sk-1",
        "sglang_server_admin_api_key=sk-2",
        "sglang_server_watermark_key=k",
        # text, not a mapping: the name check never saw HF_TOKEN, and sweep.json kept it
        "sglang_server_environment=HF_TOKEN=hf_SECRET123",
        '{"sglang_server_environment": "{\\"HF_TOKEN\\": \\"hf_SECRET123\\"}"}',
    ],
)
def test_extra_vars_bad(item):
    with pytest.raises(BadInput) as e:
        parse_extra_vars([item])
    assert e.value.flag == "-e/--extra-vars"


def test_out_dir(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(BadInput) as e:
        check_out_dir(str(f))
    assert e.value.flag == "--out"
    assert check_out_dir(str(tmp_path / "new" / "deeper")) == tmp_path / "new" / "deeper"
    with pytest.raises(BadInput):
        check_out_dir(str(f / "below-a-file"))


def test_an_unwritable_records_file_or_results_dir_is_bad_input_before_anything_runs(tmp_path, monkeypatch):
    """A read-only records.jsonl let `sweep --resume` deploy, then fail with exit 1 at its first
    record; `report`/`plot` on a read-only directory failed naming a temporary file. (root writes
    through file modes, so the kernel's answer is stood in for here: a read-only mount's.)"""
    from tuner.spec.flags import check_results_dir

    (tmp_path / "records.jsonl").write_text("")
    (tmp_path / "sweep.json").write_text("{}")
    real = os.access
    records = str(tmp_path / "records.jsonl")
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == records else real(p, mode))
    with pytest.raises(BadInput) as e:
        check_out_dir(str(tmp_path))
    assert e.value.flag == "--out" and "records.jsonl is not writable" in str(e.value)
    # a baseline file written beside those records does not write them: not refused for them
    from tuner.spec.flags import check_file_path

    assert (
        check_file_path(str(tmp_path / "verify_baseline.json"), "--verify-baseline")
        == tmp_path / "verify_baseline.json"
    )
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).startswith(str(tmp_path)) else real(p, mode))
    with pytest.raises(BadInput) as e:
        check_results_dir(str(tmp_path), "DIR")
    assert e.value.flag == "DIR" and "is not writable: the report, results and plot are written there" in str(e.value)
    monkeypatch.setattr(os, "access", real)
    assert check_out_dir(str(tmp_path)) == tmp_path and check_results_dir(str(tmp_path), "DIR") == tmp_path


def test_draft_tokens():
    assert parse_draft_tokens("auto") == (None,)
    assert parse_draft_tokens("4,8") == (4, 8)
    with pytest.raises(BadInput):
        parse_draft_tokens("1")


def test_plan_configs_order_and_feasibility():
    plan = plan_configs((0, 1, 2, 3), (1, 2), (None,))
    ids = [c.config_id for c in plan.configs]
    assert ids == ["k0", "k1-t1", "k2-t1", "k3-t1"]
    # a tree (topk > 1) needs explicit draft tokens: the deploy play refuses it otherwise, so the
    # tuner sets it aside with the play's own message instead of deploying it
    why = dict((c.config_id, w) for c, w in plan.infeasible)
    assert set(why) == {"k1-t2", "k2-t2", "k3-t2"}
    assert all("spec_draft_tokens is required" in w for w in why.values())
    plan = plan_configs((1, 3), (1, 4), (4, 8))
    ids = {c.config_id for c in plan.configs}
    # topk 1 forces draft = steps + 1; a tree verifies at most topk + (steps - 1) x topk^2 + 1
    assert ids == {"k1-t4-d4", "k3-t1", "k3-t4-d4", "k3-t4-d8"}  # k3 with draft 4 is the chain k3-t1
    assert {c.config_id for c, _ in plan.infeasible} == {"k1-t1-d4", "k1-t1-d8", "k3-t1-d8", "k1-t4-d8"}


def test_spec_config_vars():
    c = SpecConfig(3)
    assert c.extravars() == {"spec_steps": 3, "spec_topk": 1, "spec_algorithm": "NEXTN"}
    assert SpecConfig(4, 2, 8).extravars()["spec_draft_tokens"] == 8
    assert SpecConfig.from_json(c.to_json()) == c


def test_plan_configs_uses_the_play_limits():
    # the play's own maximum (sglang_server_spec_max_steps, default 16), raised by the user's -e
    assert [c for c, _ in plan_configs([20], [1], [None]).infeasible][0].config_id == "k20-t1"
    plan = plan_configs([20], [1], [None], play_vars={"sglang_server_spec_max_steps": "24"})
    assert [c.config_id for c in plan.configs] == ["k20-t1"]
    # EAGLE3 needs a draft model, as the play says
    assert plan_configs([2], [1], [None], "EAGLE3").infeasible
    assert plan_configs(
        [2], [1], [None], "EAGLE3", play_vars={"sglang_server_spec_draft_model_path": "/m/draft"}
    ).configs


def test_a_chains_explicit_draft_tokens_are_the_same_configuration():
    """topk 1 verifies steps + 1 tokens whether given or not: `--draft-tokens auto,8` at steps 7
    plans k7-t1 once (deploying it twice would measure one server twice)."""
    from tuner.spec.configs import plan_configs

    plan = plan_configs((6, 7), (1,), (None, 8))
    assert [c.config_id for c in plan.configs] == ["k6-t1", "k7-t1"]
    assert [c.config_id for c, _ in plan.infeasible] == ["k6-t1-d8"]


def test_a_window_given_for_dflash_dspark_or_uno_reaches_the_play():
    """A chain's draft tokens of steps + 1 are the same configuration as none only where SGLang
    forces steps + 1 (the EAGLE family) or defaults to it (NGRAM): DFLASH, DSPARK and UNO take the
    window given. The plan dropped `--draft-tokens 2` at one step, so DFLASH ran the draft model's
    window and UNO, which needs one, was refused by the play after the plan had accepted it."""
    from sglang_utils.sglang_spec import spec_settings

    from tuner.spec.configs import plan_configs

    for algo, extra in (("UNO", {}), ("DSPARK", {}), ("DFLASH", {"sglang_server_spec_draft_model_path": "/d"})):
        plan = plan_configs((1,), (1,), (2,), algo, play_vars=extra)
        assert [(c.spec_steps, c.spec_draft_tokens) for c in plan.configs] == [(1, 2)], (algo, plan)
        for c in plan.configs:  # what the plan deploys, the play accepts
            errors = spec_settings(
                c.spec_steps, c.spec_topk, c.spec_draft_tokens, algo, draft_model_path="/d" if extra else ""
            )
            assert errors["errors"] == [], (algo, errors)
    # the EAGLE family: steps + 1 given is the configuration without it
    assert [c.config_id for c in plan_configs((3,), (1,), (4,), "NEXTN").configs] == ["k3-t1"]
