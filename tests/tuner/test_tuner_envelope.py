"""The envelope and the recommendation kinds (tuner/decide/envelope.py), and the schedule phase's
stages within their budget (tuner/decide/adaptive_phase.py).

Level data are shaped like the bench machines: deep speculation wins at low load, a true
no-speculation server from concurrency 16 up (its running batch is not capped at the 48 SGLang
gives a speculative server)."""

from __future__ import annotations

import json

import pytest

from tuner.data.records import DeployRecord, LevelRecord, SweepState
from tuner.decide import adaptive_phase, analysis, envelope
from tuner.measure.metrics import LevelMetrics
from tuner.spec.configs import SpecConfig

LEVELS = [1, 4, 16, 64]
K0, K2, K3 = SpecConfig(0), SpecConfig(2), SpecConfig(3)
DEFAULT = SpecConfig.default_adaptive()
TUNED = SpecConfig.for_adaptive({"1": {"candidate_steps": [2, 3, 4]}, "8": {"candidate_steps": [0]}}, "NEXTN", 2)
# (tok/s, running batch, accept length) per level
DATA = {
    K0: {1: (160, 1, 1.0), 4: (590, 4, 1.0), 16: (1800, 16, 1.0), 64: (3730, 64, 1.0)},
    K2: {1: (209, 1, 2.07), 4: (721, 4, 2.07), 16: (1700, 16, 2.08), 64: (2875, 48, 2.08)},
    K3: {1: (220, 1, 2.36), 4: (722, 4, 2.36), 16: (1660, 16, 2.35), 64: (2606, 48, 2.35)},
}


def level(cfg: SpecConfig, c: int, tput: float, batch: float, acc: float, half: float = 0.01) -> LevelRecord:
    return LevelRecord(
        config=cfg,
        concurrency=c,
        repeat=1,
        metrics=LevelMetrics(
            concurrency=c,
            requests=4 * c,
            requests_ok=4 * c,
            output_tok_s=tput,
            output_tok_s_ci_low=tput * (1 - half),
            output_tok_s_ci_high=tput * (1 + half),
            samples=4 * c,
            per_request_tok_s=tput / c,
            status="ok",
            running_reqs_p90=batch,
            running_reqs_samples=0 if batch is None else 20,
            accept_length=acc,
        ),
    )


def deploy(cfg: SpecConfig, kv: int, running: int = 48) -> DeployRecord:
    return DeployRecord(
        config=cfg,
        host="h1",
        capacity={"max_total_num_tokens": kv, "max_running_requests": running},
        server={"version": "0.5.23"},
    )


KV = {K0: 400000, K2: 360000, K3: 340000, DEFAULT: 340000, TUNED: 360000}


def state_with(extra: dict[SpecConfig, dict[int, tuple]] | None = None) -> SweepState:
    recs: list = []
    for cfg, per in {**DATA, **(extra or {})}.items():
        recs.append(deploy(cfg, KV[cfg], 200 if cfg is K0 else 48))
        recs += [level(cfg, c, *v) for c, v in per.items()]
    return SweepState.fold(recs)


def views(state: SweepState):
    capacity = {cid: d.max_total_num_tokens for cid, d in state.deploys.items()}
    every = analysis.aggregate(state.levels(), capacity=capacity)
    static = {k: p for k, p in every.items() if not p.config.is_schedule}
    return every, static, analysis.recommend(static, LEVELS, None)


def test_a_tuned_config_that_beats_everything_beyond_noise_is_recommended_as_tuned():
    tuned = {1: (240, 1, 2.6), 4: (800, 4, 2.5), 16: (1800, 16, 1.0), 64: (3100, 48, 1.0)}
    default = {1: (218, 1, 2.36), 4: (735, 4, 2.38), 16: (1760, 16, 2.36), 64: (3105, 48, 1.67)}
    every, static, rec = views(state_with({TUNED: tuned, DEFAULT: default}))
    pick = envelope.choose(every, rec, LEVELS, None)
    assert pick.kind == "adaptive_tuned" and pick.chosen.config_id == TUNED.config_id
    assert "beyond noise" in pick.reason and TUNED.config_id in pick.score_ci


