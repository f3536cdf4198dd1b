"""The schedule phase (tuner/decide/schedule_phase.py): which adaptive configurations to deploy after the
static sweep, and whether one earns the recommendation; the running-batch samples it rests on
(tuner/measure/metrics.py) and the adaptive configurations' identity and play variables (tuner/spec/configs.py).

The level data are shaped like the seed campaign (docs/reference/seed-campaign.md): steps 4 best at
low load, steps 3 at 16 and above, with the server's admission capping the running batch.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from tuner.data.records import DeployRecord, LevelRecord, SweepState
from tuner.decide import adaptive_phase, adaptive_search, analysis
from tuner.decide import schedule_phase as schedule_sweep
from tuner.measure.metrics import LevelMetrics, RequestTrace, parse_prometheus_gauges, running_batch
from tuner.spec.configs import SpecConfig

SEED_LIKE = {
    3: {1: 229.1, 4: 700.0, 16: 1650.0, 64: 1914.0},
    4: {1: 277.0, 4: 800.0, 16: 1600.0, 64: 1800.0},
}
# the batch the server ran (its /metrics gauge): admission caps it at 44 (k3) / 38 (k4)
RUNNING = {3: {1: 1, 4: 4, 16: 16, 64: 44}, 4: {1: 1, 4: 4, 16: 16, 64: 38}}
LEVELS = [1, 4, 16, 64]


def level(cfg: SpecConfig, c: int, tput: float, batch: float | None, half: float = 0.01) -> LevelRecord:
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
        ),
    )


def deploy(cfg: SpecConfig, version: str = "0.5.23", kv: int = 400000, running: int = 48) -> DeployRecord:
    return DeployRecord(
        config=cfg,
        host="h1",
        capacity={"max_total_num_tokens": kv, "max_running_requests": running},
        server={"version": version},
    )


def static_state(version: str = "0.5.23", gauge: bool = True) -> SweepState:
    recs: list = []
    for k, per in SEED_LIKE.items():
        cfg = SpecConfig(k)
        recs.append(deploy(cfg, version))
        recs += [level(cfg, c, v, RUNNING[k][c] if gauge else None) for c, v in per.items()]
    return SweepState.fold(recs)


def summary_parts(state: SweepState):
    stats = {k: p for k, p in analysis.aggregate(state.levels()).items() if not p.config.is_schedule}
    return stats, analysis.by_concurrency(stats, LEVELS)


def evidence_of(state: SweepState):
    stats, _ = summary_parts(state)
    every = analysis.aggregate(state.levels())
    return adaptive_phase.evidence(every, stats, state, LEVELS, "NEXTN", 512, 16)


def test_the_search_places_winners_at_the_batch_the_server_ran():
    ev = evidence_of(static_state())
    assert [(lv.concurrency, lv.batch, lv.winner) for lv in ev.levels] == [
        (1, 1, 4),
        (4, 4, 4),
        (16, 16, 3),
        (64, 44, 3),
    ]
    # one boundary between batch 4 (steps 4) and 16 (steps 3), on a captured CUDA-graph size
    pinned = adaptive_search.pinned_schedule(ev)
    assert pinned is not None and pinned.config.to_sglang() == {
        "1": {"candidate_steps": [4]},
        "8": {"candidate_steps": [3]},
    }
    cfg = SpecConfig.for_adaptive(pinned.config.to_sglang(), "NEXTN", 3)
    assert cfg.config_id == "sched-1k4-8k3" and cfg.spec_steps == 3  # starts at the high-load bucket's steps


def test_without_the_gauge_admission_caps_the_concurrency():
    ev = evidence_of(static_state(gauge=False))
    assert {lv.concurrency: lv.batch for lv in ev.levels}[64] == 48  # max_running_requests


def test_a_gauge_read_once_or_twice_is_not_taken_for_the_batch():
    """A short level's gauge sampled twice read 6 at C=32 on a server with room for 48 (SGLang sets it
    at every prefill to the batch before the new requests join): too few samples, admission decides."""
    cfg = SpecConfig(3)
    few = level(cfg, 32, 1600.0, 6.0)
    few.metrics.running_reqs_samples = 2
    p = analysis.aggregate([few])[(cfg.config_id, 32)]
    batch, why = schedule_sweep.level_batch(p, 48)
    assert batch == 32.0 and "fewer than 5 samples" in why
    p = analysis.aggregate([level(cfg, 32, 1600.0, 6.0)])[(cfg.config_id, 32)]  # 20 samples: the gauge
    assert schedule_sweep.level_batch(p, 48)[0] == 6.0


@pytest.mark.parametrize(
    ("version", "algorithm", "why"),
    [
        ("0.5.9", "NEXTN", "arrived in 0.5.13"),
        ("0.5.12", "NEXTN", "arrived in 0.5.13"),
        # 0.5.13 reads per-batch-size configs but refuses a 0-step bucket, which the schedules use
        ("0.5.13", "NEXTN", "it loads from 0.5.14"),
        ("0.5.23", "NGRAM", "only with EAGLE, EAGLE3, NEXTN"),
    ],
)
def test_phase_is_skipped_where_sglang_cannot_run_it(version, algorithm, why):
    state = static_state(version)
    plan = adaptive_phase.plan_envelope(state, {"k3-t1", "k4-t1"}, algorithm, 4)
    assert plan.configs == [] and why in (plan.skipped or "")


def test_one_winner_everywhere_builds_no_pinned_schedule_but_measures_sglangs_default():
    cfg = SpecConfig(3)
    state = SweepState.fold([deploy(cfg)] + [level(cfg, c, 100.0 * c, c) for c in LEVELS])
    assert adaptive_search.pinned_schedule(evidence_of(state)) is None
    plan = adaptive_phase.plan_envelope(state, {"k3-t1"}, "NEXTN", 4)
    assert [c.config_id for c in plan.configs] == ["adaptive-default", "k0"]


def with_adaptive(state: SweepState, sched_tput: dict[int, float], default_tput: dict[int, float], half=0.01):
    sched = SpecConfig.for_schedule(((1, 4), (8, 3)))
    default = SpecConfig.default_adaptive()
    recs = list(state.records) + [deploy(sched, kv=300000), deploy(default, kv=350000)]
    recs += [level(sched, c, v, None, half) for c, v in sched_tput.items()]
    recs += [level(default, c, v, None, half) for c, v in default_tput.items()]
    return SweepState.fold(recs), sched, default


def judge(state: SweepState, target=None):
    every = analysis.aggregate(
        state.levels(), capacity={cid: d.max_total_num_tokens for cid, d in state.deploys.items()}
    )
    static_stats = {k: p for k, p in every.items() if not p.config.is_schedule}
    static = analysis.recommend(static_stats, LEVELS, target)
    capacity = {cid: d.max_total_num_tokens for cid, d in state.deploys.items()}
    return static, schedule_sweep.judge(every, static, LEVELS, target, capacity)


def test_schedule_that_takes_each_levels_best_beats_the_static_compromise():
    # the schedule runs each level at its winner's throughput: better than any one static depth
    best = {c: max(SEED_LIKE[3][c], SEED_LIKE[4][c]) for c in LEVELS}
    state, sched, _ = with_adaptive(static_state(), best, {c: 0.9 * v for c, v in best.items()})
    static, v = judge(state)
    assert v is not None and v.recommended and v.chosen == sched
    assert "beyond noise" in v.reason and static.chosen.config_id in v.reason
    assert set(v.per_level[1]) == {"best_static", "schedule", "default_adaptive"}
    assert "worse beyond noise" in v.each["adaptive-default"]


def test_a_schedule_within_noise_of_the_static_depth_is_not_recommended():
    static_state_ = static_state()
    stats, _ = summary_parts(static_state_)
    static = analysis.recommend(stats, LEVELS, None)
    same = {c: SEED_LIKE[static.chosen.spec_steps][c] * 1.002 for c in LEVELS}
    state, _, _ = with_adaptive(static_state_, same, {c: 0.5 * v for c, v in same.items()}, half=0.03)
    _, v = judge(state)
    assert not v.recommended and v.chosen is None
    assert "tied within noise" in v.reason and "stays" in v.reason
    # the capacity the schedule's buffers cost is said
    assert "KV pool holds 300000 tokens against 400000" in v.reason


def test_a_capacity_starved_schedule_loses_at_high_load():
    best = {c: max(SEED_LIKE[3][c], SEED_LIKE[4][c]) for c in LEVELS}
    starved = {**best, 64: 1200.0}  # the deep bucket's buffers left too little KV at C=64
    state, _, _ = with_adaptive(static_state(), starved, {c: 0.5 * v for c, v in best.items()})
    _, v = judge(state, target=[64])
    assert not v.recommended and "worse beyond noise" in v.each["sched-1k4-8k3"]


def test_sglangs_default_can_win_and_is_then_what_is_recommended():
    best = {c: max(SEED_LIKE[3][c], SEED_LIKE[4][c]) for c in LEVELS}
    state, _, default = with_adaptive(
        static_state(), {c: 0.95 * v for c, v in best.items()}, {c: 1.2 * v for c, v in best.items()}
    )
    _, v = judge(state)
    assert v.recommended and v.chosen == default


def test_adaptive_configurations_identity_and_play_variables():
    sched = SpecConfig.for_schedule(((1, 4), (16, 3)))
    assert sched.config_id == "sched-1k4-16k3" and sched.is_schedule
    ev = sched.extravars()
    assert json.loads(ev["spec_schedule"]) == {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}
    assert "spec_steps" not in ev and ev["spec_topk"] == 1
    assert SpecConfig.from_json(json.loads(json.dumps(sched.to_json()))) == sched
    default = SpecConfig.default_adaptive()
    assert default.extravars()["spec_schedule"] == "default" and default.config_id == "adaptive-default"
    # SGLang 0.5.23 starts its default config at the middle of the candidates' union [0, 1, 3, 5, 7]
    assert default.spec_steps == 3
    assert SpecConfig.from_json(default.to_json()) == default
    assert not SpecConfig(3).is_schedule and "spec_schedule" not in SpecConfig(3).to_json()
    assert sched.series != SpecConfig(3).series  # never on a static depth's early-stop series


def test_gauges_take_the_largest_scheduler_and_the_steady_span():
    text = "\n".join(
        [
            "# TYPE sglang:num_running_reqs gauge",
            'sglang:num_running_reqs{tp_rank="0",dp_rank="0"} 12.0',
            'sglang:num_running_reqs{tp_rank="0",dp_rank="1"} 14.0',
            "sglang:num_queue_reqs 3",
        ]
    )
    assert parse_prometheus_gauges(text) == {"num_running_reqs": 14.0}
    # samples before the first completion (ramp-up) and after the loop stopped sending (tail) are left out
    traces = [
        RequestTrace(index=0, sent=0.0, chunk_times=[0.1, 2.0], ended=2.0),
        RequestTrace(index=1, sent=0.0, chunk_times=[0.2, 9.5], ended=9.5),
    ]
    samples = [(0.5, 0.0), (1.0, 0.0), (2.5, 24.0), (3.0, 23.0), (3.5, 0.0), (4.0, 24.0), (9.0, 2.0)]
    p90, mean, n = running_batch(samples, traces, until=5.0)
    assert (p90, n) == (24.0, 4) and mean == pytest.approx((24 + 23 + 0 + 24) / 4, abs=0.01)
    assert running_batch([], traces, None) == (None, None, 0)


def test_a_short_level_keeps_only_the_gauge_samples_its_requests_were_in_flight_for():
    """The gauge holds what SGLang's last stats log set: a scrape sent before the level's first token
    reads the level before (here 17), one sent after its last request ended reads nothing of it."""
    # a 32-wide level over before its first completion's span held a sample (the loop stopped at 0.9)
    wave = [
        RequestTrace(index=i, sent=0.0, chunk_times=[0.15 + i / 100, 0.9 + i / 100], ended=0.9 + i / 100)
        for i in range(32)
    ]
    stale, inside, after = (0.01, 17.0), (0.5, 12.0), (1.4, 3.0)
    assert running_batch([stale, inside, after], wave, until=0.9) == (12.0, 12.0, 1)
    # only the leftover and a scrape after the end: nothing rather than a stale number
    assert running_batch([stale, after], wave, until=0.9) == (None, None, 0)
    # a level whose requests all failed before any token: no sample can be its own
    failed = [RequestTrace(index=0, sent=0.0, ended=0.2, error="HTTP 503")]
    assert running_batch([stale, (0.1, 4.0)], failed, until=0.2) == (None, None, 0)


def test_a_schedule_sglang_ran_static_is_not_judged_or_recommended_under_its_name():
    """SGLang turns adaptive speculation off with only a warning where it cannot run it (e.g. a model
    override to multi-layer EAGLE: 0.5.23 arg_groups/speculative_hook.py) and serves the launch
    depth; the gate reads `speculative.adaptive` false. Its numbers are a static depth's, so the
    schedule competes nowhere: no verdict, no recommendation under the schedule's name."""
    best = {c: max(SEED_LIKE[3][c], SEED_LIKE[4][c]) for c in LEVELS}
    state, sched, _ = with_adaptive(static_state(), best, {c: 0.5 * v for c, v in best.items()})
    # as it ran: the same numbers win when the server said it ran adaptive
    _, v = judge(state)
    assert v.recommended and v.chosen == sched
    recs = list(state.records)
    i = next(i for i, r in enumerate(recs) if isinstance(r, DeployRecord) and r.config_id == sched.config_id)
    recs[i] = dataclasses.replace(recs[i], speculative={"enabled": True, "adaptive": False, "num_steps": 4})
    fell_back = SweepState.fold(recs)
    every = analysis.aggregate(fell_back.levels())
    analysis.mark_outcomes(every, fell_back)
    why = analysis.exclusions([every[(sched.config_id, 1)]])
    assert why == {
        sched.config_id: "the server ran it without adaptive speculation (SGLang turned it off: see its warnings)"
    }
    static = analysis.recommend({k: p for k, p in every.items() if not p.config.is_schedule}, LEVELS, None)
    v = schedule_sweep.judge(every, static, LEVELS, None, {})
    assert v is not None and not v.recommended and v.chosen is None
    assert "does not compete" in v.each[sched.config_id], v.each
