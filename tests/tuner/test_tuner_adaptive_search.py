"""The adaptive configurations the schedule phase tries (tuner/decide/adaptive_search.py): ladders,
SGLang's EMA rule, hysteresis only where it changes the outcome, the widest candidate's KV charge."""

from __future__ import annotations

import json

import pytest

from tuner.decide import adaptive_search as a
from tuner.spec.configs import SpecConfig

SIZES = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4))
# accept lengths (tokens per verify step) of a draft that is almost always right (the seed profile)
EASY = {1: 1.98, 2: 2.95, 3: 3.9, 4: 4.85, 5: 5.8}
# ... and of one whose acceptance falls with the position (the no-spec-high-load bench machine)
HARD = {1: 1.66, 2: 2.07, 3: 2.36, 4: 2.51, 5: 2.66, 6: 2.72}


def test_json_shape_is_sglangs_per_bs_config_and_round_trips():
    cfg = a.AdaptiveConfig((a.Bucket(1, (3, 5, 7), up_hysteresis=0.3), a.Bucket(16, (2,))))
    doc = cfg.to_sglang()
    assert doc == {"1": {"candidate_steps": [3, 5, 7], "up_hysteresis": 0.3}, "16": {"candidate_steps": [2]}}
    assert json.loads(cfg.to_json_text()) == doc
    assert a.AdaptiveConfig.from_sglang(doc) == cfg
    assert cfg.widest == 7 and not cfg.pinned
    # one wording with the configuration's own label (tuner/spec/configs.py ladder_label): what the bucket sets
    assert cfg.label == "B>=1: [3, 5, 7] (hysteresis up 0.3), B>=16: k=2"
    assert SpecConfig.for_adaptive(doc, "NEXTN", 7).label == "adaptive " + cfg.label


@pytest.mark.parametrize(
    ("buckets", "why"),
    [
        ((), "bounds starting at 1"),
        ((a.Bucket(2, (3,)),), "bounds starting at 1"),  # no bucket for batch 1
        ((a.Bucket(1, ()),), "bucket 1: candidates must be"),  # empty ladder
        ((a.Bucket(1, (3,)), a.Bucket(8, ())), "bucket 8: candidates must be"),  # a later one empty
        ((a.Bucket(1, (-1, 3)),), "bucket 1: candidates must be"),
        ((a.Bucket(1, (3, 2)),), "bucket 1: candidates must be"),  # out of order
        ((a.Bucket(1, (3,)), a.Bucket(1, (2,))), "distinct bounds"),
        ((a.Bucket(1, (0,)),), "must draft in some bucket"),  # drafts nowhere
    ],
)
def test_malformed_configs_are_refused(buckets, why):
    """Each refused by its own rule (an empty ladder once passed only as max() of nothing)."""
    with pytest.raises(ValueError, match=why):
        a.AdaptiveConfig(tuple(buckets))


def test_widest_candidate_reserve_is_twice_its_draft_tokens_per_request():
    assert a.kv_reserve_tokens(7, 1) == 16
    assert a.kv_reserve_tokens(3, 48) == 2 * 4 * 48


def test_accepted_drafts_follow_the_measurement_and_extrapolate_its_trend():
    e = a.accepted_drafts(HARD, 9)
    assert e[3] == pytest.approx(1.36)
    gains = [e[c] - e[c - 1] for c in range(1, 10)]
    assert all(x >= y - 1e-12 for x, y in zip(gains, gains[1:], strict=False))  # survival never grows
    assert e[9] - e[6] < 3 * (e[6] - e[5]) + 1e-9  # the trend carries on, not a constant acceptance
    assert a.infer_depth(2.36, e) == pytest.approx(3.0)
    assert 1.0 < a.infer_depth(1.77, e) < 2.0


def test_settle_is_sglangs_ema_rule():
    easy, hard = a.accepted_drafts(EASY, 9), a.accepted_drafts(HARD, 9)
    # SGLang's default bucket 1 ([1, 3, 5, 7], launched at 3): an easy draft climbs to the top
    assert a.settle([1, 3, 5, 7], easy, start=3) == 7
    # a hard one stays at 3 (E(3) = 1.36: no rise above 2.5, no drop below 1 - 0.5 - 0.25)
    assert a.settle([1, 3, 5, 7], hard, start=3) == 3
    # bucket 32 of the default ([0, 1]) with a hard draft ends drafting one step
    assert a.settle([0, 1], hard, start=1) == 1
    assert a.settle([5], easy) == 5


