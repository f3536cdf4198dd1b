"""Recommendation, early stop and noise rules (tuner/decide/analysis.py).

The seed table (docs/reference/seed-campaign.md) is used as *input data* here: the rules must turn those
measurements into the seed's conclusions; nothing in the tuner knows them.
"""

from __future__ import annotations

import json

import pytest

from tuner.data.records import LevelRecord
from tuner.decide import analysis
from tuner.decide.capacity import is_capacity_failure
from tuner.decide.early_stop import early_stop
from tuner.measure.metrics import LevelMetrics
from tuner.present.noise_text import noise_note, noise_summary
from tuner.spec.configs import SpecConfig


def row(k, c, tput, per_req=None, rep=1, status="ok", topk=1):
    """A measured level record as the sweep writes it."""
    return LevelRecord(
        config=SpecConfig(k, topk),
        concurrency=c,
        repeat=rep,
        metrics=LevelMetrics(
            concurrency=c,
            requests=4,
            requests_ok=4,
            output_tok_s=tput,
            per_request_tok_s=per_req or (tput / max(1, c) if tput is not None else None),
            status=status,
        ),
    )


# Aggregate tok/s shaped like the seed's hand measurements (C=1 and C=64 cells are the seed's;
# the others follow its description: steps 4 best at 1-4, steps 3 best at 16+).
SEED_LIKE = {
    1: {1: 122.9, 4: 470.0, 16: 1300.0, 32: 1450.0, 64: 1582.0},
    2: {1: 182.7, 4: 542.6, 16: 1530.1, 32: 1672.5, 64: 1844.0},
    3: {1: 229.1, 4: 700.0, 16: 1650.0, 32: 1800.0, 64: 1914.0},
    4: {1: 277.0, 4: 800.0, 16: 1600.0, 32: 1700.0, 64: 1800.0},
}
LEVELS = [1, 4, 16, 32, 64]


def seed_rows():
    return [row(k, c, v) for k, per in SEED_LIKE.items() for c, v in per.items()]


def test_by_concurrency_on_seed_like_data():
    stats = analysis.aggregate(seed_rows())
    choices = analysis.by_concurrency(stats, LEVELS)
    assert {c: ch.chosen.spec_steps for c, ch in choices.items()} == {1: 4, 4: 4, 16: 3, 32: 3, 64: 3}
    ch = choices[64]
    assert ch.runner_up.spec_steps == 2
    assert round(ch.margin_pct, 1) == round((1914 - 1844) / 1844 * 100, 1)


def test_prefer_smaller_within_one_percent():
    rows = [row(2, 16, 1000.0), row(3, 16, 1008.0), row(4, 16, 900.0)]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows).values()))
    assert ch.chosen.spec_steps == 2 and ch.best.spec_steps == 3
    assert ch.to_dict()["raw_best"]["spec_steps"] == 3


def test_noise_from_repeats_widens_the_tie():
    # k3 is 3% ahead on average but the repeats scatter by ~10%: a tie within noise, and the
    # tie-break does not give it to the cheaper k2, 3% below the best mean: the higher mean is the
    # better bet where the data cannot separate them
    rows = [row(2, 16, v, rep=i + 1) for i, v in enumerate([1000.0, 1100.0, 900.0])]
    rows += [row(3, 16, v, rep=i + 1) for i, v in enumerate([1130.0, 930.0, 1030.0])]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows).values()))
    assert ch.tied and ch.equivalent == ["k2-t1", "k3-t1"]
    assert ch.chosen.spec_steps == 3
    assert ch.tolerance_pct > 5
    assert ch.to_dict()["tie_break"].startswith("the highest mean")
    assert "tied within noise with k2-t1" in ch.verdict
    # the same scatter with k3 only 0.5% ahead: within 1% of the best mean, the cheaper k2 is taken
    rows = [row(2, 16, v, rep=i + 1) for i, v in enumerate([1000.0, 1100.0, 900.0])]
    rows += [row(3, 16, v, rep=i + 1) for i, v in enumerate([1105.0, 905.0, 1005.0])]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows).values()))
    assert ch.tied and ch.chosen.spec_steps == 2 and ch.best.spec_steps == 3
    assert "within 1% of the best mean" in ch.to_dict()["tie_break"]
    # tight repeats: the same 3% is real
    rows = [row(2, 16, v, rep=i + 1) for i, v in enumerate([1000.0, 1001.0, 999.0])]
    rows += [row(3, 16, v, rep=i + 1) for i, v in enumerate([1030.0, 1031.0, 1029.0])]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows).values()))
    assert ch.chosen.spec_steps == 3


def test_recommend_single_level_and_mix():
    stats = analysis.aggregate(seed_rows())
    assert analysis.recommend(stats, LEVELS, [1]).chosen.spec_steps == 4
    assert analysis.recommend(stats, LEVELS, [64]).chosen.spec_steps == 3
    assert analysis.recommend(stats, LEVELS, [16, 32, 64]).chosen.spec_steps == 3
    mix = analysis.recommend(stats, LEVELS, None)
    # relative scores: k3 = (0.827+0.875+1+1+1)/5 = 0.940, k4 = (1+1+0.970+0.944+0.940)/5 = 0.971
    assert mix.chosen.spec_steps == 4
    assert set(mix.scores) == {"k1-t1", "k2-t1", "k3-t1", "k4-t1"}
    assert "each level weighted equally" in mix.reason


def test_recommend_ignores_configs_missing_a_level():
    rows = seed_rows() + [row(5, 1, 400.0)]  # k5 measured at one level only
    stats = analysis.aggregate(rows)
    rec = analysis.recommend(stats, LEVELS, None)
    assert "k5-t1" not in rec.scores


def series(upto, data=SEED_LIKE):
    stats = analysis.aggregate([row(k, c, v) for k, per in data.items() if k <= upto for c, v in per.items()])
    return [{c: p for (cid, c), p in stats.items() if cid == f"k{k}-t1"} for k in sorted(data) if k <= upto]


def test_early_stop_needs_every_level_past_peak():
    # seed-like: k4 still best at C=1..4 -> go on
    assert not early_stop(series(4), LEVELS).stop
    falling = {**SEED_LIKE, 5: {1: 270.0, 4: 780.0, 16: 1500.0, 32: 1600.0, 64: 1700.0}}
    es = early_stop(series(5, falling), LEVELS)
    assert es.stop and set(es.below) == set(LEVELS)
    assert "C=1" in es.detail
    # a dip within 1% at one level is not past the peak
    flat = {**SEED_LIKE, 5: {1: 275.0, 4: 780.0, 16: 1500.0, 32: 1600.0, 64: 1700.0}}
    assert not early_stop(series(5, flat), LEVELS).stop


