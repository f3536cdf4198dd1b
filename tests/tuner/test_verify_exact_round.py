"""The sweep's exact round (tuner/verify/phase.py `VerifyPhase.exact_round`) where it must not
deploy anything: a release without --enable-deterministic-inference, --no-verify-exact, a sweep
that already runs deterministic. The report and recommendation.json then say which rule judged
each configuration. (The round that deploys is tests/tuner/test_verify_sweep_local.py's.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sglang_utils import sglang_verify as rules
from tuner_testlib import PhaseLog, PhaseProgress, verify_phase

from tuner.data.records import VerifyRecord
from tuner.present.verify_text import exact_json, judged_by, report_section
from tuner.spec.configs import SpecConfig
from tuner.verify.phase import VerifyPhase, exact_baseline_path


def _no_deploy(*_a: Any, **_k: Any) -> Any:
    raise AssertionError("the exact round must not deploy here")


def _new_phase(tmp_path: Path, **options: Any) -> tuple[VerifyPhase, PhaseLog, PhaseProgress]:
    return verify_phase(tmp_path / "verify_baseline.json", **options)


def _phase(
    tmp_path: Path, version: str, deterministic: bool, exact: bool = True
) -> tuple[VerifyPhase, PhaseLog, PhaseProgress]:
    # a deterministic sweep: its deployments run with the flag, and so did its baseline's
    flags = {rules.DETERMINISTIC_FLAG: True} if deterministic else {}
    phase, log, progress = _new_phase(tmp_path, exact=exact, extra_flags=flags)
    phase.baseline = {"server_version": version, "deterministic": deterministic, "model": "m"}
    k2 = SpecConfig(spec_steps=2)
    # k2 passed its per-deployment check by the threshold rule
    log.append(
        VerifyRecord(
            config=k2,
            host="h",
            passed=True,
            verdict={"rule": rules.rule_for(version, deterministic, deterministic)},
        )
    )
    return phase, log, progress


def _run(phase: VerifyPhase, log: PhaseLog) -> None:
    import asyncio

    asyncio.run(
        phase.exact_round(
            _no_deploy,
            ["h"],
            lambda: [SpecConfig(spec_steps=2)],
            lambda: (set(log.state.verify_exact), set(log.state.verify)),
        )
    )


@pytest.mark.parametrize(
    ("version", "deterministic", "exact", "said", "rule"),
    [
        ("0.5.2", False, True, "SGLang 0.5.2 has no --enable-deterministic-inference (since 0.5.3)", "threshold"),
        ("0.5.9", False, False, "--no-verify-exact", "threshold"),
        ("0.5.9", True, True, "already run with --enable-deterministic-inference", "exact (its measurement"),
    ],
)
def test_no_redeploy_and_the_report_says_which_rule(tmp_path, version, deterministic, exact, said, rule):
    phase, log, progress = _phase(tmp_path, version, deterministic, exact)
    _run(phase, log)
    assert any(said in ln for ln in progress.lines), progress.lines
    st = log.state
    assert st.verify_exact == {} and st.verify_exact_cost == {"deploys": 0, "seconds": 0.0}
    assert said in (st.verify_exact_round.verdict.get("why") or "")
    assert judged_by(st, "k2-t1").startswith(rule)
    js = exact_json(st)
    assert js["ran"] is False and js["deploys"] == 0 and said in js["why"]
    text = "\n".join(report_section(st, True, True))
    assert "### Exact round (deterministic inference)" in text and "Not run: " in text and said in text
    assert f"judged by: {rule}" in text
    assert not exact_baseline_path(phase.path).exists()


def _fake_deploy(
    urls: dict[int, str], calls: list[Any], entry: Callable[[str, str, dict], Any] = lambda label, _h, x: (label, x)
) -> Any:
    """Stands in for Deployer.deploy: the server of each depth is already running (real emulator
    processes); records what the round asked for, `entry(label, host, extravars)` (by default the
    label and the extra vars, which carry the flag)."""
    from types import SimpleNamespace

    from sglang_utils.sglang_gate_report import GateReport

    def deploy(cfg: SpecConfig, host: str, *, label: str, extravars: dict | None = None) -> Any:
        calls.append(entry(label, host, dict(extravars or {})))
        return SimpleNamespace(
            ok=True, client_url=urls[cfg.spec_steps], reason=None, report={}, gate=GateReport(), elapsed_s=0.5
        )

    return deploy


def _threshold_phase(tmp_path: Path) -> tuple[VerifyPhase, PhaseLog, PhaseProgress]:
    phase, log, progress = _new_phase(tmp_path, extra_flags={"attention-backend": "fa3"})
    return phase, log, progress


@pytest.mark.cost(20)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_a_configuration_measured_before_a_resume_is_covered_and_a_flag_that_does_not_take_stops(tmp_path):
    """k2 has no per-deployment verdict (measured before a --resume): the round redeploys it with the
    flag, through sglang_server_extra_flags merged into the user's, and judges its parity and its
    acceptance floor and drift there. A server that does not report enable_deterministic_inference
    stops the round without excluding anyone."""
    import asyncio

    from tuner_testlib import emulator

    from tuner.run.client import BenchClient, ClientOptions
    from tuner.verify import baseline as baseline_mod
    from tuner.verify import gate

    det = "--enable-deterministic-inference"
    with emulator(det, steps=0) as k0, emulator(det, steps=2) as k2, emulator(steps=3) as k3_plain:
        phase, log, progress = _threshold_phase(tmp_path)

        async def capture_plain() -> dict:
            async with BenchClient(ClientOptions(url=k0)) as c:
                doc = await gate.capture(c, phase.prompts, "test")
            return {**doc, "deterministic": False}  # as the threshold baseline of a sweep without the flag

        phase.baseline = asyncio.run(capture_plain())
        baseline_mod.write(phase.path, phase.baseline)
        calls: list[tuple[str, dict]] = []
        deploy = _fake_deploy({0: k0, 2: k2, 3: k3_plain}, calls)
        asyncio.run(
            phase.exact_round(
                deploy,
                ["h"],
                lambda: [SpecConfig(spec_steps=2)],
                lambda: (set(log.state.verify_exact), set(log.state.verify)),
            )
        )
        st = log.state
        assert [label for label, _ in calls] == ["verify-exact-baseline", "verify-exact-k2-t1"]
        for _label, ev in calls:
            assert ev == {"sglang_server_extra_flags": {"attention-backend": "fa3", rules.DETERMINISTIC_FLAG: True}}
        k2_rec = st.verify_exact["k2-t1"]
        assert k2_rec.passed, k2_rec.reasons
        assert k2_rec.verdict["rule"]["mode"] == "deterministic"
        assert k2_rec.verdict["accept"]["judged"] is True  # no per-deployment verdict: judged here
        assert judged_by(st, "k2-t1") == (
            "exact (100% on a redeploy with --enable-deterministic-inference); measured before a resume"
        )
        assert st.verify_exact_cost["deploys"] == 2
        assert exact_baseline_path(phase.path).exists()

        # k3's server ignores the flag: the round stops, k3 is not excluded, the report says so
        phase2, log2, progress2 = _threshold_phase(tmp_path)
        phase2.baseline = phase.baseline
        calls.clear()
        asyncio.run(
            phase2.exact_round(
                deploy,
                ["h"],
                lambda: [SpecConfig(spec_steps=3), SpecConfig(spec_steps=2)],
                lambda: (set(log2.state.verify_exact), set(log2.state.verify)),
            )
        )
    st2 = log2.state
    assert [label for label, _ in calls] == ["verify-exact-k3-t1"]  # the deterministic baseline is reused
    assert "reusing the deterministic baseline" in "\n".join(progress2.lines)
    k3 = st2.verify_exact["k3-t1"]
    assert not k3.passed and k3.verdict.get("unchecked") and "not checked exactly" in k3.reasons[0]
    assert "k3-t1" not in st2.verify_failed
    assert st2.verify_exact_round.verdict["stopped"] and st2.verify_exact_round.verdict["unchecked"] == ["k2-t1"]
    text = "\n".join(report_section(st2, True, True))
    assert "k2-t1 keep their threshold verdict only" in text


@pytest.mark.slow
def test_with_two_hosts_the_second_redeploys_a_pick_while_the_first_captures_the_baseline(tmp_path):
    """The deterministic baseline is captured on the first host; the second host redeploys the first
    pick meanwhile and compares once the baseline is there; the first host then takes the next
    pick. Three deploys, as with one host, in less time."""
    import asyncio

    from tuner_testlib import emulator

    det = "--enable-deterministic-inference"
    with emulator(det, steps=0) as k0, emulator(det, steps=2) as k2, emulator(det, steps=3) as k3:
        phase, log, progress = _threshold_phase(tmp_path)
        phase.baseline = {"server_version": "0.5.9", "deterministic": False, "model": "m"}
        urls = {0: k0, 2: k2, 3: k3}
        calls: list[tuple[str, str, bool]] = []  # (label, host, deterministic baseline there yet)
        deploy = _fake_deploy(urls, calls, lambda label, host, _x: (label, host, phase.exact_baseline is not None))

        asyncio.run(
            phase.exact_round(
                deploy,
                ["a", "b"],
                lambda: [SpecConfig(spec_steps=2), SpecConfig(spec_steps=3)],
                lambda: (set(log.state.verify_exact), set(log.state.verify)),
            )
        )
    st = log.state
    assert ("verify-exact-baseline", "a", False) in calls
    assert ("verify-exact-k2-t1", "b", False) in calls  # before the baseline was captured
    assert ("verify-exact-k3-t1", "a", True) in calls and len(calls) == 3
    assert {cid: (r.host, r.passed) for cid, r in st.verify_exact.items()} == {
        "k2-t1": ("b", True),
        "k3-t1": ("a", True),
    }, {cid: r.reasons for cid, r in st.verify_exact.items()}
    assert st.verify_exact_baseline is not None and st.verify_exact_baseline.host == "a"
    verdict = st.verify_exact_round.verdict
    assert verdict["deploys"] == 3 and verdict["configs"] == 2 and verdict["unchecked"] == []


def test_a_pick_the_first_hosts_role_refuses_is_redeployed_only_on_the_second(tmp_path):
    """A host whose role refuses a pick (tuner/run/planner.py `Planner.kept_off`, passed as `runs`)
    is never handed it: the first host captures the baseline and takes nothing it refuses; the
    second redeploys both picks, one after the other."""
    import asyncio

    from tuner_testlib import emulator

    det = "--enable-deterministic-inference"
    with emulator(det, steps=0) as k0, emulator(det, steps=2) as k2, emulator(det, steps=3) as k3:
        phase, log, _ = _threshold_phase(tmp_path)
        phase.baseline = {"server_version": "0.5.9", "deterministic": False, "model": "m"}
        urls = {0: k0, 2: k2, 3: k3}
        calls: list[tuple[str, str]] = []
        deploy = _fake_deploy(urls, calls, lambda label, host, _x: (label, host))

        asyncio.run(
            phase.exact_round(
                deploy,
                ["a", "b"],
                lambda: [SpecConfig(spec_steps=2), SpecConfig(spec_steps=3)],
                lambda: (set(log.state.verify_exact), set(log.state.verify)),
                runs=lambda cfg, host: host != "a" or cfg.spec_steps == 0,
            )
        )
    assert sorted(calls) == [("verify-exact-baseline", "a"), ("verify-exact-k2-t1", "b"), ("verify-exact-k3-t1", "b")]
    assert {cid: r.host for cid, r in log.state.verify_exact.items()} == {"k2-t1": "b", "k3-t1": "b"}


def test_a_successor_the_host_that_checked_its_predecessor_refuses_goes_to_the_other_host(tmp_path):
    """The pick's successor appears only once the pick has its verdict (picks() is asked again:
    here k2's verdict makes k3 the next pick). b redeploys k2 (a's role refuses it) while a, with
    nothing it runs yet, stopped; b's role refuses k3, so k3 was never redeployed, and the round
    said it was done with nothing left unchecked. Now a waits while a pick is in flight and takes k3."""
    import asyncio

    from tuner_testlib import emulator

    det = "--enable-deterministic-inference"
    with emulator(det, steps=0) as k0, emulator(det, steps=2) as k2, emulator(det, steps=3) as k3:
        phase, log, _ = _threshold_phase(tmp_path)
        phase.baseline = {"server_version": "0.5.9", "deterministic": False, "model": "m"}
        urls = {0: k0, 2: k2, 3: k3}
        calls: list[tuple[str, str]] = []
        deploy = _fake_deploy(urls, calls, lambda label, host, _x: (label, host))

        def picks() -> list[SpecConfig]:
            after = [SpecConfig(spec_steps=3)] if "k2-t1" in log.state.verify_exact else []
            return [SpecConfig(spec_steps=2), *after]

        asyncio.run(
            phase.exact_round(
                deploy,
                ["a", "b"],
                picks,
                lambda: (set(log.state.verify_exact), set(log.state.verify)),
                runs=lambda cfg, host: (host, cfg.spec_steps) not in {("a", 2), ("b", 3)},
            )
        )
    assert sorted(calls) == [("verify-exact-baseline", "a"), ("verify-exact-k2-t1", "b"), ("verify-exact-k3-t1", "a")]
    assert {cid: r.host for cid, r in log.state.verify_exact.items()} == {"k2-t1": "b", "k3-t1": "a"}


def test_the_gates_share_is_over_every_deployment_it_judged():
    """A configuration the confirmation round redeployed was gated on both deployments: its cost is
    both gates against both deployments' measurement (the rule's terms), not the last gate against
    the redeploy's one level."""
    from tuner.data.records import SweepState, TimingRecord
    from tuner.spec.configs import SpecConfig

    k3 = SpecConfig(3)
    verdict = {"short": {"exact": 24, "prompts": 24, "exact_share": 1.0}, "long": {}, "accept": {}, "drift": {}}
    recs = [
        TimingRecord(config=k3, host="h", total_s=113.5, bench_s=106.9, deployment=1),
        VerifyRecord(config=k3, host="h", passed=True, requests=32, seconds=4.3, deployment=1, verdict=verdict),
        TimingRecord(config=k3, host="h", total_s=11.8, bench_s=5.0, deployment=2),
        VerifyRecord(config=k3, host="h", passed=True, requests=32, seconds=4.2, deployment=2, verdict=verdict),
    ]
    st = SweepState.fold(recs)
    assert st.timings["k3-t1"].total_s == 113.5  # the configuration's row: its first deployment
    text = "\n".join(report_section(st, True, True))
    assert "7.6% of its 111.9 s of measurement (gated on each of its 2 deployments: 8.5 s in all)" in text, text


