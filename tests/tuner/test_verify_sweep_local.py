"""The correctness gate as a phase of `python -m tuner sweep`, end to end on local hosts: real
ansible-runner, real emulator processes (tests/tuner/fixtures/local_emulator_deploy.yml), emulator
faults on chosen depths. A configuration that fails is excluded, nothing is recommended or
deployed from it, the report says why with the example, the records keep the verdicts; the
baseline is deployed once and reused; `--no-verify` says the outputs were not checked. The exact
round (a release with --enable-deterministic-inference: the picks redeployed with it, 100% parity)
catches a divergence the threshold rule lets through and checks the next pick."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from tuner_testlib import free_port, local_inventory, local_target_args, stop_local_emulators

from tuner import cli


@pytest.fixture
def inv(tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.mkdir()
    runner_tmp = tmp_path / "runner-tmp"
    runner_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runner_tmp))
    yield local_inventory(tmp_path / "inventory.yml", {"local-v": free_port()}, state)
    stop_local_emulators(state)


def sweep(out: Path, inventory: Path, *args: str) -> int:
    return cli.main(
        [
            "sweep",
            "--search",
            "grid",
            "--confirm",
            "0",  # the confirmation round's own test: tests/tuner/test_tuner_confirm_local.py
            "--no-early-stop",
            *local_target_args(out, inventory),
            "--concurrency",
            "1,4",
            "--input-len",
            "16",
            "--output-len",
            "24",
            "--warmup-requests",
            "1",
            "--requests-per-level",
            "8",
            *args,
        ]
    )


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.cost(95)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_failing_configurations_are_excluded_and_never_deployed(inv, tmp_path, capsys):
    out = tmp_path / "out"
    faults = {"local_emu_faults": {"3": ["spec-diverge=5"], "2": ["accept-collapse=0"]}}
    # the per-deployment check alone (the exact round is test_exact_round_...'s)
    rc = sweep(out, inv, "--steps", "1-3", "-e", json.dumps(faults), "--deploy-best", "--no-verify-exact")
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    recs = records(out)
    verify = {r["config"]["config_id"]: r for r in recs if r["type"] == "verify" and r.get("role") == "config"}
    assert set(verify) == {"k1-t1", "k2-t1", "k3-t1"}
    assert verify["k1-t1"]["passed"] is True
    assert verify["k3-t1"]["passed"] is False
    assert "outputs differ from the no-speculation baseline" in verify["k3-t1"]["reasons"][0]
    assert verify["k3-t1"]["verdict"]["short"]["first_divergence_min"] == 5
    assert verify["k2-t1"]["passed"] is False and "not above 1.05" in verify["k2-t1"]["reasons"][0]
    for v in verify.values():
        assert v["requests"] == 32 and v["seconds"] > 0  # 24 short, 4 long, the 4 long again
    # the baseline: one no-speculation deploy for the campaign, before the first configuration
    base = [r for r in recs if r["type"] == "verify" and r.get("role") == "baseline"]
    assert len(base) == 1 and base[0]["passed"] and (out / "verify_baseline.json").exists()
    # nothing recommended or deployed from a failing configuration
    rec = json.loads((out / "recommendation.json").read_text())
    chosen = json.dumps(rec)
    best = [r for r in recs if r["type"] == "deploy_best"]
    assert best and all(r["config"]["config_id"] == "k1-t1" for r in best), best
    assert "k3-t1" not in (rec.get("recommended") or {}).get("config_id", ""), chosen
    # nor redeployed by the confirmation round: a configuration that failed is in doubt nowhere
    again = [r for r in recs if r["type"] == "deploy" and int(r.get("deployment") or 1) > 1]
    assert not [r for r in again if r["config"]["config_id"] in ("k2-t1", "k3-t1")], again
    report = (out / "report.md").read_text()
    assert "## Correctness gate" in report
    assert "k3-t1" in report and "first divergence at token 5" in report
    assert "first diverging example: prompt `sgt-mixed-v1.jsonl:" in report
    assert "failed the correctness gate" in report

    # a second campaign on the same model and version reuses the baseline: no no-speculation deploy
    out2 = tmp_path / "out2"
    rc = sweep(out2, inv, "--steps", "1", "--verify-baseline", str(out / "verify_baseline.json"), "--no-verify-exact")
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    assert "reusing the baseline" in printed.out + printed.err
    recs2 = records(out2)
    assert not [r for r in recs2 if r["type"] == "verify" and r.get("role") == "baseline"]
    assert [r["passed"] for r in recs2 if r["type"] == "verify" and r["role"] == "config"] == [True]


@pytest.mark.cost(30)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_other_hosts_measure_while_the_first_captures_the_baseline(tmp_path, monkeypatch, capsys):
    """With two hosts, the baseline's no-speculation deploy takes the first host and the second starts
    measuring at once (not after the baseline); its configuration's check waits for the baseline
    and passes against it."""
    state = tmp_path / "state"
    state.mkdir()
    runner_tmp = tmp_path / "runner-tmp"
    runner_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runner_tmp))
    inv = local_inventory(tmp_path / "inventory.yml", {"local-a": free_port(), "local-b": free_port()}, state)
    try:
        out = tmp_path / "out"
        rc = sweep(out, inv, "--steps", "1-2", "--concurrency", "1", "--no-verify-exact")
        printed = capsys.readouterr()
        assert rc == 0, printed.out + printed.err
    finally:
        stop_local_emulators(state)
    lines = (printed.out + printed.err).splitlines()

    def at(text: str) -> int:
        return next(i for i, line in enumerate(lines) if text in line)

    # local-b's first configuration starts before the baseline on local-a is captured
    baseline_done = at("[verify] baseline: ")
    assert at("[verify] deploying the no-speculation baseline on local-a") < baseline_done
    assert at("deploying on local-b") < baseline_done, lines
    recs = records(out)
    order = [(r["type"], r.get("role"), r.get("host")) for r in recs if r["type"] == "verify"]
    assert order[0] == ("verify", "baseline", "local-a"), order
    checks = {r["config"]["config_id"]: r for r in recs if r["type"] == "verify" and r.get("role") == "config"}
    assert set(checks) == {"k1-t1", "k2-t1"} and all(c["passed"] for c in checks.values()), checks
    assert {c["host"] for c in checks.values()} == {"local-a", "local-b"}


@pytest.mark.slow
def test_no_verify_says_the_outputs_were_not_checked(inv, tmp_path, capsys):
    out = tmp_path / "out"
    faults = {"local_emu_faults": {"1": ["spec-diverge=5"]}}
    rc = sweep(out, inv, "--steps", "1", "--no-verify", "-e", json.dumps(faults))
    assert rc == 0, capsys.readouterr().err
    assert not [r for r in records(out) if r["type"] == "verify"]
    assert not (out / "verify_baseline.json").exists()
    report = (out / "report.md").read_text()
    assert "The outputs were not checked (--no-verify)" in report


@pytest.mark.slow
def test_a_resume_with_the_baseline_checks_what_was_measured_without_it(inv, tmp_path, capsys):
    """The baseline's deploy fails (its start runs out of KV memory): k1 is measured, "not checked"
    and so not recommended. A --resume whose baseline deploys checks k1 on a deploy of its own (its
    levels stay the first run's) and recommends it; it never benchmarks k1 again."""
    out = tmp_path / "out"
    # the first run's baseline start fails; the fault goes with the inventory and flags unchanged
    # (a --resume holds them): the fixture's per-depth file of extra emulator flags
    fault = tmp_path / "state" / "local-v" / "faults-k0"
    fault.parent.mkdir(exist_ok=True)
    fault.write_text("--emulator-fault kv-oom")
    rc = sweep(out, inv, "--steps", "1", "--no-verify-exact")
    fault.unlink()
    first = capsys.readouterr()
    assert rc != 0 or "not checked" in first.out + first.err
    (k1,) = [r for r in records(out) if r["type"] == "verify" and r.get("role") == "config"]
    assert not k1["passed"] and k1["reasons"][0].startswith("not checked: the no-speculation baseline did not deploy")
    assert json.loads((out / "recommendation.json").read_text())["recommended"]["config_id"] is None
    levels_before = [r for r in records(out) if r["type"] == "level"]

    rc = sweep(out, inv, "--steps", "1", "--no-verify-exact", "--resume")
    second = capsys.readouterr()
    assert rc == 0, second.out + second.err
    assert "verify: redeploying on local-v to check it" in second.err, second.err
    recs = records(out)
    assert [r for r in recs if r["type"] == "level"] == levels_before  # nothing measured again
    checks = [r for r in recs if r["type"] == "verify" and r.get("role") == "config"]
    assert len(checks) == 2 and checks[-1]["passed"] and checks[-1]["deploy_s"] is not None, checks
    assert json.loads((out / "recommendation.json").read_text())["recommended"]["config_id"] == "k1-t1"
    # checked: a third run has nothing to check again
    rc = sweep(out, inv, "--steps", "1", "--no-verify-exact", "--resume")
    assert rc == 0 and "redeploying on" not in "".join(capsys.readouterr())


@pytest.mark.cost(85)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_exact_round_catches_what_the_threshold_lets_through_and_checks_the_next_pick(inv, tmp_path, capsys):
    """SGLang 0.5.9 (the emulator's default) has --enable-deterministic-inference. k2 is the faster
    depth at both levels but its verify path goes wrong from token 100 on: its short continuations
    (48 tokens) all match, so the threshold rule on its measurement deployment passes it; redeployed
    with the flag it must match the deterministic baseline exactly, its long outputs do not, it is
    excluded, and the next pick (k1) is redeployed, passes and is recommended and deployed."""
    out = tmp_path / "out"
    faults = {"local_emu_faults": {"2": ["spec-diverge=100"]}}
    rc = sweep(out, inv, "--steps", "1-2", "-e", json.dumps(faults), "--deploy-best")
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    recs = records(out)
    by_role: dict[str, list[dict]] = {}
    for r in recs:
        if r["type"] == "verify":
            by_role.setdefault(r["role"], []).append(r)
    threshold = {r["config"]["config_id"]: r for r in by_role["config"]}
    assert threshold["k2-t1"]["passed"] and threshold["k2-t1"]["verdict"]["rule"]["mode"] == "threshold"
    # the round: one deterministic baseline, then k2 (the recommendation) and, once it failed, k1
    (base,) = by_role["exact_baseline"]
    assert base["passed"] and base["verdict"]["deterministic"] is True
    assert json.loads((out / "verify_baseline.deterministic.json").read_text())["deterministic"] is True
    exact = [(r["config"]["config_id"], r["passed"]) for r in by_role["exact"]]
    assert exact == [("k2-t1", False), ("k1-t1", True)], exact
    k2 = by_role["exact"][0]
    assert k2["verdict"]["rule"]["mode"] == "deterministic"
    assert "long outputs differ from the baseline under deterministic inference" in k2["reasons"][0]
    assert k2["verdict"]["long"]["first_divergence_min"] == 100
    assert k2["deploy_s"] > 0 and k2["seconds"] > 0
    (rnd,) = by_role["exact_round"]
    assert rnd["verdict"]["applies"] and rnd["verdict"]["deploys"] == 3 and rnd["verdict"]["configs"] == 2
    assert "[verify exact] done: 2 configuration(s) redeployed, 3 deploy(s) in all" in printed.out + printed.err
    # k1 recommended and deployed, never k2
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["recommended"]["config_id"] == "k1-t1"
    best = [r for r in recs if r["type"] == "deploy_best"]
    assert best and all(r["config"]["config_id"] == "k1-t1" for r in best)
    assert rec["verify"]["recommended_judged_by"].startswith("exact (100% on a redeploy")
    ex = rec["verify"]["exact_round"]
    assert ex["ran"] and ex["deploys"] == 3 and ex["seconds"] > 0
    assert ex["configs"]["k2-t1"]["passed"] is False and ex["configs"]["k1-t1"]["passed"] is True
    report = (out / "report.md").read_text()
    assert "### Exact round (deterministic inference)" in report
    assert "Cost: 3 extra deployment(s)" in report
    assert "k2-t1 redeployed with --enable-deterministic-inference" in report
    assert "judged by: exact (100% on a redeploy" in report
    assert "k2-t1 (spec_steps 2) failed the correctness gate's exact round (redeployed with" in report

    # --resume: every pick has its exact verdict; nothing is redeployed and nothing recorded again
    n = len(recs)
    rc = sweep(out, inv, "--steps", "1-2", "-e", json.dumps(faults), "--resume")
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    assert "[verify exact] done: 0 configuration(s) redeployed, 0 deploy(s)" in printed.out + printed.err
    assert records(out)[n:] == []
