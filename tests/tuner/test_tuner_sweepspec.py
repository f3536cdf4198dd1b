"""The sweep's typed spec (tuner/spec/sweepspec.py): its flags, its JSON form, its identity for --resume."""

from __future__ import annotations

import argparse
import json

import pytest
from tuner_testlib import FIXTURES, ROOT

from tuner.spec.flags import BadInput
from tuner.spec.sweepspec import SweepSpec, WorkloadSpec

INV = str(FIXTURES / "local_inventory.yml")


def parse(*argv: str, command: str = "sweep") -> SweepSpec:
    p = argparse.ArgumentParser()
    if command == "sweep":
        SweepSpec.add_cli_args(p)
        return SweepSpec.from_cli_args(p.parse_args(["--inventory", INV, *argv]), ROOT)
    WorkloadSpec.add_cli_args(p)
    p.add_argument("--url")
    return SweepSpec.for_bench(p.parse_args(["--url", "http://127.0.0.1:1", *argv]))


def test_defaults_are_the_documented_ones():
    s = parse()
    w = s.workload
    assert s.steps == (1, 2, 3, 4, 5) and s.topk == (1,) and s.draft_tokens == (None,) and s.algorithm == "NEXTN"
    assert w.concurrency == (1, 4, 16, 32, 64) and (w.input_len, w.output_len) == (256, 256)
    assert w.requests_per_level is None and w.requests_for(64) == 128 and w.requests_for(1) == 4
    assert w.ignore_eos is True and w.endpoint == "generate" and w.target_concurrency is None
    assert s.early_stop is True and s.deploy_best is False and s.deploy_timeout == 4000.0
    assert s.search == "model"
    assert s.inventory == str((FIXTURES / "local_inventory.yml").resolve())
    assert s.playbook == str((ROOT / "playbooks" / "deploy.yml").resolve())


def test_flags_parse_into_typed_values():
    s = parse(
        "--steps",
        "0-2",
        "--concurrency",
        "4,1",
        "--no-ignore-eos",
        "--no-early-stop",
        "--deploy-best",
        "-e",
        "a=1",
        "-e",
        '{"b": 2}',
        "--target-concurrency",
        "4",
    )
    assert s.steps == (0, 1, 2) and s.workload.concurrency == (1, 4)
    assert s.workload.ignore_eos is False and s.early_stop is False and s.deploy_best is True
    assert dict(s.extra_vars) == {"a": "1", "b": 2} and s.workload.target_concurrency == (4,)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--steps", "x"], "--steps"),
        (["--algorithm", "MEDUSA"], "--algorithm"),
        (["--deploy-timeout", "-1"], "--deploy-timeout"),
        (["--request-timeout", "nan"], "--request-timeout"),
        (["--target-concurrency", "3"], "--target-concurrency"),
        (["-e", "sglang_server_api_key=sk-abc"], "-e/--extra-vars"),
        (["--playbook", "/no/such.yml"], "--playbook"),
        (["--search", "bayes"], "--search"),
    ],
)
def test_bad_values_name_their_flag(argv, flag):
    with pytest.raises(BadInput) as e:
        parse(*argv)
    assert e.value.flag == flag


def test_json_round_trip_and_flat_params():
    s = parse("--steps", "1,3", "--topk", "1,2", "--draft-tokens", "4", "-e", "x=1", "--repeats", "2")
    params = s.to_json()
    assert params["steps"] == [1, 3] and params["draft_tokens"] == [4] and params["repeats"] == 2
    assert params["command"] == "sweep" and params["extra_vars"] == {"x": "1"}
    json.dumps(params)  # JSON-able as it is
    again = SweepSpec.from_json(json.loads(json.dumps(params)))
    assert again == s
    b = parse("--concurrency", "2", command="bench")
    assert SweepSpec.from_json(b.to_json()) == b and "steps" not in b.to_json()