def test_early_stop_unknown_level_never_stops():
    s = series(4)
    del s[-1][64]
    assert not early_stop(s, LEVELS).stop
    assert not early_stop(series(1), LEVELS).stop


def test_failed_and_skipped_rows_are_not_measurements():
    rows = seed_rows() + [row(5, 1, None, status="failed")]
    stats = analysis.aggregate(rows)
    assert ("k5-t1", 1) not in stats


def test_capacity_failure_classification():
    assert is_capacity_failure(
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.8"
    )
    assert is_capacity_failure("KV cache pool cannot be allocated")
    assert not is_capacity_failure("sglang_ready: timed out after 600 s waiting for /health")
    assert not is_capacity_failure(None)


def test_a_kv_failure_bounds_its_own_series_only():
    """One reading of "failed for lack of KV memory" for the grid's and search's skip and the schedule
    phase's deepest candidate: a tree's failure (topk 4 holds more KV per step) bounded the chain
    ladders the schedule phase offers, where the capacity skip already kept to the series."""
    from tuner.data.records import DeployRecord, SweepState
    from tuner.decide.capacity import capacity_skip, kv_failures
    from tuner.decide.schedule_phase import is_chain

    oom = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    tree, chain = SpecConfig(3, 4, 8), SpecConfig(5)
    state = SweepState.fold(
        [
            DeployRecord(config=tree, host="h", status="failed", reason=oom),
            DeployRecord(config=chain, host="h", status="failed", reason=oom),
            DeployRecord(config=SpecConfig(2), host="h", status="failed", reason="timed out waiting for /health"),
        ]
    )
    assert kv_failures(state, lambda c: is_chain(c, "NEXTN")) == [(5, oom)]
    assert [s for s, _ in kv_failures(state, lambda c: True)] == [3, 5]
    assert capacity_skip(SpecConfig(4), state) is None  # the tree's depth 3 is not the chain's
    assert "spec_steps 5 could not start" in (capacity_skip(SpecConfig(6), state) or "")
    assert "spec_steps 3 could not start" in (capacity_skip(SpecConfig(4, 4, 8), state) or "")


def test_noise_summary():
    rows = [row(2, 16, v, rep=i + 1) for i, v in enumerate([1000.0, 1100.0, 900.0])]
    n = noise_summary(analysis.aggregate(rows))
    assert n["repeats"] == 3 and n["max_rel_std_pct"] == 10.0
    assert noise_summary(analysis.aggregate(seed_rows()))["max_rel_std_pct"] is None


def test_the_precision_reached_leaves_out_the_floor_that_stands_in_for_no_interval():
    """A cell measured in one window has no interval: its +-1% is assumed, not reached."""
    n = noise_summary(analysis.aggregate([ci_row(2, 4, 1000.0, 3.0), row(3, 4, 1050.0), row(4, 4, 990.0)]))
    assert n["median_precision_pct"] == 3.0 and n["max_precision_pct"] == 3.0
    assert n["cells"] == 3 and n["cells_without_interval"] == 2
    # the report's words: no one description is every cell's, and the precision is the measured ones'
    text = noise_note(n)
    assert not text.startswith("Every cell") and "cell by cell, one of: nothing" in text, text
    assert "2 of 3 cells measured no interval" in text and "precision reached over the 1 cell that measured one" in text
    one_kind = noise_summary(analysis.aggregate([ci_row(2, 4, 1000.0, 3.0), ci_row(3, 4, 1050.0, 2.0)]))
    text = noise_note(one_kind)
    assert text.startswith("Every cell carries a 95% interval of its aggregate tok/s covering the requests")
    assert "precision reached: median" in text


def test_repeats_count_one_deployments_levels_and_each_temperature_states_its_restart_spread():
    """`repeats` is --repeats (a cell's levels over two deployments are not two repeats); with two
    temperatures, each pooled apart, the note states both spreads, not the first one's alone."""
    rows = []
    for temp, second in ((0.0, 1.01), (0.7, 1.12)):
        for k, base in ((2, 1000.0), (3, 1100.0)):
            rows += [ci_row(k, 4, base, 1.0, temp=temp), ci_row(k, 4, base * second, 1.0, dep=2, temp=temp)]
    per_temp = {t: analysis.aggregate(rows, temperature=t) for t in (0.0, 0.7)}
    stats = {(f"{cid}@T{t:g}", c): p for t, st in per_temp.items() for (cid, c), p in st.items()}
    n = noise_summary(stats)
    assert n["repeats"] == 1 and n["deployments"] == 2, n
    assert analysis.choose_for_level(list(per_temp[0.0].values())).to_dict()["repeats"] == 1
    each = n["restart_by_temperature"]
    assert set(each) == {"0", "0.7"} and each["0.7"]["raw_rel_sd_pct"] > 3 * each["0"]["raw_rel_sd_pct"], each
    text = noise_note(n)
    assert "pooled per temperature" in text and "at temperature 0:" in text and "at temperature 0.7:" in text, text
    assert f"+-{each['0.7']['band_pct']:.1f}%" in text, text
    # one temperature: the sentence as before, no per-temperature entry
    one = noise_summary(per_temp[0.0])
    assert "restart_by_temperature" not in one and "Deployment-to-deployment spread: " in noise_note(one)
    # only the later temperature measured twice: the first has no spread, and the note names 0.7's
    later = [r for r in rows if r.temperature == 0.7] + [ci_row(k, 4, b, 1.0) for k, b in ((2, 1000.0), (3, 1100.0))]
    split = {t: analysis.aggregate(later, temperature=t) for t in (0.0, 0.7)}
    n2 = noise_summary({(f"{cid}@T{t:g}", c): p for t, st in split.items() for (cid, c), p in st.items()})
    assert n2["restart"] is None and set(n2["restart_by_temperature"]) == {"0.7"}, n2
    assert "at temperature 0.7:" in noise_note(n2)
    # three repeats on each of two deployments: 3, not 6
    reps = [ci_row(2, 4, 1000.0 + i, 1.0, rep=i % 3 + 1, dep=i // 3 + 1) for i in range(6)]
    assert noise_summary(analysis.aggregate(reps))["repeats"] == 3


def ci_row(k, c, tput, hw_pct, *, rep=1, dep=1, status="ok", failed=0, temp=0.0):
    """A level with its own interval (+-hw_pct%), as the precision loop writes it."""
    r = row(k, c, tput, rep=rep, status=status)
    r.deployment, r.temperature = dep, temp
    r.metrics.output_tok_s_ci_low = tput * (1 - hw_pct / 100)
    r.metrics.output_tok_s_ci_high = tput * (1 + hw_pct / 100)
    r.metrics.samples, r.metrics.requests_failed = 40, failed
    return r


def test_a_winner_is_named_only_beyond_noise():
    # k4 0.6% above k3 with +-2% intervals: tied, and within 1% of the best mean the tie-break
    # takes more KV capacity (k3)
    cap = {"k3-t1": 295931, "k4-t1": 250000, "k2-t1": 340000}
    rows = [ci_row(3, 32, 1657.0, 2.0), ci_row(4, 32, 1667.0, 2.0), ci_row(2, 32, 1473.0, 2.0)]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows, capacity=cap).values()))
    assert ch.tied and ch.best.spec_steps == 4 and ch.chosen.spec_steps == 3
    assert ch.equivalent == ["k3-t1", "k4-t1"] and ch.tied_with == ["k4-t1"]  # k2 is beyond noise below
    d = ch.to_dict()
    assert d["ci95"] == [round(1657 * 0.98, 2), round(1657 * 1.02, 2)] and d["verdict"] == "tied within noise"
    assert d["tied_with"] == ["k4-t1"] and "more KV capacity" in d["tie_break"] and d["noise"] == "requests"
    # k4 2.1% above: still tied within noise (the verdict says so), but too far above for the
    # tie-break to give the level to k3's capacity: the higher mean is taken
    rows = [ci_row(3, 32, 1657.0, 2.0), ci_row(4, 32, 1692.0, 2.0), ci_row(2, 32, 1473.0, 2.0)]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows, capacity=cap).values()))
    assert ch.tied and ch.chosen.spec_steps == 4 and ch.equivalent == ["k3-t1", "k4-t1"]
    assert ch.verdict.startswith("tied within noise with k3-t1; tie-break: the highest mean")
    # the same 2.1% with +-0.5% intervals is real: k4 wins beyond noise
    rows = [ci_row(3, 32, 1657.0, 0.5), ci_row(4, 32, 1692.0, 0.5)]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows, capacity=cap).values()))
    assert not ch.tied and ch.chosen.spec_steps == 4 and ch.tied_with == []
    assert ch.verdict == "beats k3-t1 beyond noise"