def test_the_exact_round_holds_a_config_pinning_0_steps_at_the_gates_batch_to_no_floor(tmp_path, monkeypatch):
    """A tuned ladder that runs no speculative step from batch 2 on, measured before a --resume (no
    per-deployment verdict): the exact round judged its acceptance with the 1.05 floor, which the
    per-deployment check and docs/tuner.md exempt it from, and excluded a correct pick."""
    import asyncio
    import contextlib
    from types import SimpleNamespace

    from sglang_utils.sglang_gate_report import GateReport

    from tuner.verify import gate
    from tuner.verify import probe as probe_mod

    seen: dict[str, Any] = {}

    async def fake_check(*_a: Any, **kw: Any) -> dict[str, Any]:
        seen.update(kw)
        return {"passed": True, "reasons": [], "rule": {"mode": "exact"}}

    monkeypatch.setattr(gate, "check", fake_check)
    phase, _log, _progress = _new_phase(tmp_path)
    monkeypatch.setattr(phase, "_client", lambda *_a: contextlib.nullcontext(SimpleNamespace()))

    def deploy(*_a: Any, **_k: Any) -> Any:
        return SimpleNamespace(ok=True, client_url="http://h:1", reason=None, gate=GateReport(), elapsed_s=0.1)

    phase.exact_baseline = {"deterministic": True}
    pinned = SpecConfig(spec_steps=3, schedule=((1, 3), (2, 0)))
    assert rules.floor_exemption(pinned.adaptive_document(), probe_mod.CONCURRENCY) is not None
    asyncio.run(phase._exact_one(deploy, "h", pinned, threshold_checked=False))
    assert seen["acceptance"] is True and seen["floor"] is False
    asyncio.run(phase._exact_one(deploy, "h", SpecConfig(spec_steps=3), threshold_checked=False))
    assert seen["floor"] is True  # a static depth: the floor applies