def test_hysteresis_only_where_it_changes_where_the_ladder_settles():
    easy, hard = a.accepted_drafts(EASY, 11), a.accepted_drafts(HARD, 9)
    assert a.centring_hysteresis([2, 3, 4], 3, hard) == (None, None)  # the defaults already stay at 3
    up, down = a.centring_hysteresis([5, 7, 9], 7, easy)  # the defaults climb to 9
    assert up is not None and down is None
    assert a.settle([5, 7, 9], easy, up=up, start=7) == 7
    assert a.settle([5, 7, 9], easy, start=7) == 9


def _seed_evidence(**kw):
    levels = [
        a.LevelEvidence(1, 1, 5, (), default_depth=7.0, default_wins=True),
        a.LevelEvidence(4, 4, 5, (), default_depth=6.9, default_wins=True),
        a.LevelEvidence(16, 16, 3, (3,), default_depth=3.0, default_wins=True),
        a.LevelEvidence(32, 21, 2, (2, 3), default_depth=3.0, default_wins=False),
        a.LevelEvidence(64, 21, 2, (2,), default_depth=3.0, default_wins=False),
    ]
    args = dict(
        levels=levels,
        drafts=a.accepted_drafts(EASY, 16),
        max_depth=a.depth_bound([1, 2, 3, 4, 5], [], [7], 16),
        sizes=SIZES,
        deepest_static=5,
    )
    args.update(kw)
    return a.Evidence(**args)


def test_ladders_go_deeper_than_the_static_sweep_where_the_default_ran_its_ceiling():
    ev = _seed_evidence()
    assert ev.max_depth == 9  # two past the default's widest, which started
    cands, dropped = a.generate(ev, 3)
    assert not dropped and 1 <= len(cands) <= 3
    first = cands[0].config.to_sglang()
    assert first["1"]["candidate_steps"] == [5, 7, 9]  # seeded by the default's depth 7, one rung past it
    assert "up_hysteresis" not in first["1"]  # open-ended: SGLang's rule may climb
    # bounds sit on CUDA-graph sizes between the levels' running batches (4 -> 16: 8; 16 -> 21: 18)
    assert list(first) == ["1", "8", "18"]
    assert first["18"] == {"candidate_steps": [2]}
    reshaped = cands[1].config.to_sglang()
    assert reshaped["1"]["candidate_steps"] == [3, 5, 7, 9]
    texts = [c.config.to_json_text() for c in cands]
    assert len(set(texts)) == len(texts)


def test_budget_and_exclusions_bound_what_is_generated():
    ev = _seed_evidence()
    one, _ = a.generate(ev, 1)
    assert len(one) == 1
    again, _ = a.generate(ev, 3, exclude=[one[0].config.to_json_text()])
    assert one[0].config.to_json_text() not in [c.config.to_json_text() for c in again]
    assert a.generate(ev, 0)[0] == []


def test_a_ladder_whose_widest_reserve_cannot_hold_the_high_load_batch_is_set_aside():
    # pools that fall with depth, as a server's do: no candidate launches where the batch fits
    ev = _seed_evidence(pools={2: 21 * 512 + 100, 3: 8000}, tokens_per_request=512)
    cands, dropped = a.generate(ev, 3, launch_steps=lambda doc: 2)
    assert dropped and "reserve" in dropped[0][1] and "running batch of 21" in dropped[0][1]
    # what is kept launches at a candidate whose pool (here depth 1's, on the line) holds the batch
    assert all(c.launch == 1 and a.kv_shortfall(c.config, ev, c.launch) is None for c in cands)
    roomy = _seed_evidence(pools={2: 400000}, tokens_per_request=512)
    cands, dropped = a.generate(roomy, 3, launch_steps=lambda doc: 2)
    assert cands and not dropped


def test_depth_bound_stops_below_a_kv_failure_and_at_the_role_limit():
    assert a.depth_bound([1, 2, 3], [], [], 16) == 5
    assert a.depth_bound([1, 2, 3], [5], [7], 16) == 4
    assert a.depth_bound([1, 2, 3], [], [7], 8) == 8