def test_ties_go_to_the_simpler_kind():
    # the default and a tuned config tied within noise, both above the best static depth: the default
    same = {1: (240, 1, 2.6), 4: (800, 4, 2.5), 16: (1800, 16, 1.0), 64: (3100, 48, 1.0)}
    close = {c: (v[0] * 1.003, v[1], v[2]) for c, v in same.items()}
    every, static, rec = views(state_with({TUNED: close, DEFAULT: same}))
    pick = envelope.choose(every, rec, LEVELS, None)
    assert pick.kind == "adaptive_default" and TUNED.config_id in pick.tied_with
    # everything within noise of the static depth: the static depth
    flat = {
        c: (next(p for (cid, cc), p in static.items() if cid == rec.chosen.config_id and cc == c).mean, 1, 2.0)
        for c in LEVELS
    }
    every, static, rec = views(state_with({TUNED: flat, DEFAULT: flat}))
    pick = envelope.choose(every, rec, LEVELS, None)
    assert pick.kind in ("static", "no_speculation") and pick.chosen.config_id == rec.chosen.config_id
    assert "simpler" in pick.reason


def test_at_one_high_load_target_no_speculation_is_recommended_as_such():
    default = {c: (v[0] * 0.9, v[1], 1.7) for c, v in DATA[K2].items()}
    every, static, _ = views(state_with({DEFAULT: default}))
    rec = analysis.recommend(static, LEVELS, [64])
    pick = envelope.choose(every, rec, LEVELS, [64])
    assert pick.kind == "no_speculation" and pick.chosen.config_id == "k0"


def test_the_envelope_says_who_wins_each_level_from_the_measurements():
    default = {1: (218, 1, 2.36), 4: (735, 4, 2.38), 16: (1760, 16, 2.36), 64: (3105, 48, 1.67)}
    every, static, rec = views(state_with({DEFAULT: default}))
    env = envelope.build(every, static, rec.chosen, rec.chosen, LEVELS)
    assert set(env.rows[64]) == {
        "recommended",
        "level_best_static",
        "best_static",
        "default_adaptive",
        "no_speculation",
    }
    assert env.words[64].startswith("no speculation wins beyond noise (3730 tok/s): it ran batch 64 without a draft")
    assert "ran depth" in env.words[1]
    # the default's depth is read from its accept length against the static depths'
    assert "SGLang's default" in env.words[4] and "ran depth 3.2 at batch 4 (accept length 2.38)" in env.words[4]
    assert "no speculation wins beyond noise from concurrency 16 up (batch 16)" in env.summary
    doc = env.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    cell = doc["per_level"]["64"]["no_speculation"]
    assert cell["kind"] == "no_speculation" and cell["running_batch"] == 64 and len(cell["output_tok_s_ci95"]) == 2
    assert doc["per_level"]["1"]["who_wins"] == env.words[1]


def test_a_tuned_schedule_no_column_shows_still_ties_the_levels_winner():
    """The static recommendation's level (k2 at C=4, 721 tok/s, the only column there) against a
    tuned schedule measured there too, not recommended, at 722: the words said "wins beyond noise"
    against the static depths alone; now the schedule measured at the level is a rival as well."""
    tuned = {1: (150, 1, 2.6), 4: (722, 4, 2.5), 16: (1500, 16, 1.0), 64: (2500, 48, 1.0)}
    every, static, rec = views(state_with({TUNED: tuned}))
    env = envelope.build(every, static, rec.chosen, rec.chosen, LEVELS)
    assert "wins beyond noise" not in env.words[4], env.words[4]
    assert "tied within noise with" in env.words[4] and TUNED.label in env.words[4], env.words[4]


def test_kv_warning_when_the_widest_candidate_costs_more_than_a_tenth_of_the_pool():
    every, static, rec = views(state_with())
    best = next(p for p in static.values() if p.config_id == "k2-t1")
    pools = {0: 400000, 2: 360000, 3: 340000}
    assert envelope.kv_warning(TUNED, best, pools, 3) is None  # 340000 against 360000: 5.6%
    assert "costs 11%" in envelope.kv_warning(TUNED, best, pools, 4)  # 320000 on the line through the pools
    wide = envelope.kv_warning(TUNED, best, pools, 9)
    assert wide and "depth 9" in wide and "extrapolated" in wide
    assert envelope.kv_warning(K3, best, pools, 9) is None  # a static recommendation has nothing to warn of
    # the line through the static pools reaches no pool by depth 20: said as the line's, not a count
    assert "leave no KV pool at the widest candidate's depth (20)" in envelope.kv_warning(TUNED, best, pools, 20)
    # the adaptive deployment's own pool is what it holds: read before any line through the others
    assert envelope.kv_warning(TUNED, best, pools, 20, own=370000) is None
    assert "costs 17%" in envelope.kv_warning(TUNED, best, pools, 3, own=300000)
    assert "measured on its own deployment" in envelope.kv_warning(TUNED, best, pools, 3, own=300000)