def test_a_deterministic_baseline_of_other_server_arguments_is_not_reused(tmp_path):
    """The deterministic baseline beside the threshold one is reused only for a server of the same
    tp size, dtype, quantization and KV cache dtype: one kept from a sweep at another TP size made
    every exact check of the round 'not checked' (its identity check missed the numerics)."""
    import asyncio
    import json

    from test_verify_rules import _baseline, _rows

    phase, _log, progress = _new_phase(tmp_path)
    ident = {"prompt_set_sha256": phase.prompts.sha256, "settings": dict(phase.prompts.settings)}
    phase.baseline = {**_baseline(_rows(2, 4), _rows(1, 8)), **ident, "numerics": {"tp_size": 1}}
    old = {**phase.baseline, "deterministic": True, "numerics": {"tp_size": 2}}
    exact_baseline_path(phase.path).write_text(json.dumps(old))
    calls: list[str] = []

    def deploy(cfg: SpecConfig, host: str, *, label: str, extravars: dict | None = None) -> Any:
        from types import SimpleNamespace

        calls.append(label)
        return SimpleNamespace(ok=False, client_url=None, reason="no server here", report={}, elapsed_s=0.1)

    usable, _made = asyncio.run(phase._exact_capture(deploy, "h"))
    assert calls == ["verify-exact-baseline"] and not usable
    assert not any("reusing the deterministic baseline" in ln for ln in progress.lines)