def test_a_verdict_resting_on_the_assumed_floor_says_so():
    """A cell with one window or one request measures no interval; the +-1% floor stands in for it.
    A winner 3.7% above such a runner-up was "beyond noise" in the level's row and JSON while the
    same sweep's measured intervals were +-40%: the notes alone said the verdict rested on an
    assumption. The row and the JSON say it now; a measured interval keeps "beyond noise"."""
    ch = analysis.choose_for_level(list(analysis.aggregate([row(2, 16, 3700.3), row(3, 16, 3568.0)]).values()))
    assert not ch.tied and ch.chosen.interval.noise == "none"
    assert ch.verdict == "beats k3-t1 by more than the +-1% assumed where no interval was measured"
    assert ch.to_dict()["verdict"] == "beyond assumed noise"
    rows = [ci_row(2, 16, 3700.3, 0.5), ci_row(3, 16, 3568.0, 0.5)]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows).values()))
    assert ch.verdict == "beats k3-t1 beyond noise" and ch.to_dict()["verdict"] == "beyond noise"
    # one side measured, the other not: still assumed
    ch = analysis.choose_for_level(list(analysis.aggregate([ci_row(2, 16, 3700.3, 0.5), row(3, 16, 3568.0)]).values()))
    assert ch.to_dict()["verdict"] == "beyond assumed noise"
    # the recommendation for that one level says it too
    rec = analysis.recommend(analysis.aggregate([row(2, 16, 3700.3), row(3, 16, 3568.0)]), [16], [16])
    assert rec.reason.endswith("3.7% above k3-t1, by more than the +-1% assumed where no interval was measured"), (
        rec.reason
    )


def test_the_tie_break_reason_states_the_closeness_the_choice_used():
    # k4 2.1% above k3, both +-2%: tied. At the default 1% the higher mean is taken and the reason
    # says 1%; asked for 3%, the cheaper (more KV capacity) is taken and the reason says 3%
    cap = {"k3-t1": 295931, "k4-t1": 250000}
    pts = list(analysis.aggregate([ci_row(3, 32, 1657.0, 2.0), ci_row(4, 32, 1692.0, 2.0)], capacity=cap).values())
    ch = analysis.choose_for_level(pts)
    assert ch.chosen.spec_steps == 4 and ch.to_dict()["tie_break"].endswith("more than 1% below it)")
    ch = analysis.choose_for_level(pts, min_rel=0.03)
    assert ch.chosen.spec_steps == 3 and ch.min_rel == 0.03
    assert ch.to_dict()["tie_break"] == "more KV capacity (295931 tokens) within 3% of the best mean"