def test_the_envelope_stage_adds_no_speculation_only_when_the_sweep_lacks_it_and_respects_the_budget():
    state = state_with()
    ids = {c.config_id for c in (K2, K3)}
    plan = adaptive_phase.plan_envelope(state, ids, "NEXTN", 4)
    assert [c.config_id for c in plan.configs] == ["adaptive-default", "k0"]
    assert [c.config_id for c in adaptive_phase.plan_envelope(state, ids | {"k0"}, "NEXTN", 4).configs] == [
        "adaptive-default"
    ]
    assert [c.config_id for c in adaptive_phase.plan_envelope(state, ids, "NEXTN", 1).configs] == ["adaptive-default"]
    assert adaptive_phase.plan_envelope(state, ids, "NEXTN", 0).skipped
    assert "NGRAM" in (adaptive_phase.plan_envelope(state, ids, "NGRAM", 4).skipped or "")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ({"enable-two-batch-overlap": True}, "enable-two-batch-overlap: SGLang runs the server static instead"),
        ({"enable-dp-attention": True, "dp-size": 2}, "DP attention: SGLang runs the server static instead"),
        ({"lora-paths": "chat=/models/lora-chat"}, "SGLang refuses LoRA with --speculative-adaptive at start"),
    ],
    ids=["two-batch-overlap", "dp-attention", "lora"],
)
def test_the_phase_deploys_no_schedule_the_role_refuses_on_every_host(flags, words):
    """A host whose flags SGLang runs a schedule static beside (or refuses it with): the role refuses
    every adaptive deployment there (sglang_flags.py adaptive_fallback_errors), and the phase planned
    SGLang's default and tuned configs anyway, each failing in the play's preflight. Now both stages
    say why they deploy none; a second host that can run them keeps the phase."""
    from tuner_testlib import ROOT

    from tuner.run.inventory import Inventory
    from tuner.spec.configs import ConfigPlan
    from tuner.spec.refusals import NODE_VARS, role_defaults

    host = {"sglang_server_sglang_version": "0.5.23", "sglang_server_extra_flags": flags}
    default = {1: (218, 1, 2.36), 4: (735, 4, 2.38), 16: (1760, 16, 2.36), 64: (3105, 48, 1.67)}
    state = state_with({DEFAULT: default})
    every, static, _ = views(state)
    ids = {c.config_id for c in (K2, K3)}

    def stages(hostvars: dict) -> tuple[adaptive_phase.StagePlan, adaptive_phase.StagePlan]:
        inv = Inventory(hosts=list(hostvars), hostvars=hostvars, groups={}, has_group=True)
        refused = ConfigPlan(nodes=inv.slot_nodes(NODE_VARS, {}, role_defaults(ROOT))).refusal
        envelope_plan = adaptive_phase.plan_envelope(state, ids, "NEXTN", 4, refused)
        tuned = adaptive_phase.plan_tuned(every, static, state, LEVELS, "NEXTN", 4, 512, 16, lambda d: 2, ids, refused)
        return envelope_plan, tuned

    for plan in stages({"gpu1": host}):
        assert plan.configs == [] and plan.skipped is not None, plan
        assert plan.skipped.startswith("the role refuses an adaptive deployment on every host: ")
        assert words in plan.skipped
    env, tuned = stages({"gpu1": host, "gpu2": {"sglang_server_sglang_version": "0.5.23"}})
    assert [c.config_id for c in env.configs] == ["adaptive-default", "k0"] and tuned.skipped is None