def _mismatching_phase(log: Any) -> VerifyPhase:
    """A VerifyPhase on 0.5.23 whose deterministic baseline is captured and whose every exact
    redeploy records a mismatch into `log` (so the next pick is asked for each time)."""
    from tuner.run.levels import Progress

    vp = VerifyPhase(
        baseline_path=Path("/nonexistent/b.json"),
        prompts=None,
        log=log,
        progress=Progress(quiet=True),
        api_key=None,
        tool="t",
    )
    vp.baseline = {"server_version": "0.5.23", "deterministic": False}
    vp.exact_baseline = {"captured": True}

    async def one(_deploy: Any, host: str, cfg: SpecConfig, _threshold: bool, _ready: Any = None) -> VerifyRecord:
        rec = VerifyRecord(config=cfg, host=host, passed=False, role="exact", reasons=["mismatch"], deploy_s=1.0)
        log.append(rec)
        return rec

    vp._exact_one = one  # type: ignore[method-assign]
    return vp


def _failing_picks(
    log: Any, cfgs: list[SpecConfig]
) -> tuple[Callable[[], list[SpecConfig]], Callable[[], tuple[set[str], set[str]]]]:
    """exact_round's `picks` (`cfgs` less those that failed, each failure's successor next) and
    `checked` (the verdicts in `log`)."""

    def picks() -> list[SpecConfig]:
        failed = {cid for cid, v in log.state().verify_exact.items() if not v.passed}
        return [c for c in cfgs if c.config_id not in failed]

    return picks, lambda: (set(log.state().verify_exact), set(log.state().verify))


