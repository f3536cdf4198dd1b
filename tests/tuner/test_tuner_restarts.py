"""The pooled deployment-to-deployment component and the confirmation round's planner
(tuner/measure/restarts.py; docs/tuner.md "Verdicts across restarts")."""

from __future__ import annotations

import random

import pytest

from tuner.measure import restarts
from tuner.measure import stats as st
from tuner.measure.stats import Interval


def own(value: float, rel: float) -> Interval:
    return Interval(value, value * (1 - rel), value * (1 + rel), 64, "requests")


def test_no_redeploy_no_pooled_noise() -> None:
    cells = {("k3-t1", 4): [(100.0, own(100.0, 0.02), 1)], ("k4-t1", 4): [(110.0, own(110.0, 0.02), 1)]}
    assert restarts.pool(cells) is None


def test_df_counts_starts_not_cells() -> None:
    # one configuration redeployed once, measured at five levels: one new draw of the restart
    cells = {("k3-t1", c): [(100.0, own(100.0, 0.01), 1), (103.0, own(103.0, 0.01), 2)] for c in (1, 4, 16, 32, 64)}
    noise = restarts.pool(cells)
    assert noise is not None
    assert noise.df == 1 and noise.cells == 5 and noise.configs == 1
    assert noise.t == pytest.approx(12.706, abs=0.01)


def test_own_noise_is_taken_out_of_the_component_but_not_of_the_band() -> None:
    # deployments that differ by less than their own intervals allow: no restart component left
    # (the reported `rel_sd`), yet the band rests on the deployments' spread itself: a redeploy that
    # moved the value 2% is what the next start may do again, whatever the requests' noise explains
    cells = {}
    for i in range(6):
        cells[(f"k{i}-t1", 4)] = [(100.0, own(100.0, 0.05), 1), (102.0, own(102.0, 0.05), 2)]
    noise = restarts.pool(cells)
    assert noise is not None and noise.rel_sd == 0.0 and noise.raw_rel_sd > 0.0
    assert noise.band_rel == pytest.approx(noise.t * noise.raw_rel_sd)
    one = restarts.widen([(100.0, own(100.0, 0.001), 1)], noise)
    assert one is not None and one.rel_half_width == pytest.approx(noise.band_rel, rel=1e-6)


def test_a_component_estimated_at_zero_still_covers_the_next_start() -> None:
    # Two extra starts (df 2), a restart sd as large as the levels' own noise: the component (own
    # noise taken out) is often estimated at 0 and a band built on it alone carries the levels' own
    # noise only. The deployments' spread with its own quantile, t975(2) = 4.30, keeps >= 90%.
    rng = random.Random(5)
    zero = hit = total = 0
    for _sweep in range(600):
        true = {(f"k{c}", lv): 1000.0 + 30.0 * c + 500.0 * (lv == 32) for c in range(3) for lv in (4, 32)}
        rows: dict[tuple[str, int], list[restarts.Row]] = {k: [] for k in true}
        for c, dep in [(0, 1), (1, 1), (2, 1), (1, 2), (2, 2)]:
            b = rng.gauss(0.0, 0.015)
            for lv in (4, 32):
                v = true[(f"k{c}", lv)] * (1 + b + rng.gauss(0.0, 0.026 / restarts.Z975))
                rows[(f"k{c}", lv)].append((v, own(v, 0.026), dep))
        noise = restarts.pool(rows)
        assert noise is not None and noise.df == 2
        zero += noise.rel_sd == 0.0
        for k, r in rows.items():
            iv = restarts.widen(r, noise)
            assert iv is not None
            total += 1
            hit += iv.low <= true[k] <= iv.high
    assert zero / 600 > 0.2  # the component alone would be nothing in a fifth of the sweeps or more
    assert hit / total >= 0.90


def test_pooled_estimate_recovers_a_known_spread() -> None:
    rng = random.Random(7)
    sd_d = 0.02
    cells: dict[tuple[str, int], list[restarts.Row]] = {}
    for c in range(200):
        for dep in (1, 2, 3):
            b = rng.gauss(0.0, sd_d)  # shared by the deployment's levels
            for level in (4, 32):
                v = 1000.0 * (1 + b + rng.gauss(0.0, 0.005))
                cells.setdefault((f"c{c}", level), []).append((v, own(v, 0.005 * restarts.Z975), dep))
    noise = restarts.pool(cells)
    assert noise is not None and noise.df == 400
    assert noise.rel_sd == pytest.approx(sd_d, rel=0.1)