def test_workload_tie_break_takes_the_cheaper_only_within_1pct_or_where_it_wins_a_level():
    # two levels, +-8% intervals: k2 and k3 are tied on the workload score, k3 5.7% higher. Tied says
    # the data cannot separate them, not that they are equal: the higher score is taken, as per level
    cap = {"k2-t1": 300000, "k3-t1": 290000}
    rows = [ci_row(2, 4, 700.0, 8.0), ci_row(2, 32, 1600.0, 8.0)]
    rows += [ci_row(3, 4, 740.0, 8.0), ci_row(3, 32, 1600.0 * 740.0 / 700.0, 8.0)]
    stats = analysis.aggregate(rows, capacity=cap)
    assert {c: ch.chosen.config_id for c, ch in analysis.by_concurrency(stats, [4, 32]).items()} == {
        4: "k3-t1",
        32: "k3-t1",
    }
    mix = analysis.recommend(stats, [4, 32], None)
    assert mix.chosen.config_id == "k3-t1" and mix.tied_with == ["k2-t1"]
    assert "the highest score taken (no cheaper one within 1% of it or winning a level)" in mix.reason
    # within 1% of the highest: the cheaper (more KV capacity) is taken, and the reason names the highest
    rows = [ci_row(2, 4, 700.0, 8.0), ci_row(2, 32, 1600.0, 8.0), ci_row(3, 4, 705.0, 8.0), ci_row(3, 32, 1610.0, 8.0)]
    mix = analysis.recommend(analysis.aggregate(rows, capacity=cap), [4, 32], None)
    assert mix.chosen.config_id == "k2-t1" and mix.tied_with == ["k3-t1"]
    assert "so the tie-break (more KV capacity, then fewer steps) chose it" in mix.reason
    assert "k2-t1 scores" in mix.reason and "the highest k3-t1" in mix.reason
    assert "best mean relative throughput" not in mix.reason
    # a genuine trade-off: the cheaper one wins the high-load level beyond noise (no speculation
    # against a depth with a better score, bench/schedule_vs_static.md): the cheaper is taken
    cap0 = {"k0": 320000, "k3-t1": 290000}
    rows = [
        ci_row(0, 1, 100.0, 20.0),
        ci_row(0, 64, 3000.0, 1.0),
        ci_row(3, 1, 180.0, 20.0),
        ci_row(3, 64, 2460.0, 1.0),
    ]
    mix = analysis.recommend(analysis.aggregate(rows, capacity=cap0), [1, 64], None)
    assert mix.chosen.config_id == "k0" and "the tie-break (more KV capacity" in mix.reason
    # the words say why a cheaper one more than 1% below was taken: the level it wins
    assert "it wins C=64 beyond noise against k3-t1" in mix.reason, mix.reason


def test_the_workload_tie_break_never_takes_a_configuration_beaten_somewhere_and_better_nowhere():
    """The scores' intervals meet through a noisy C=1 (+-13%) while k6 beats k5 beyond noise at C=8
    and C=32 (a profile of another GPU, grid sweep): the tie-break took k5 for 490,000 KV tokens
    against 488,000, giving 8% away at the level capacity is meant to serve."""
    cap = {"k5-t1": 490000, "k6-t1": 488000}
    rows = [ci_row(5, 1, 199.6, 13.0), ci_row(5, 8, 1271.6, 1.0), ci_row(5, 32, 3655.8, 1.0)]
    rows += [ci_row(6, 1, 207.0, 13.0), ci_row(6, 8, 1316.8, 1.0), ci_row(6, 32, 3979.1, 1.0)]
    mix = analysis.recommend(analysis.aggregate(rows, capacity=cap), [1, 8, 32], None)
    assert mix.chosen.config_id == "k6-t1", mix.reason
    # the words name every configuration recommendation.json lists as tied, and why one was left out
    assert mix.tied_with == ["k5-t1"] and "tied within noise with k5-t1 (k5-t1 left out: beaten" in mix.reason
    # tied at every level (+-13%: no level tells them apart), k5 2.7% below: still the higher score
    rows = [ci_row(5, c, v, 13.0) for c, v in ((1, 199.6), (8, 1271.6), (32, 3655.8))]
    rows += [ci_row(6, c, v, 13.0) for c, v in ((1, 207.0), (8, 1316.8), (32, 3700.0))]
    assert analysis.recommend(analysis.aggregate(rows, capacity=cap), [1, 8, 32], None).chosen.config_id == "k6-t1"


def test_tie_break_prefers_kv_capacity_then_fewer_steps():
    rows = [ci_row(2, 16, 1000.0, 3.0, temp=0.0), ci_row(3, 16, 1010.0, 3.0)]
    # topk 4 at steps 2 costs more KV than a chain at 3: capacity decides, not the step count
    wide = ci_row(2, 16, 1005.0, 3.0)
    wide.config = SpecConfig(2, 4, 8)
    cap = {"k2-t1": 300000, "k3-t1": 290000, wide.config_id: 200000}
    ch = analysis.choose_for_level(list(analysis.aggregate([*rows, wide], capacity=cap).values()))
    assert ch.chosen.config_id == "k2-t1"
    cap["k3-t1"] = 310000
    ch = analysis.choose_for_level(list(analysis.aggregate([*rows, wide], capacity=cap).values()))
    assert ch.chosen.config_id == "k3-t1"
    ch = analysis.choose_for_level(list(analysis.aggregate(rows).values()))  # capacity unknown: fewer steps
    assert ch.chosen.spec_steps == 2


def test_levels_with_failed_requests_do_not_compete():
    rows = [ci_row(3, 16, 1650.0, 1.0), ci_row(4, 16, 1900.0, 1.0, status="partial", failed=3)]
    stats = analysis.aggregate(rows)
    ch = analysis.choose_for_level(list(stats.values()))
    assert ch.chosen.spec_steps == 3 and "requests failed" in ch.excluded["k4-t1"]
    # a complete repeat of the same cell is used, the partial one is not
    rows.append(ci_row(4, 16, 1700.0, 1.0, rep=2))
    p = analysis.aggregate(rows)[("k4-t1", 16)]
    assert not p.partial and p.values == [1700.0]
    # every configuration lost requests: no winner, and why
    only = [ci_row(4, 16, 1900.0, 1.0, status="partial", failed=3)]
    assert analysis.choose_for_level(list(analysis.aggregate(only).values())) is None
    assert "requests failed" in analysis.unchosen(analysis.aggregate(only), [16])[16]


def test_levels_of_two_temperatures_never_mix():
    rows = [ci_row(3, 16, 1650.0, 1.0), ci_row(3, 16, 1100.0, 1.0, temp=0.7), ci_row(4, 16, 1200.0, 1.0, temp=0.7)]
    assert analysis.temperatures(rows) == [0.0, 0.7]
    greedy = analysis.aggregate(rows, temperature=0.0)
    sampled = analysis.aggregate(rows, temperature=0.7)
    assert greedy[("k3-t1", 16)].values == [1650.0] and set(sampled) == {("k3-t1", 16), ("k4-t1", 16)}
    assert analysis.choose_for_level(list(sampled.values())).chosen.spec_steps == 4


def test_deployments_make_the_interval_cover_restarts():
    rows = [
        ci_row(3, 16, v, rep=r, dep=d, hw_pct=0.5)
        for d, vals in ((1, (1000, 1002)), (2, (1080, 1078)))
        for r, v in enumerate(vals, 1)
    ]
    p = analysis.aggregate(rows)[("k3-t1", 16)]
    iv = p.ci95
    assert iv.noise == "deployments" and p.deployments == 2
    assert iv.estimate == pytest.approx(1040.0) and iv.half_width > 40  # two restarts 8% apart: wide