@pytest.mark.parametrize("budget, new", [(4, 2), (3, 1), (2, 0)])
def test_the_search_stage_fills_what_the_budget_leaves(budget, new):
    default = {1: (218, 1, 2.36), 4: (735, 4, 2.38), 16: (1760, 16, 2.36), 64: (3105, 48, 1.67)}
    state = state_with({DEFAULT: default})
    every, static, _ = views(state)
    ids = {c.config_id for c in (K2, K3)}  # k0 came from the envelope stage: it counts
    plan = adaptive_phase.plan_tuned(every, static, state, LEVELS, "NEXTN", budget, 512, 16, lambda doc: 2, ids)
    assert len(plan.configs) <= new
    assert all(c.is_schedule and not c.adaptive for c in plan.configs)
    for c in plan.configs:  # a ladder names its launch depth, one of its candidates, for the role
        if c.ladder is not None:
            doc = json.loads(c.ladder)
            assert c.extravars()["spec_steps"] in {s for e in doc.values() for s in e["candidate_steps"]}
    if new:
        assert any("C=4" in line and "SGLang's default ran depth" in line for line in plan.lines)
    else:
        assert any("no room left" in line for line in plan.lines)
    # a resumed sweep finishes what it deployed and counts it
    if plan.configs:
        first = plan.configs[0]
        resumed = SweepState.fold([*state.records, deploy(first, 360000)])
        again = adaptive_phase.plan_tuned(every, static, resumed, LEVELS, "NEXTN", budget, 512, 16, lambda doc: 2, ids)
        assert again.configs[0] == first and len(again.configs) <= new


def test_a_tuned_ladder_is_deployed_at_the_launch_depth_its_kv_cost_was_checked_at():
    # The seed's pools fall ~80k tokens a step (k0 535591, k2 377207, k3 295931: none at 7), and
    # SGLang's default ran depth ~7 at every level and won: the ladder centred there cannot launch at
    # the role's rule (its middle candidate, 7, whose server has no pool); it names the deepest
    # candidate whose pool holds the workload, and that is what the role is given (spec_steps).
    from sglang_utils.sglang_adaptive import launch_steps

    levels = [1, 4]
    data = {
        K0: {1: (109, 1, 1.0), 4: (394, 4, 1.0)},
        K2: {1: (151, 1, 2.95), 4: (523, 4, 2.96)},
        K3: {1: (188, 1, 3.84), 4: (635, 4, 3.89)},
        DEFAULT: {1: (300, 1, 7.31), 4: (922, 4, 7.47)},
    }
    pools = {K0: 535591, K2: 377207, K3: 295931, DEFAULT: 295931}
    recs: list = []
    for cfg, per in data.items():
        recs.append(deploy(cfg, pools[cfg], 30 if cfg is K0 else 17))
        recs += [level(cfg, c, *v) for c, v in per.items()]
    state = SweepState.fold(recs)
    capacity = {cid: d.max_total_num_tokens for cid, d in state.deploys.items()}
    every = analysis.aggregate(state.levels(), capacity=capacity)
    static = {k: p for k, p in every.items() if not p.config.is_schedule}
    ids = {"k0", "k2-t1", "k3-t1"}
    plan = adaptive_phase.plan_tuned(every, static, state, levels, "NEXTN", 4, 160, 16, launch_steps, ids)
    ladders = [c for c in plan.configs if c.ladder is not None]
    assert ladders, plan.lines
    for c in ladders:
        doc = json.loads(c.ladder)
        assert launch_steps(doc) * 80000 > 535591  # the role's own rule would start without a pool
        assert c.extravars()["spec_steps"] == c.spec_steps
        assert c.spec_steps in {s for e in doc.values() for s in e["candidate_steps"]}
        assert 535591 - 80000 * c.spec_steps > 160  # on the line through the pools, it holds a request
        assert SpecConfig.from_json(c.to_json()) == c  # a resumed sweep launches it there again


def test_a_pinned_schedule_that_names_another_launch_depth_keeps_it():
    doc = {"1": {"candidate_steps": [5]}, "8": {"candidate_steps": [3]}}
    plain = SpecConfig.for_adaptive(doc, "NEXTN", 3)  # the role's rule: the high-load bucket's depth
    assert plain.schedule == ((1, 5), (8, 3)) and "spec_steps" not in plain.extravars()
    moved = SpecConfig.for_adaptive(doc, "NEXTN", 5)
    assert moved.ladder is not None and moved.extravars()["spec_steps"] == 5
    assert SpecConfig.from_json(moved.to_json()) == moved and SpecConfig.from_json(plain.to_json()) == plain