def test_a_stored_value_masked_for_the_key_still_matches_on_resume(tmp_path):
    """sweep.json is written through the redactor, which masks the API key wherever it appears: a
    path or -e value that held it (a dev key `test` in /home/tests/inv.yml) was stored masked and
    never matched the command line again, so --resume refused the sweep as a different one."""
    from tuner.data.redact import Redactor
    from tuner.data.store import Store

    inv = tmp_path / "tests" / "inv.yml"
    inv.parent.mkdir()
    inv.write_text("all: {}\n")
    s = parse("--steps", "1-4", "--inventory", str(inv))
    redactor = Redactor(["test"])
    store = Store(tmp_path / "out", redactor)
    store.write_spec(s, "sglang-tune")
    stored = json.loads((tmp_path / "out" / "sweep.json").read_text())["params"]
    assert "test" not in json.dumps(stored)  # stored masked
    assert s.identity_diff(stored, scrub=redactor.scrub_obj) == []
    assert parse("--steps", "1-3", "--inventory", str(inv)).identity_diff(stored, scrub=redactor.scrub_obj)


def test_old_sweep_json_still_reads():
    # a version-1 sweep.json: lists, no deploy_timeout, an unknown key
    old = {"command": "sweep", "steps": [1, 2], "concurrency": [1, 4], "temperature": 0.0, "future": 1}
    s = SweepSpec.from_json(old)
    assert s.steps == (1, 2) and s.workload.concurrency == (1, 4) and s.deploy_timeout == 4000.0


def test_identity_names_what_differs_and_ignores_the_rest():
    s = parse("--steps", "1-4")
    stored = s.to_json()
    assert s.identity_diff(stored) == []
    # how the sweep runs may change on --resume; what it measures may not
    assert (
        parse("--steps", "1-4", "--no-early-stop", "--deploy-timeout", "5", "--warmup-requests", "0").identity_diff(
            stored
        )
        == []
    )
    # a grid sweep continues under the model's search and back: measurements are measurements
    assert parse("--steps", "1-4", "--search", "Model").search == "model"
    assert parse("--steps", "1-4", "--search", "model").identity_diff(stored) == []
    # hosts may be left out on --resume (the docs' words): a --limit to the surviving host is the same sweep
    assert parse("--steps", "1-4", "--limit", "emu1").identity_diff(stored) == []
    diffs = parse("--steps", "1-3", "--temperature", "0.7").identity_diff(stored)
    assert any(d.startswith("--steps was [1, 2, 3, 4]") for d in diffs)
    assert any(d.startswith("--temperature was [0.0], now [0.7]") for d in diffs)
    assert parse("-e", "x=2", "--steps", "1-4").identity_diff(stored)[0].startswith("-e/--extra-vars")


def test_repeat_deploys_mark_each_deployment_for_a_restart():
    """An identical run of the role restarts nothing, so each redeploy carries its number (the
    role writes it to the server's environment file): the file changes and the role restarts the
    server (docs/tuner.md --repeat-deploys)."""
    from tuner.run.sweep import REDEPLOY_VAR, Sweep

    def redeploy_vars(*argv, dep):
        s = Sweep(spec=parse(*argv), plan=None, store=None, deployer=None, hosts=[], progress=None)
        return s._redeploy_vars(dep)

    assert REDEPLOY_VAR == "sglang_server_deployment"
    assert redeploy_vars("--steps", "1", dep=1) == {}
    assert redeploy_vars("--steps", "1", "--repeat-deploys", "3", dep=2) == {REDEPLOY_VAR: "2"}
    # never sglang_server_environment: an extra var replaces the inventory's whole dict (HF_TOKEN,
    # SGLANG_ENABLE_SPEC_V2, ...), so the redeployed server would run without them; the user's own
    # -e value of it reaches the play unchanged
    mine = '{"sglang_server_environment": {"HF_HOME": "/data/hf"}}'
    assert redeploy_vars("--steps", "1", "--repeat-deploys", "2", "-e", mine, dep=1) == {REDEPLOY_VAR: "1"}