def test_the_cap_of_the_exact_round_holds_over_a_resume():
    """docs/tuner.md: at most EXACT_MAX_CONFIGS configurations per sweep. A round that reached the
    cap with picks left (each one failing, so its successor is next) and is run again on --resume
    (a Ctrl-C during --deploy-best, a crash) makes no more redeploys."""
    import asyncio

    from tuner.data.store import MemoryStore
    from tuner.verify.phase import EXACT_MAX_CONFIGS

    log = MemoryStore()
    cfgs = [SpecConfig(k) for k in range(1, 9)]
    picks, checked = _failing_picks(log, cfgs)
    asyncio.run(_mismatching_phase(log).exact_round(None, ["h"], picks, checked))
    assert len(log.state().verify_exact) == EXACT_MAX_CONFIGS
    previous = dict(log.state().verify_exact_round.verdict)
    asyncio.run(_mismatching_phase(log).exact_round(None, ["h"], picks, checked, previous))
    assert len(log.state().verify_exact) == EXACT_MAX_CONFIGS


@pytest.mark.parametrize(
    "version,pick,said",
    [
        # a topk > 1 pick is never held to exact parity (rule_for): the round redeployed it for
        # nothing, marked it "not checked exactly" and stopped there, leaving the chain picks after it
        ("0.5.9", SpecConfig(spec_steps=3, spec_topk=2, spec_draft_tokens=6), "(draft trees, never exact)"),
        # SGLang refuses UNO with --enable-deterministic-inference (0.5.20-0.5.23 `_handle_uno`), and
        # the role before the host changes: its redeploy could only fail and stop the round
        (
            "0.5.23",
            SpecConfig(spec_steps=1, spec_draft_tokens=4, spec_algorithm="UNO"),
            "(UNO, which SGLang does not run deterministic)",
        ),
        # NGRAM verifies a tree of its BFS breadth whatever --topk says (SGLang sets its topk to
        # speculative_ngram_max_bfs_breadth, 10 by default): the same wasted redeploy and stop
        ("0.5.23", SpecConfig(spec_steps=3, spec_topk=1, spec_algorithm="NGRAM"), "(draft trees, never exact)"),
    ],
    ids=["draft-tree", "uno", "ngram"],
)
def test_a_pick_never_held_to_exact_parity_is_not_redeployed_and_does_not_stop_the_round(tmp_path, version, pick, said):
    import asyncio

    phase, log, progress = _new_phase(tmp_path)
    phase.baseline = {"server_version": version, "deterministic": False, "model": "m"}
    asyncio.run(
        phase.exact_round(
            _no_deploy,  # a redeploy of the pick would raise
            ["h"],
            lambda: [pick],
            lambda: (set(log.state.verify_exact), set(log.state.verify)),
        )
    )
    st = log.state
    assert st.verify_exact == {}
    why = st.verify_exact_round.verdict
    assert why.get("stopped") is None and why.get("deploys") == 0, why
    expected = f"{pick.config_id} {said} keep their threshold verdict"
    assert any(expected in ln for ln in progress.lines), progress.lines