def test_anomaly_of_three_deployments_each_pooled_separates_a_12pct_gap() -> None:
    # bench/noise.md's restarts mode: k4 ~12% above k3 at C=4, three deployments each, ~2.5% spread
    # between deployments. Per cell (t on 2 df, sd from three values) the intervals overlap, so the
    # tie-break chose k3 (more KV capacity); pooled over the cells (df 4) k4 wins beyond noise.
    k3 = [630.0, 655.0, 668.0]
    k4 = [700.0, 742.0, 728.0]
    rows = {
        ("k3-t1", 4): [(v, own(v, 0.02), d) for d, v in enumerate(k3, 1)],
        ("k4-t1", 4): [(v, own(v, 0.02), d) for d, v in enumerate(k4, 1)],
        ("k3-t1", 32): [(v, own(v, 0.02), d) for d, v in enumerate([1640.0, 1700.0, 1610.0], 1)],
        ("k4-t1", 32): [(v, own(v, 0.02), d) for d, v in enumerate([1600.0, 1690.0, 1650.0], 1)],
    }
    per_cell = {k: st.combine(v) for k, v in rows.items()}
    assert per_cell[("k4-t1", 4)] is not None and per_cell[("k3-t1", 4)] is not None
    assert per_cell[("k4-t1", 4)].overlaps(per_cell[("k3-t1", 4)])  # today: tied
    noise = restarts.pool(rows)
    assert noise is not None and noise.df == 4
    pooled = {k: restarts.widen(v, noise) for k, v in rows.items()}
    assert st.beats(pooled[("k4-t1", 4)], pooled[("k3-t1", 4)])  # pooled: beyond noise
    assert st.tied(pooled[("k4-t1", 32)], pooled[("k3-t1", 32)])  # a 1% gap stays a tie


def test_widen_covers_the_deployment_component() -> None:
    noise = restarts.RestartNoise(rel_sd=0.02, df=3, cells=6, configs=3, raw_rel_sd=0.025)
    iv = restarts.widen([(1000.0, own(1000.0, 0.01), 1)], noise)
    assert iv is not None and iv.noise == "deployments"
    assert iv.rel_half_width == pytest.approx(st.t975(3) * 0.025, rel=1e-6)  # the deployments' spread, t on 3
    noisy = restarts.widen([(1000.0, own(1000.0, 0.2), 1)], noise)
    assert noisy is not None and noisy.rel_half_width == pytest.approx(0.2, rel=1e-6)  # never below its own
    two = restarts.widen([(1000.0, own(1000.0, 0.01), 1), (1040.0, own(1040.0, 0.01), 2)], noise)
    assert two is not None and two.estimate == pytest.approx(1020.0)
    assert two.rel_half_width is not None and two.rel_half_width < iv.rel_half_width