def _samples(ttft, tpot, tokens=100):
    from tuner.measure.metrics import LevelSamples

    return LevelSamples(
        ttft_ms=list(ttft), tpot_ms=list(tpot), e2e_ms=[1000.0] * len(ttft), output_tokens=[tokens] * len(ttft)
    )


def test_slo_choice_and_a_level_where_none_meets_it():
    from tuner.spec.slo import parse_slo

    fast = ci_row(2, 16, 1500.0, 1.0)
    deep = ci_row(4, 16, 1800.0, 1.0)
    fast.samples = _samples([200.0] * 20, [20.0] * 20)
    deep.samples = _samples([200.0] * 20, [20.0] * 18 + [80.0, 90.0])  # p99 TPOT 90 ms
    stats = analysis.aggregate([fast, deep])
    analysis.apply_slo(stats, parse_slo("tpot_p99_ms=50"))
    ch = analysis.choose_for_level(list(stats.values()))
    assert ch.chosen.spec_steps == 2 and "misses the SLO" in ch.excluded["k4-t1"]
    d = ch.to_dict()
    assert d["meets_slo"] is True and d["goodput_tok_s"] == 1500.0
    assert stats[("k4-t1", 16)].slo.goodput_tok_s == pytest.approx(1800.0 * 18 / 20)
    analysis.apply_slo(stats, parse_slo("tpot_p99_ms=10"))
    assert analysis.choose_for_level(list(stats.values())) is None
    why = analysis.unchosen(stats, [16])[16]
    assert why.startswith("no configuration meets the SLO")
    rec = analysis.recommend(stats, [16], None)
    assert rec.chosen is None and "SLO" in rec.reason


def test_early_stop_falls_from_no_peak_a_configuration_that_does_not_compete():
    """A shallow depth that is fast but failed the correctness gate is no peak to fall from: the
    deeper depths are measured, not skipped against a configuration that can never be chosen."""
    falling = {**SEED_LIKE, 5: {1: 270.0, 4: 780.0, 16: 1500.0, 32: 1600.0, 64: 1700.0}}
    s = series(5, falling)
    assert early_stop(s, LEVELS).stop
    for pts in s[:-1]:
        for p in pts.values():
            p.verify_failed = "outputs differ from the no-speculation baseline"
    assert not early_stop(s, LEVELS).stop
    # and a newest cell that does not compete says nothing about the depths past it
    s = series(5, falling)
    for p in s[-1].values():
        p.verify_failed = "outputs differ"
    assert not early_stop(s, LEVELS).stop


def test_the_grids_early_stop_leaves_out_a_depth_that_failed_the_gate():
    """The planner's bar is the choice's: k1 fast but wrong, k2 correct and slower; k3 is not
    'past the peak' of a depth that can never be recommended."""
    from types import SimpleNamespace

    from tuner.data.records import DeployRecord, SweepState, VerifyRecord
    from tuner.run.planner import Planner
    from tuner.spec.sweepspec import WorkloadSpec

    k1, k2, k3 = SpecConfig(1), SpecConfig(2), SpecConfig(3)
    recs: list = [DeployRecord(config=k, host="h", capacity={"max_total_num_tokens": 1000}) for k in (k1, k2)]
    for k, per in ((k1, 1000.0), (k2, 800.0)):
        for c in (1, 4):
            m = LevelMetrics(
                concurrency=c,
                requests=8,
                requests_ok=8,
                output_tok_s=per * c,
                output_tok_s_ci_low=per * c * 0.99,
                output_tok_s_ci_high=per * c * 1.01,
                samples=8,
                status="ok",
            )
            recs.append(LevelRecord(config=k, concurrency=c, repeat=1, metrics=m))
    recs += [VerifyRecord(config=k1, host="h", passed=False, reasons=["outputs differ"])]
    recs += [VerifyRecord(config=k2, host="h", passed=True)]
    state = SweepState.fold(recs)
    planner = SimpleNamespace(
        plan=SimpleNamespace(configs=[k1, k2, k3]),
        workload=WorkloadSpec(concurrency=(1, 4)),
        finished={("k1-t1", 1), ("k2-t1", 1)},
        _all_levels_done=lambda cid, dep=1: True,
    )
    assert Planner._skip_reason(planner, k3, state) is None  # type: ignore[arg-type]
    # the same measurements without the gate's failure: k3 would be skipped past k1's peak
    state_ok = SweepState.fold([r for r in recs if not isinstance(r, VerifyRecord)])
    skip = Planner._skip_reason(planner, k3, state_ok)  # type: ignore[arg-type]
    assert skip is not None and skip[1] == "early_stop", skip


def test_the_restart_band_never_narrows_a_cell_below_its_own_repeats():
    """--repeats 3 with the confirmation round: C=1's repeats scatter by +-8% on one deployment;
    the redeploys measured only the precise level C=4, and agree closely. The C=1 cells keep their
    repeats' width (every interval widened, never narrowed: tuner/measure/restarts.py `widen`), and
    their tie stays a tie."""
    recs = []
    for k, base in ((2, 100.0), (3, 106.0)):
        recs += [ci_row(k, 1, base * f, 1.0, rep=r) for r, f in enumerate((0.92, 1.0, 1.08), 1)]
    for k, base in ((2, 1000.0), (3, 1010.0)):
        recs += [ci_row(k, 4, base, 0.5, rep=r) for r in (1, 2, 3)]
    before = analysis.aggregate(recs, pool=False)
    for k, base in ((2, 1000.0), (3, 1010.0)):
        recs += [ci_row(k, 4, base * 1.002, 0.5, rep=r, dep=2) for r in (1, 2, 3)]
    after = analysis.aggregate(recs)
    assert after[("k2-t1", 1)].restart is not None
    for key in (("k2-t1", 1), ("k3-t1", 1)):
        assert after[key].interval.half_width >= before[key].interval.half_width * 0.999, key
    choice = analysis.choose_for_level([p for (_c, cc), p in after.items() if cc == 1])
    assert choice is not None and choice.tied


def test_a_rank_s_batch_under_data_parallelism_is_the_concurrency_spread_over_the_ranks():
    """Without /metrics a cell's batch was min(C, max_running_requests): with 8 DP ranks of 6 each,
    C=32 read as 6 a rank (queueing) where each rank runs 4 (SGLang admits 6 x 8 = 48)."""
    from tuner.decide.schedule_phase import level_batch

    p = analysis.aggregate([row(2, 32, 1000.0)])[("k2-t1", 32)]
    assert level_batch(p, 6, 8)[0] == 4.0
    assert level_batch(p, 6)[0] == 6.0  # one rank: capped by its limit, as before
    big = analysis.aggregate([row(2, 64, 1000.0)])[("k2-t1", 64)]
    assert level_batch(big, 6, 8)[0] == 6.0