def test_a_configuration_never_compared_is_reported_as_not_checked(tmp_path):
    """A configuration whose outputs were never compared (the baseline did not deploy) was reported
    "judged by: threshold (60% exact ...)"."""
    _phase_, log, _ = _new_phase(tmp_path)
    why = "not checked: the no-speculation baseline did not deploy on h: timeout pulling the image"
    log.append(VerifyRecord(config=SpecConfig(spec_steps=3), host="h", passed=False, reasons=[why]))
    assert judged_by(log.state, "k3-t1") == why
    assert f"judged by: {why}" in "\n".join(report_section(log.state, True, True))


def test_a_redeploy_with_the_flag_keeps_the_flags_each_slot_runs_with(tmp_path):
    """Without an -e of sglang_server_extra_flags each host deploys with the inventory's own (an -e
    would replace them whole), so the exact round's redeploy adds the flag to those: a TLS, LoRA or
    DP setting of the host stays. Where the tuner cannot tell them (a template, nodes that differ)
    nothing is redeployed and the configuration is left unchecked with the reason."""
    import asyncio

    from tuner.run.inventory import Inventory

    inv = Inventory(
        hosts=["gpu1", "gpu2", "n1", "n2"],
        hostvars={
            "gpu1": {"sglang_server_extra_flags": {"attention-backend": "fa3"}},
            "gpu2": {"sglang_server_extra_flags": {"lora-paths": "{{ lora_dir }}"}},
            "n1": {"sglang_server_multinode_group": "pair", "sglang_server_extra_flags": {"dp-size": 2}},
            "n2": {"sglang_server_multinode_group": "pair"},
        },
        groups={"pair": ["n1", "n2"]},
    )
    assert inv.slot_extra_flags("gpu1") == {"attention-backend": "fa3"}
    assert "template" in str(inv.slot_extra_flags("gpu2"))
    assert "different" in str(inv.slot_extra_flags("pair"))
    phase, _log, _ = _new_phase(tmp_path, extra_flags=inv.slot_extra_flags)
    assert phase._deterministic_vars("gpu1") == {
        "sglang_server_extra_flags": {"attention-backend": "fa3", rules.DETERMINISTIC_FLAG: True}
    }
    rec = asyncio.run(phase._exact_one(_no_deploy, "gpu2", SpecConfig(spec_steps=2), True))
    assert rec is not None and rec.verdict["unchecked"] and rec.deploy_s is None
    assert "template" in rec.reasons[0]
    # an -e of the flags is what every host deploys with: the redeploy starts from it alone
    phase, _log, _ = _new_phase(tmp_path, extra_flags={"cuda-graph-max-bs": 64})
    assert phase._deterministic_vars("gpu1") == {
        "sglang_server_extra_flags": {"cuda-graph-max-bs": 64, rules.DETERMINISTIC_FLAG: True}
    }