def test_a_machine_where_no_speculation_wins_at_high_load_keeps_0_there():
    levels = [
        a.LevelEvidence(1, 1, 3, (2, 3, 4), default_depth=3.0),
        a.LevelEvidence(4, 4, 2, (2, 3), default_depth=3.1, default_wins=True),
        a.LevelEvidence(16, 16, 0, (0, 1, 2)),
        a.LevelEvidence(64, 48, 0),
    ]
    ev = a.Evidence(levels, a.accepted_drafts(HARD, 8), 8, SIZES, deepest_static=6)
    cands, _ = a.generate(ev, 3)
    assert cands
    for c in cands:
        doc = c.config.to_sglang()
        top = doc[max(doc, key=int)]
        assert top["candidate_steps"] in ([0], [0, 1, 3])


def test_the_measured_acceptance_spread_spaces_the_rungs():
    steady = [0, 0, 100, 0]  # every step accepts 2 drafts: the EMA does not move
    spread = [40, 0, 0, 60, 0, 0, 40]  # 0 or 3 or 6: requests differ widely
    assert a.ema_swing(steady) == 0.0
    assert a.ema_swing(spread) > 0.75
    assert a.ema_swing(None) is None
    assert a._ladder(3, 9, a.ema_swing(steady)) == (2, 3, 4)
    assert a._ladder(3, 9, a.ema_swing(spread)) == (1, 3, 5)


def test_levels_at_the_same_running_batch_share_one_bucket():
    # admission caps C=32 and C=64 at the same batch: one bucket, never two bounds at the same size
    ev = _seed_evidence(
        levels=[
            a.LevelEvidence(1, 1, 5),
            a.LevelEvidence(32, 13, 3),
            a.LevelEvidence(64, 13, 2),
        ]
    )
    for c in a.generate(ev, 3)[0]:
        bounds = list(c.config.to_sglang())
        assert bounds == sorted(set(bounds), key=int) and len(bounds) == 2


def test_a_ladder_launches_where_the_server_can_start():
    # the seed's pools fall ~80k tokens a step: a static server at depth 7 has none, so a one-bucket
    # ladder [5, 7, 9] cannot launch at its middle (the role's rule); it launches at 5, whose pool holds
    ev = _seed_evidence(pools={2: 377207, 3: 295931, 4: 216739, 5: 137026}, tokens_per_request=512)
    cfg = a.AdaptiveConfig((a.Bucket(1, (5, 7, 9)),))
    assert a.pool_at(ev, 7) < 0 and a.pool_at(ev, 4) == 216739
    assert a.launch_depth(cfg, ev, lambda doc: 7) == 5
    two = a.AdaptiveConfig((a.Bucket(1, (5, 7, 9)), a.Bucket(8, (3,))))
    assert a.launch_depth(two, ev, lambda doc: 3) == 3  # the role's rule where it can start
    cands, _ = a.generate(ev, 3, launch_steps=lambda doc: 7)
    assert all(c.launch is not None and a.pool_at(ev, c.launch) > 512 for c in cands)


def test_a_launch_depth_whose_running_limit_cannot_admit_the_high_load_batch_is_not_chosen():
    # the seed's state slots: 26, 21, 17 requests at depths 1-3 (on the line: 7 at depth 5); the
    # static winners ran 21 at once
    ev = _seed_evidence(pools={1: 455357, 2: 377207, 3: 295931}, running_caps={1: 26, 2: 21, 3: 17})
    assert a.running_cap_at(ev, 2) == 21 and 7 < a.running_cap_at(ev, 5) < 8
    why = a.running_shortfall(ev, 3)
    assert why and "at most 17 requests" in why and "running batch of 21" in why
    # the role's rule (3) would cap them: the deepest candidate whose limit admits 21 is chosen
    two = a.AdaptiveConfig((a.Bucket(1, (5, 7, 9)), a.Bucket(18, (1, 2, 3))))
    assert a.launch_depth(two, ev, lambda doc: 3) == 2 and a.running_shortfall(ev, 2) is None
    # none admits it: the rule, where its pool holds (the cost is measured, not assumed)
    one = a.AdaptiveConfig((a.Bucket(1, (5, 7, 9)),))
    assert a.launch_depth(one, ev, lambda doc: 7) == 5 and a.kv_shortfall(one, ev, 5) is None