def test_the_recommendation_names_the_spec_schedule_that_deploys_it_again():
    """SGLang's default table given to the role as a file would launch at another depth (and KV
    pool) than `spec_schedule: default` did: the recommendation says which value deploys it."""
    from tuner.decide.analysis import PointStats, Recommendation

    def rec(cfg):
        return Recommendation(PointStats(cfg, 1), 1.0, "r", {}).to_dict()

    assert rec(SpecConfig(3, adaptive=True))["spec_schedule"] == "default"
    tuned = SpecConfig(3, schedule=((1, 4), (16, 2)))
    assert json.loads(rec(tuned)["spec_schedule"]) == {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [2]}}
    assert rec(SpecConfig(3))["spec_schedule"] is None


def test_the_plot_marks_a_cell_the_report_does_not_compare(tmp_path, monkeypatch):
    """A cell with failed requests is drawn where it measured, which may be above the starred
    choice: it carries a mark, as the report says "(partial)", not an ordinary point."""
    import matplotlib.pyplot as plt

    from tuner.present import plots

    rows = [row(2, 1, 180.0), row(3, 1, 200.0)]
    rows.append(row(4, 1, 260.0, status="partial"))
    rows[-1].metrics.requests_ok, rows[-1].metrics.requests_failed = 3, 1
    stats = analysis.aggregate(rows)
    assert not analysis.competes(stats[("k4-t1", 1)])
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    plots.plot_throughput(tmp_path / "p.png", stats, [1], [], title="t", chosen={1: "k3-t1"})
    ax = figs[0].axes[0]
    marked = [ln for ln in ax.get_lines() if ln.get_marker() == "x"]
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in marked] == [([4], [260.0])]
    assert "not compared" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_a_level_with_one_configuration_that_competes_claims_no_win_beyond_noise():
    """k2 faster but wrong (the correctness gate failed it), k1 the only one left: the level's
    verdict names what was left out instead of 'only configuration measured', and a one-level
    recommendation says k1 is the highest among those that compete, not the highest measured."""
    from tuner.data.records import DeployRecord, SweepState, VerifyRecord

    k1, k2 = SpecConfig(1), SpecConfig(2)
    recs: list = [DeployRecord(config=k, host="h", capacity={"max_total_num_tokens": 1000}) for k in (k1, k2)]
    recs += [ci_row(1, 1, 100.0, 1.0), ci_row(2, 1, 120.0, 1.0)]
    recs += [VerifyRecord(config=k2, host="h", passed=False, reasons=["outputs differ"])]
    state = SweepState.fold(recs)
    stats = analysis.aggregate(state.levels())
    analysis.mark_outcomes(stats, state)
    choice = analysis.by_concurrency(stats, [1])[1]
    assert choice.chosen.config_id == "k1-t1" and choice.runner_up is None
    assert (
        choice.verdict
        == "the only configuration that competes (k2-t1: failed the correctness gate (the notes say why))"
    )
    rec = analysis.recommend(stats, [1], [1])
    assert rec.reason.startswith("highest aggregate throughput among those that compete at concurrency 1: 100.0 tok/s")
    assert "k2-t1: failed the correctness gate" in rec.reason and "beyond noise" not in rec.reason


def test_the_highest_score_is_not_called_the_cheaper_when_a_cheaper_tied_one_was_left_out():
    """k2 wins C=1 beyond noise and ties k1 at C=4: k1 (more KV capacity, fewer steps) is left out as
    dominated, and k2 is taken for the highest score; the reason said '(also the cheaper setting)'."""
    cap = {"k1-t1": 300000, "k2-t1": 290000}
    rows = [ci_row(1, 1, 100.0, 1.0), ci_row(1, 4, 300.0, 16.0), ci_row(2, 1, 103.0, 1.0), ci_row(2, 4, 300.0, 16.0)]
    mix = analysis.recommend(analysis.aggregate(rows, capacity=cap), [1, 4], None)
    assert mix.chosen.config_id == "k2-t1" and "k1-t1 left out" in mix.reason, mix.reason
    assert "also the cheaper setting" not in mix.reason and "(the cheaper k1-t1 left out)" in mix.reason


def test_only_a_memory_failure_skips_the_deeper_depths():
    """The detail of a failed start carries its log tail, SGLang's launch line with
    `mem_fraction_static=` among it: a gate timeout or an NCCL error is no lack of KV memory."""
    from tuner.data.records import DeployRecord, SweepState
    from tuner.decide.capacity import capacity_skip

    tail = (
        "Log tail of the failed start:\n[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', "
        "mem_fraction_static=0.871, tp_size=4, ...)"
    )

    def state(reason: str) -> SweepState:
        return SweepState.fold(
            [DeployRecord(config=SpecConfig(1), host="h", status="failed", reason=reason, detail=f"{reason}\n{tail}")]
        )

    timeout = "timed out after 1800 s waiting for http://gpu1:30000/health to answer 200"
    assert capacity_skip(SpecConfig(3), state(timeout)) is None
    assert capacity_skip(SpecConfig(3), state("torch.distributed.DistBackendError: NCCL error")) is None
    oom = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    assert capacity_skip(SpecConfig(3), state(oom)).startswith("spec_steps 1 could not start for lack of KV memory")
    # the scheduler's own capacity assert (0.5.9 managers/tp_worker.py), as the gate reads it from
    # the traceback: a hybrid model whose state pool has no slot left at this depth
    zero = "the server exited during start-up: AssertionError: max_running_request is zero"
    assert capacity_skip(SpecConfig(3), state(zero)).startswith("spec_steps 1 could not start for lack of KV memory")


def test_a_tied_pick_is_never_one_another_tied_configuration_beats():
    """Ties do not chain: k4 (1000 +-5%) ties k2 (991 +-0.1%) and k3 (999 +-0.1%), but k3 beats k2
    beyond noise; the tie-break (more KV capacity) took k2 and called it tied with k3."""
    cap = {"k2-t1": 340000, "k3-t1": 300000, "k4-t1": 250000}
    rows = [ci_row(4, 32, 1000.0, 5.0), ci_row(2, 32, 991.0, 0.1), ci_row(3, 32, 999.0, 0.1)]
    ch = analysis.choose_for_level(list(analysis.aggregate(rows, capacity=cap).values()))
    assert ch.chosen.config_id == "k3-t1" and "k2-t1" not in ch.equivalent, ch.verdict
    assert "k2-t1" not in ch.verdict