def test_a_pick_no_hosts_role_runs_is_named_unchecked_with_the_reason(tmp_path, monkeypatch):
    """`--resume --limit` to hosts whose role refuses a pick (k3, measured on another host before):
    no host redeploys it, and the round said it was done with nothing left unchecked, so the report
    gave k3 an exact-round pass it never had. Now it is named under `unchecked`, with the reason,
    beside the pick that was checked."""
    import asyncio
    import contextlib
    from types import SimpleNamespace

    from sglang_utils.sglang_gate_report import GateReport

    from tuner.verify import gate

    async def fake_check(*_a: Any, **_kw: Any) -> dict[str, Any]:
        return {"passed": True, "reasons": [], "rule": {"mode": "exact"}}

    monkeypatch.setattr(gate, "check", fake_check)
    phase, log, progress = _threshold_phase(tmp_path)
    monkeypatch.setattr(phase, "_client", lambda *_a: contextlib.nullcontext(SimpleNamespace()))
    phase.baseline = {"server_version": "0.5.9", "deterministic": False, "model": "m"}
    phase.exact_baseline = {"deterministic": True}  # reused: nothing captured
    calls: list[tuple[str, str]] = []

    def deploy(cfg: SpecConfig, host: str, *, label: str, extravars: dict | None = None) -> Any:
        calls.append((label, host))
        return SimpleNamespace(ok=True, client_url="http://h:1", reason=None, gate=GateReport(), elapsed_s=0.1)

    asyncio.run(
        phase.exact_round(
            deploy,
            ["a", "b"],
            lambda: [SpecConfig(spec_steps=3), SpecConfig(spec_steps=2)],
            lambda: (set(log.state.verify_exact), set(log.state.verify)),
            runs=lambda cfg, _host: cfg.spec_steps != 3,
        )
    )
    assert [label for label, _ in calls] == ["verify-exact-k2-t1"]
    st = log.state
    verdict = st.verify_exact_round.verdict
    assert verdict["configs"] == 1 and verdict["unchecked"] == ["k3-t1"], verdict
    assert verdict["refused"] == ["k3-t1"] and not verdict["stopped"], verdict
    said = "k3-t1 (the role of every host refuses it) keep their threshold verdict only"
    assert any(said in ln for ln in progress.lines), progress.lines
    assert exact_json(st)["left_unchecked"] == ["k3-t1"]
    text = "\n".join(report_section(st, True, True))
    assert f"Not redeployed: {said}." in text, text

    # a --resume with the same hosts: nothing to redeploy and the same pick refused: nothing new, so
    # no second record (records.jsonl grows only with new facts); each resume had added one
    added: list[Any] = []
    real_append = log.append
    monkeypatch.setattr(log, "append", lambda rec: (added.append(rec), real_append(rec))[1])
    asyncio.run(
        phase.exact_round(
            deploy,
            ["a", "b"],
            lambda: [SpecConfig(spec_steps=3), SpecConfig(spec_steps=2)],
            lambda: (set(log.state.verify_exact), set(log.state.verify)),
            previous=verdict,
            runs=lambda cfg, _host: cfg.spec_steps != 3,
        )
    )
    assert [label for label, _ in calls] == ["verify-exact-k2-t1"] and added == [], added