def _tuned_fast() -> dict[int, tuple]:
    return {1: (300, 1, 2.6), 4: (900, 4, 2.5), 16: (2000, 16, 1.0), 64: (4000, 48, 1.0)}


@pytest.mark.parametrize("target", [[1], None], ids=["one target level", "every level"])
@pytest.mark.parametrize("why", ["gate", "slo"])
def test_a_faster_adaptive_config_that_does_not_compete_is_never_the_recommendation(target, why):
    """The tuned config is faster everywhere but failed the correctness gate (or misses the SLO):
    with one target level as with several, the recommendation is the best static depth."""
    from tuner.spec.slo import SloResult

    every, static, _ = views(state_with({TUNED: _tuned_fast()}))
    for (cid, _c), p in every.items():
        if why == "gate" and cid == TUNED.config_id:
            p.verify_failed = "outputs differ"
        if why == "slo":
            p.slo = SloResult(
                meets=cid != TUNED.config_id, goodput_tok_s=p.mean, attainment=1.0, observed={}, requests=4
            )
    rec = analysis.recommend(static, LEVELS, target)
    pick = envelope.choose(every, rec, LEVELS, target)
    assert pick.chosen is not None and pick.chosen.config_id != TUNED.config_id, pick.reason
    assert pick.kind == "static"


def test_the_envelopes_words_never_crown_a_cell_that_does_not_compete():
    from tuner.spec.slo import SloResult

    st_ = state_with({DEFAULT: {1: (400, 1, 7.6), 4: (700, 4, 2.5), 16: (1650, 16, 1.5), 64: (2600, 48, 1.0)}})
    every, static, rec = views(st_)
    for (cid, c), p in every.items():  # SGLang's default misses the SLO at C=1, the rest meet it
        meets = not (cid == DEFAULT.config_id and c == 1)
        p.slo = SloResult(meets=meets, goodput_tok_s=p.mean, attainment=1.0, observed={}, requests=4)
    env = envelope.build(every, static, rec.chosen, rec.chosen, LEVELS)
    assert "SGLang's default wins" not in env.words[1], env.words[1]
    assert not any("SGLang's default wins concurrency 1" in line for line in envelope.summary_lines(env))


def test_the_pick_names_the_configuration_its_reason_names_when_the_first_level_is_left_out():
    """C=1: nothing competes (every cell there lost a request) and the tuned config has no cell
    there; it wins the other levels beyond noise. The pick's cell is its own, from a scored level."""
    every, static, _ = views(state_with({TUNED: {4: (900, 4, 2.5), 16: (2000, 16, 1.0), 64: (4000, 48, 1.0)}}))
    for (_cid, c), p in every.items():
        if c == 1:
            for lv in p.levels:
                lv.metrics.status = "partial"
                lv.metrics.requests_failed = 1
    rec = analysis.recommend(static, LEVELS, None)
    assert rec.chosen is not None and "left_out" in rec.workload
    pick = envelope.choose(every, rec, LEVELS, None)
    assert pick.kind == "adaptive_tuned"
    assert pick.chosen is not None and pick.chosen.config_id == TUNED.config_id, (pick.chosen, pick.reason)


def test_the_best_chain_a_schedule_would_pin_is_one_that_competes():
    """Where a tree wins a level the model search measures chains against the best chain, and a
    tuned schedule is built around it: a chain that failed the correctness gate is neither."""
    from tuner.decide.search.decide import schedule_chains

    state = state_with()
    every, static, _ = views(state)
    before = schedule_chains(static, state, "NEXTN")
    assert before is not None and 1 in before
    wrong = before[1].config_id
    for (cid, _c), p in static.items():
        if cid == wrong:
            p.verify_failed = "outputs differ"
    after = schedule_chains(static, state, "NEXTN")
    assert after is not None and all(p.config_id != wrong for p in after.values()), after
    ev = adaptive_phase.evidence(every, static, state, LEVELS, "NEXTN", 512, 16)
    at1 = next(lv for lv in ev.levels if lv.concurrency == 1)
    assert at1.winner != before[1].spec_steps and before[1].spec_steps not in at1.tied, at1