@pytest.mark.parametrize("starts", [2, 3])
def test_coverage_of_pooled_intervals_under_restart_noise(starts: int) -> None:
    # Many simulated sweeps: 4 configurations x 2 levels, one deployment each, a restart factor
    # shared by a deployment's levels (sd 1.5%), own noise +-1% (95%), `starts` extra starts of the two
    # closest. The pooled interval must contain the true mean in >= 90% of cells; the per-level
    # intervals of today cover far less.
    rng = random.Random(11)
    hit_new = hit_old = total = 0
    for _sweep in range(400):
        true = {(f"k{c}", lv): 1000.0 + 30.0 * c + 500.0 * (lv == 32) for c in range(4) for lv in (4, 32)}
        rows: dict[tuple[str, int], list[restarts.Row]] = {k: [] for k in true}
        plan = [(c, 1) for c in range(4)] + [((2, 3)[i % 2], 2 + i // 2) for i in range(starts)]
        for c, dep in plan:
            b = rng.gauss(0.0, 0.015)
            for lv in (4, 32):
                v = true[(f"k{c}", lv)] * (1 + b + rng.gauss(0.0, 0.01 / restarts.Z975))
                rows[(f"k{c}", lv)].append((v, own(v, 0.01), dep))
        noise = restarts.pool(rows)
        assert noise is not None
        for k, r in rows.items():
            new = restarts.widen(r, noise)
            old = st.combine([x for x in r if x[2] == 1])
            assert new is not None and old is not None
            total += 1
            hit_new += new.low <= true[k] <= new.high
            hit_old += old.low <= true[k] <= old.high
    assert hit_new / total >= 0.90
    assert hit_old / total < 0.8


def cell(cid: str, level: int, mean: float, rel: float, deps: int = 1) -> restarts.CellView:
    return restarts.CellView(cid, level, mean, own(mean, rel), deps)


def test_contenders_before_any_redeploy_are_the_closest_pair() -> None:
    cells = [
        cell("k2-t1", 32, 1600.0, 0.01),
        cell("k3-t1", 32, 1630.0, 0.01),
        cell("k4-t1", 32, 1500.0, 0.01),
        cell("k3-t1", 4, 650.0, 0.01),
        cell("k4-t1", 4, 730.0, 0.01),
        cell("k2-t1", 4, 560.0, 0.01),
    ]
    out = restarts.contenders(cells, [4, 32], None)
    ids = [c.config_id for c in out]
    # C=32: k3 vs k2 (1.9%), C=4: k4 vs k3 (12%): the closest pair first, k3 in both
    assert ids[:2] == ["k3-t1", "k2-t1"]
    assert set(out[0].levels) == {4, 32} and out[1].levels == (32,)
    assert "k4-t1" in ids  # the runner-up margin at C=4 is in doubt until a redeploy measures it


def test_contenders_interleave_and_stop_when_nothing_is_in_doubt() -> None:
    noise = restarts.RestartNoise(rel_sd=0.01, df=2, cells=4, configs=2, raw_rel_sd=0.012)
    # k3 was redeployed already, k2 not: k2 goes next
    cells = [cell("k2-t1", 32, 1600.0, 0.02), cell("k3-t1", 32, 1630.0, 0.02, deps=2)]
    out = restarts.contenders(cells, [32], noise)
    assert [c.config_id for c in out] == ["k2-t1", "k3-t1"]
    # a margin far outside both intervals: nothing to confirm
    far = [cell("k2-t1", 32, 1200.0, 0.02), cell("k3-t1", 32, 1630.0, 0.02)]
    assert restarts.contenders(far, [32], noise) == []


def test_the_round_measures_the_most_precise_target_level() -> None:
    # C=4 measured to +-1.8% in every configuration, C=32 to +-4% (its request cap): one restart
    # draw is shared by both, and C=4 mixes less of the requests' own noise into the spread
    cells = {}
    for i, cid in enumerate(("k2-t1", "k3-t1", "k4-t1")):
        cells[(cid, 4)] = [(500.0 + i, own(500.0 + i, 0.018), 1)]
        cells[(cid, 32)] = [(1600.0 + i, own(1600.0 + i, 0.04 - 0.03 * (i == 0)), 1)]
    assert restarts.precise_level(cells, [4, 32]) == 4  # by the median, not by one lucky cell
    assert restarts.precise_level(cells, [32]) == 32  # only target levels
    assert restarts.precise_level(cells, [64]) is None
    even = {("k2-t1", 4): [(100.0, own(100.0, 0.02), 1)], ("k2-t1", 16): [(200.0, own(200.0, 0.02), 1)]}
    assert restarts.precise_level(even, [16, 4]) == 4  # a tie goes to the lower level


def test_levels_measured_in_one_window_are_not_left_out_as_imprecise() -> None:
    """--requests-per-level 2x: C=1's 4 requests carry an interval (+-12-24%), C=8's 16 and C=32's 64
    one window each and none. The round took C=1, whose own noise then read as a +-29.5% restart
    band on a machine with 1.5%, and every depth tied; the level with the most requests is taken."""
    cells, requests = {}, {}
    for i, cid in enumerate(("k4-t1", "k5-t1", "k6-t1")):
        cells[(cid, 1)] = [(200.0 + i, own(200.0 + i, 0.12 + 0.04 * i), 1)]
        cells[(cid, 8)] = [(1300.0 + i, None, 1)]
        cells[(cid, 32)] = [(3900.0 + i, None, 1)]
        requests.update({(cid, 1): 4, (cid, 8): 16, (cid, 32): 64})
    assert restarts.precise_level(cells, [1, 8, 32], requests) == 32
    assert restarts.precise_level(cells, [1, 8], requests) == 8
    # every target level with its own interval: by the intervals, as before
    assert restarts.precise_level({k: v for k, v in cells.items() if k[1] == 1}, [1], requests) == 1


def test_contenders_count_a_configurations_deployments_over_all_its_levels() -> None:
    # k3 was redeployed at C=4 only (the round measures one level); it is in doubt at C=32, where its
    # cell still has one deployment: k2 goes next all the same (the two take turns)
    noise = restarts.RestartNoise(rel_sd=0.01, df=1, cells=1, configs=1, raw_rel_sd=0.012)
    cells = [
        cell("k2-t1", 4, 600.0, 0.02),
        cell("k3-t1", 4, 610.0, 0.02, deps=2),
        cell("k2-t1", 32, 1600.0, 0.02),
        cell("k3-t1", 32, 1630.0, 0.02),
    ]
    assert [c.config_id for c in restarts.contenders(cells, [4, 32], noise)][0] == "k2-t1"