def test_a_resume_whose_round_changes_the_reason_is_recorded_and_one_that_repeats_it_is_not(tmp_path, monkeypatch):
    """The round stopped at k2's failed redeploy and left k3 unchecked; a `--resume --limit` to hosts
    whose role refuses k3 redeploys nothing and leaves the same k3 unchecked, but now because every
    host refuses it. It added no record, so the round's record (the one the report and the next resume
    read) still said it had stopped at the failed redeploy. A resume that repeats that adds nothing."""
    import asyncio
    import contextlib
    from types import SimpleNamespace

    from sglang_utils.sglang_gate_report import GateReport

    phase, log, _progress = _threshold_phase(tmp_path)
    monkeypatch.setattr(phase, "_client", lambda *_a: contextlib.nullcontext(SimpleNamespace()))
    phase.baseline = {"server_version": "0.5.9", "deterministic": False, "model": "m"}
    phase.exact_baseline = {"deterministic": True}  # reused: nothing captured
    calls: list[str] = []

    def deploy(cfg: SpecConfig, host: str, *, label: str, extravars: dict | None = None) -> Any:
        calls.append(label)  # the unit does not come up
        return SimpleNamespace(ok=False, client_url=None, reason="unit failed", gate=GateReport(), elapsed_s=0.1)

    def picks() -> list[SpecConfig]:
        return [SpecConfig(spec_steps=2), SpecConfig(spec_steps=3)]

    def checked() -> tuple[set[str], set[str]]:
        return set(log.state.verify_exact), set(log.state.verify)

    def rounds() -> list[dict[str, Any]]:
        return [r.verdict for r in log.state.records if getattr(r, "role", None) == "exact_round"]

    asyncio.run(phase.exact_round(deploy, ["a"], picks, checked))
    first = log.state.verify_exact_round.verdict
    assert calls == ["verify-exact-k2-t1"] and first["unchecked"] == ["k3-t1"], first
    assert "redeploy failed on a: unit failed" in first["stopped"] and not first["refused"], first

    def refusing() -> None:
        asyncio.run(
            phase.exact_round(
                deploy,
                ["a", "b"],
                picks,
                checked,
                previous=dict(log.state.verify_exact_round.verdict),
                runs=lambda cfg, _host: cfg.spec_steps != 3,
            )
        )

    refusing()  # the same pick unchecked, for another reason: recorded
    assert calls == ["verify-exact-k2-t1"] and len(rounds()) == 2, rounds()
    now = log.state.verify_exact_round.verdict
    assert now["unchecked"] == ["k3-t1"] and now["refused"] == ["k3-t1"] and not now["stopped"], now
    refusing()  # all of it again: nothing new
    assert calls == ["verify-exact-k2-t1"] and len(rounds()) == 2, rounds()


def test_picks_past_the_cap_reached_over_a_resume_are_named_unchecked():
    """The cap is the sweep's, over resumes (`before`): a round that an earlier process left after
    three redeploys (a crash mid-round) makes one more on `--resume` and stops at the cap. The picks
    it leaves were said only when this process alone made EXACT_MAX_CONFIGS redeploys, so its record
    named nothing unchecked and report.md no pick kept at its threshold verdict."""
    import asyncio

    from tuner.data.store import MemoryStore
    from tuner.verify.phase import EXACT_MAX_CONFIGS

    log = MemoryStore()
    cfgs = [SpecConfig(k) for k in range(1, 9)]
    for cfg in cfgs[: EXACT_MAX_CONFIGS - 1]:  # the earlier process's redeploys, each a mismatch
        log.append(VerifyRecord(config=cfg, host="h", passed=False, role="exact", reasons=["mismatch"], deploy_s=1.0))
    asyncio.run(_mismatching_phase(log).exact_round(None, ["h"], *_failing_picks(log, cfgs)))
    st = log.state()
    assert len(st.verify_exact) == EXACT_MAX_CONFIGS
    rnd = st.verify_exact_round.verdict
    assert rnd["configs"] == 1 and rnd["unchecked"] == [c.config_id for c in cfgs[EXACT_MAX_CONFIGS:]], rnd
    text = "\n".join(report_section(st, True, True))
    assert "Not redeployed (the bound was reached): k5-t1" in text, text