def test_wins_beyond_noise_holds_against_every_static_depth_not_only_the_columns():
    """No speculation the only column at C=64 (the level's pick, the best single depth and no
    speculation all k0), with k1 (no column) tied with it: the envelope said "no speculation wins
    beyond noise" where the level's verdict in the same report said "tied within noise with k1-t1"."""
    k1 = SpecConfig(1)
    cells = analysis.aggregate([level(K0, 64, 3730, 64, 1.0, half=0.05), level(k1, 64, 3650, 64, 1.7, half=0.05)])
    p0, p1 = cells[("k0", 64)], cells[("k1-t1", 64)]
    row = {"recommended": p0, "level_best_static": p0, "best_static": p0, "no_speculation": p0}
    # the columns alone hold one configuration: nothing to win against, not "beyond noise"
    assert envelope.who_wins(row, {}).startswith("no speculation is the only configuration here that competes")
    words = envelope.who_wins(row, {}, [p0, p1])
    assert words.startswith("no speculation is fastest, tied within noise with k=1"), words
    env = envelope.Envelope(rows={64: row}, rivals={64: [p0, p1]})
    assert not any("wins beyond noise" in line for line in envelope.summary_lines(env))
    # without the rival it is alone there: no "wins beyond noise from concurrency 64 up" either
    assert envelope.summary_lines(envelope.Envelope(rows={64: row})) == []


def test_envelope_ties_do_not_chain():
    """A static k2 at 700 +-1%, a schedule A at 760 +-10% and a schedule B at 720 +-1%: A (the top)
    beats neither, but B beats k2 beyond noise, so k2 is not tied with the choice's field and the
    simpler kind may not take it (as analysis.choose_for_level: ties do not chain). The choice fell
    to k2, "tied within noise with" B whose interval lies wholly above it."""
    from tuner.data.records import SweepState
    from tuner.decide import analysis, envelope
    from tuner.spec.configs import SpecConfig

    k2 = SpecConfig(2)
    a = SpecConfig.for_adaptive({"1": {"candidate_steps": [2, 3, 4]}, "8": {"candidate_steps": [0]}}, "NEXTN", 2)
    b = SpecConfig.for_adaptive({"1": {"candidate_steps": [3, 4]}, "8": {"candidate_steps": [1]}}, "NEXTN", 2)
    recs = [deploy(k2, 360000), level(k2, 4, 700, 4, 2.0, half=0.01)]
    recs += [deploy(a, 360000), level(a, 4, 760, 4, 2.0, half=0.10)]
    recs += [deploy(b, 360000), level(b, 4, 720, 4, 2.0, half=0.01)]
    every = analysis.aggregate(SweepState.fold(recs).levels())
    static = {key: p for key, p in every.items() if not p.config.is_schedule}
    choice = envelope.choose(every, analysis.recommend(static, [4], [4]), [4], [4])
    assert every[(b.config_id, 4)].beats(every[(k2.config_id, 4)])
    assert choice.chosen is not None and choice.chosen.config_id == a.config_id and choice.kind != "static"
    # tied with the choice: what its interval overlaps (k2 overlaps A's wide one; B does too)
    assert sorted(choice.tied_with) == sorted([k2.config_id, b.config_id])


def test_the_report_tabulates_and_the_noise_note_counts_every_cell_adaptive_ones_too(tmp_path):
    """The kept schedule-phase sweep of the seed machine (bench/schedule_vs_static/seed): its report's
    "Results (every cell ...)" table and its noise note covered the 25 static cells only, leaving out
    the 15 of the three adaptive configurations, one of them the recommendation, and the widest
    interval (SGLang's default at C=64, +-2.91%)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    kept = Path(__file__).resolve().parents[2] / "bench" / "schedule_vs_static" / "seed"
    out = tmp_path / "seed"
    shutil.copytree(kept, out)
    subprocess.run([sys.executable, "-m", "tuner", "report", str(out)], check=True, capture_output=True)
    report = (out / "report.md").read_text()
    table = report.split("## Results (every cell")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| steps")]
    assert len(rows) == 40
    assert sum(r.startswith("| SGLang default adaptive |") for r in rows) == 5
    assert sum(r.startswith("| adaptive B>=1: [5, 7, 9], B>=8: k=3, B>=30: k=0 |") for r in rows) == 5
    noise = json.loads((out / "recommendation.json").read_text())["noise"]
    assert (noise["cells"], noise["max_precision_pct"]) == (40, 2.91)
    assert "a row per configuration x temperature x concurrency x deployment x repeat (x host and attempt" in report