def test_the_workload_yardstick_is_the_best_of_the_scored():
    """k4 measured at C=1 only is not scored, so it is not the yardstick there either: it rescaled
    the others' C=1 terms and flipped the pick (docs/tuner.md "Choosing")."""
    rows = [ci_row(2, 1, 100.0, 1.0), ci_row(2, 64, 1000.0, 1.0), ci_row(3, 1, 120.0, 1.0), ci_row(3, 64, 900.0, 1.0)]
    two = analysis.recommend(analysis.aggregate(rows), [1, 64], None)
    three = analysis.recommend(analysis.aggregate([*rows, ci_row(4, 1, 300.0, 1.0)]), [1, 64], None)
    assert set(two.scores) == set(three.scores) == {"k2-t1", "k3-t1"}
    assert two.chosen.config_id == three.chosen.config_id == "k3-t1"
    assert three.scores == two.scores


def test_restart_noise_adds_up_across_a_deployments_levels_in_the_score():
    """A restart moves every level of a deployment together (tuner/measure/restarts.py): the score's
    interval sums the levels' widths; in quadrature it was narrower by sqrt(levels) and identical
    configurations read 'beyond noise'."""
    levels = [1, 4, 16, 32, 64]
    rows = []
    for k, drift in ((3, 1.0), (4, 1.02)):
        for c in levels:
            for dep, f in ((1, 0.985), (2, 1.015)):
                rows.append(ci_row(k, c, 100.0 * c * drift * f, 0.5, dep=dep))
    stats = analysis.aggregate(rows)
    assert all(p.interval.noise == "deployments" for p in stats.values())
    rec = analysis.recommend(stats, levels, None)
    lo, hi = rec.score_ci["k3-t1"]
    best = {c: max(p.mean for (cid, cc), p in stats.items() if cc == c) for c in levels}
    rel = [stats[("k3-t1", c)].interval.half_width / best[c] for c in levels]
    assert (hi - lo) / 2 == pytest.approx(sum(rel) / len(rel), rel=0.02)
    assert rec.chosen.config_id == "k4-t1" and "beyond noise" not in rec.reason and rec.tied_with == ["k3-t1"]


def test_a_restart_band_below_the_levels_own_noise_leaves_a_beyond_noise_pick_as_it_is():
    """Two starts whose spread is far below every level's own noise (+-2.5% a level, the starts
    0.2% apart) add that small band to each level and sum only it across the levels; the rest stays
    in quadrature. Summing the whole widths once any restart spread was measured made a tie of a
    pick that one start shows beyond noise (bench/schedule_vs_static/seed: k4 over k3)."""
    levels = [1, 4, 16, 32, 64]
    rows = [
        ci_row(k, c, 100.0 * c * drift * f, 2.5, dep=dep)
        for k, drift in ((3, 1.0), (4, 1.03))
        for c in levels
        for dep, f in ((1, 0.999), (2, 1.001))
    ]
    first = analysis.recommend(analysis.aggregate([r for r in rows if r.deployment == 1]), levels, None)
    assert first.chosen.config_id == "k4-t1" and "beyond noise" in first.reason
    stats = analysis.aggregate(rows)
    assert all(p.interval.noise == "deployments" for p in stats.values())
    assert all(0 < p.interval.shared_rel < (p.interval.rel_half_width or 0) / 3 for p in stats.values())
    pooled = analysis.recommend(stats, levels, None)
    assert pooled.chosen.config_id == "k4-t1" and "beyond noise" in pooled.reason, pooled.reason


def test_a_configuration_measured_at_some_levels_only_is_named_not_silently_dropped():
    """A sweep stopped inside k3's levels: k3 beat k2 at C=1 and C=4 beyond noise, and the workload
    recommendation (k2, "beyond noise") left it out without a word while the report's note said it
    weighed it at the levels it had."""
    rows = [ci_row(2, c, 100.0 * c, 1.0) for c in (1, 4, 16)] + [ci_row(3, c, 130.0 * c, 1.0) for c in (1, 4)]
    rec = analysis.recommend(analysis.aggregate(rows), [1, 4, 16], None)
    assert rec.chosen.config_id == "k2-t1" and "k3-t1" not in rec.scores
    assert rec.workload["unscored"] == {"k3-t1": ["C=16"]}
    assert "not scored, not measured at every target level: k3-t1 (no C=16)" in rec.reason


def test_a_level_measured_at_0_tok_s_everywhere_is_left_out_not_the_whole_recommendation():
    """Every configuration at 0 tok/s at one level: the yardstick 0 dropped every configuration and
    the sweep read "no configuration competes at every target level"; the level is left out, named."""
    rows = [ci_row(k, c, 100.0 * k * c, 1.0) for k in (2, 3) for c in (4, 16)]
    rows += [row(k, 1, 0.0) for k in (2, 3)]
    rec = analysis.recommend(analysis.aggregate(rows), [1, 4, 16], None)
    assert rec.chosen is not None and rec.chosen.config_id == "k3-t1", rec.reason
    assert rec.workload["left_out"] == {"1": "no throughput measured (0 tok/s)"}
    assert "left out: C=1 (no throughput measured (0 tok/s))" in rec.reason
    # one not run at the level left out competes at every level that remains
    k5 = analysis.recommend(
        analysis.aggregate([*rows, *(ci_row(5, c, 400.0 * c, 1.0) for c in (4, 16))]), [1, 4, 16], None
    )
    assert k5.chosen is not None and k5.chosen.config_id == "k5-t1" and "unscored" not in k5.workload, k5.reason


def test_a_level_where_every_request_failed_is_named_not_dropped():
    """A level whose every request failed on a live server (HTTP 500s, timeouts) has no throughput:
    the choice dropped it, so the survivor read 'only configuration measured' with no word of the
    other, and a level where every configuration failed vanished from the recommendation, which
    scored the others without naming it (docs/tuner.md "Choosing": left out and named)."""
    from tuner.data.records import DeployRecord, SweepState
    from tuner.present.summary import recommendation_json, summarize
    from tuner.spec.sweepspec import SweepSpec, WorkloadSpec

    def ok(k, c, tput):
        r = ci_row(k, c, tput, 1.0)
        r.metrics.requests, r.metrics.requests_ok = 8, 8
        return r

    def failed(k, c):
        r = row(k, c, None, status="failed")
        r.metrics.requests, r.metrics.requests_ok, r.metrics.requests_failed = 8, 0, 8
        return r

    deploys = [DeployRecord(config=SpecConfig(k), host="h", capacity={"max_total_num_tokens": 1000}) for k in (2, 3)]
    spec = SweepSpec(workload=WorkloadSpec(concurrency=(1, 64), input_len=256, output_len=256), steps=(2, 3))
    # k3 failed every request at C=64; k2 did not
    s = summarize(SweepState.fold([*deploys, ok(2, 1, 100), ok(3, 1, 103), ok(2, 64, 3000), failed(3, 64)]), spec)
    c64 = recommendation_json(s)["by_concurrency"]["64"]
    assert c64["config_id"] == "k2-t1" and c64["excluded"] == {
        "k3-t1": "requests failed (8): not compared as if complete"
    }
    # both failed every request at C=64: the level is named, with the reason, and left out of the score
    s = summarize(SweepState.fold([*deploys, ok(2, 1, 100), ok(3, 1, 103), failed(2, 64), failed(3, 64)]), spec)
    rec = recommendation_json(s)
    assert rec["by_concurrency"]["64"]["config_id"] is None
    assert "requests failed" in rec["by_concurrency"]["64"]["reason"]
    assert "requests failed" in rec["recommended"]["workload"]["left_out"]["64"]
    assert "left out: C=64" in rec["recommended"]["reason"]
    # nothing of it is plotted or tabulated as a measurement
    assert ("k3-t1", 64) not in s.stats and ("k2-t1", 64) not in s.stats


def test_a_target_level_nothing_was_measured_at_is_named():
    """A partial sweep (`report DIR` while it runs, or one stopped early): a target level with no
    measurement at all was missing from `left_out`, `by_concurrency` and the reason, and the
    recommendation read as if over every level."""
    stats = analysis.aggregate([ci_row(2, 4, 700.0, 1.0), ci_row(3, 4, 650.0, 1.0)])
    assert analysis.unchosen(stats, [4, 32]) == {32: "nothing was measured"}
    rec = analysis.recommend(stats, [4, 32], None)
    assert rec.workload["left_out"] == {"32": "nothing was measured"} and "left out: C=32" in rec.reason


def test_the_steps_axis_of_one_measured_depth_reads_in_whole_steps(tmp_path, monkeypatch):
    """One depth measured (or the baseline alone, with the others failed): matplotlib's autoscale
    spans +-0.2 around it and ticked 2.80, 2.84, ...; the three panels share one steps axis, at least
    two steps wide, and an empty panel says that nothing was measured instead of an empty legend."""
    import matplotlib.pyplot as plt

    from tuner.present import plots

    stats = analysis.aggregate([ci_row(3, 1, 100.0, 1.0)])
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    plots.plot_throughput(tmp_path / "p.png", stats, [1], [], title="t", failed=[SpecConfig(1), SpecConfig(5)])
    axes = figs[0].axes[:3]
    for ax in axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert len({ax.get_xlim() for ax in axes}) == 1

    figs.clear()
    plots.plot_throughput(tmp_path / "q.png", {}, [1], [], title="t", failed=[SpecConfig(1)])
    texts = [t.get_text() for t in figs[0].axes[0].texts]
    assert "nothing measured" in texts and figs[0].axes[0].get_legend() is None


def test_a_level_where_everything_measured_nothing_is_named_not_a_division_by_zero():
    from test_tuner_envelope import deploy, level

    from tuner.data.records import SweepState
    from tuner.spec.configs import SpecConfig

    k2, k3 = SpecConfig(2), SpecConfig(3)
    state = SweepState.fold(
        [deploy(k2, 300000), level(k2, 4, 0.0, 4, 2.0), deploy(k3, 360000), level(k3, 4, 0.0, 4, 2.0)]
    )
    cap = {cid: d.max_total_num_tokens for cid, d in state.deploys.items()}
    every = analysis.aggregate(state.levels(), capacity=cap)
    assert "at concurrency 4" in analysis.recommend(every, [4], [4]).reason


def test_the_schedule_written_is_the_one_its_temperature_recommends():
    """`schedule` (and the CLI's line) for a temperature's view is that view's recommendation: a later
    temperature whose pick is an adaptive config printed `schedule: null` after the first's static pick."""
    import dataclasses
    from pathlib import Path

    from tuner.data.store import Store
    from tuner.present.summary import schedule_json, summarize

    kept = Store(Path(__file__).resolve().parents[2] / "bench" / "schedule_vs_static" / "seed")
    s = summarize(kept.state(), kept.read_spec())
    view = s.primary_view
    assert view is not None and view.recommendation.chosen is not None
    assert view.recommendation.chosen.config.is_schedule  # this kept sweep recommends an adaptive config
    wanted = schedule_json(s, view)["schedule"]
    assert isinstance(wanted, dict) and wanted
    # the same view under a sweep whose first temperature picked a static depth
    static = next(r for r in (v.static for v in s.views.values()) if r is not None and r.chosen is not None)
    other = dataclasses.replace(s, recommendation=static)
    assert schedule_json(other, view)["schedule"] == wanted


def test_a_temperature_whose_every_request_failed_is_reported_not_dropped():
    """`--temperature 0,0.7` where every request at 0.7 failed: 0.7 gets its view with each level's
    reason, and the notes do not say only greedy decoding was measured (it was asked for, and failed)."""
    from tuner.data.records import SweepState
    from tuner.present.summary import summarize
    from tuner.spec.sweepspec import SweepSpec, WorkloadSpec

    recs = []
    for k, tput in ((2, 1000.0), (3, 1100.0)):
        recs.append(ci_row(k, 4, tput, 2.0))
        bad = row(k, 4, None, status="failed")
        bad.temperature = 0.7
        bad.metrics.requests_ok, bad.metrics.requests_failed = 0, 4
        recs.append(bad)
    spec = SweepSpec(workload=WorkloadSpec(concurrency=(4,), input_len=16, output_len=16, temperature=(0.0, 0.7)))
    s = summarize(SweepState.fold(recs), spec)
    assert set(s.views) == {0.0, 0.7}
    hot = s.views[0.7]
    assert hot.recommendation.chosen is None and "requests failed (4)" in hot.unchosen[4], hot.unchosen
    assert s.recommendation.chosen is not None  # the first temperature's stands
    assert not any("only greedy decoding" in n for n in s.notes), s.notes
