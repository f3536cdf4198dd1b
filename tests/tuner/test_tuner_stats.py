"""The statistics every comparison uses (tuner/measure/stats.py): quantiles, intervals, coverage, beyond noise."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as sps

from tuner.measure import stats
from tuner.measure.stats import Interval


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 30, 200])
def test_t_quantile_matches_scipy(df):
    assert stats.t975(df) == pytest.approx(sps.t.ppf(0.975, df), rel=1e-9)
    assert stats.t_quantile(0.9, df) == pytest.approx(sps.t.ppf(0.9, df), rel=1e-9)
    assert stats.t_quantile(0.1, df) == pytest.approx(sps.t.ppf(0.1, df), rel=1e-9)


def test_binomial_cdf_matches_scipy():
    cdf = stats.binom_cdfs(25, 0.5)
    assert [round(c, 12) for c in cdf] == [round(float(sps.binom.cdf(k, 25, 0.5)), 12) for k in range(26)]


def test_mean_interval_is_the_t_interval():
    iv = stats.mean_interval([10.0, 12.0, 11.0, 13.0], "repeats")
    m, sd = 11.5, math.sqrt(5 / 3)
    hw = sps.t.ppf(0.975, 3) * sd / 2
    assert (iv.estimate, iv.n, iv.noise) == (m, 4, "repeats")
    assert iv.low == pytest.approx(m - hw) and iv.high == pytest.approx(m + hw)
    assert stats.mean_interval([5.0], "repeats") is None


def test_ratio_interval_is_the_level_aggregate_and_covers():
    # windows of (tokens, seconds): the estimate is sum/sum, whatever the windows' sizes
    iv = stats.ratio_interval([(100.0, 1.0), (220.0, 2.0), (90.0, 1.0)], n=12)
    assert iv.estimate == pytest.approx(410 / 4) and iv.n == 12 and iv.noise == "requests"
    assert iv.low < iv.estimate < iv.high
    assert stats.ratio_interval([(100.0, 1.0)]) is None
    # coverage: windows drawn around a known rate; the 95% interval holds it ~95% of the time
    rng = random.Random(7)
    hits = 0
    for _ in range(2000):
        ws = []
        for _ in range(8):
            sec = rng.uniform(0.5, 1.5)
            ws.append((1000.0 * sec * rng.gauss(1.0, 0.05), sec))
        hits += stats.ratio_interval(ws).low <= 1000.0 <= stats.ratio_interval(ws).high
    assert 0.92 <= hits / 2000 <= 0.98


def test_median_interval_from_order_statistics_covers():
    rng = random.Random(3)
    hits = 0
    for _ in range(1500):
        xs = [rng.expovariate(1.0) for _ in range(25)]
        iv = stats.quantile_interval(xs, 0.5)
        hits += iv.low <= math.log(2) <= iv.high
        assert iv.low <= iv.estimate <= iv.high
    assert hits / 1500 >= 0.94  # exact binomial ranks: at least 95% up to sampling error
    assert stats.quantile_interval([], 0.5) is None
    one = stats.quantile_interval([4.0])
    assert (one.low, one.high) == (4.0, 4.0)


def test_combine_says_which_noise_it_covers():
    own = Interval(100.0, 98.0, 102.0, 50, "requests")
    # one level: its own interval
    iv = stats.combine([(100.0, own, 1)])
    assert (iv.low, iv.high, iv.noise, iv.n) == (98.0, 102.0, "requests", 50)
    # repeats on one deployment: the t interval over repeats
    reps = stats.combine([(100.0, own, 1), (110.0, own, 1), (105.0, own, 1)])
    assert reps.noise == "repeats" and reps.estimate == pytest.approx(105.0)
    assert reps.half_width == pytest.approx(sps.t.ppf(0.975, 2) * 5.0 / math.sqrt(3))
    # two deployments: the deployments' means, each deployment weighted equally
    deps = stats.combine([(100.0, own, 1), (102.0, own, 1), (120.0, own, 2)])
    assert deps.noise == "deployments" and deps.estimate == pytest.approx((101.0 + 120.0) / 2)
    # repeats that happen to agree do not claim more than the requests say
    tight = stats.combine([(100.0, own, 1), (100.0, own, 1)])
    assert tight.half_width == pytest.approx(math.sqrt(2 * 2.0**2) / 2)
    # nothing measured the noise: a stated floor
    floor = stats.combine([(200.0, None, 1)])
    assert floor.noise == "none" and floor.half_width == pytest.approx(2.0)


def test_beyond_noise_is_non_overlap():
    a = Interval(110.0, 105.0, 115.0)
    b = Interval(100.0, 96.0, 104.0)
    c = Interval(103.0, 99.0, 107.0)
    assert stats.beats(a, b) and not stats.beats(b, a) and stats.compare(a, b) == 1 and stats.compare(b, a) == -1
    assert stats.tied(a, c) and not stats.beats(a, c) and stats.compare(a, c) == 0
    assert a.rel_half_width == pytest.approx(5 / 110)


def test_a_latency_interval_never_reaches_below_zero():
    """Two deployments' TTFT medians of 652 and 530 ms give a t interval (one degree of freedom,
    t = 12.7) of 591 [-187, 1,369]: the report printed the negative bound (bench/schedule_vs_static)."""
    two = stats.combine([(652.2, None, 1), (529.7, None, 2)])
    assert two is not None and two.low < 0
    held = stats.nonnegative(two)
    assert held is not None and held.low == 0.0 and held.high == two.high and held.estimate == two.estimate
    inside = Interval(estimate=30.0, low=20.0, high=40.0, n=4)
    assert stats.nonnegative(inside) is inside and stats.nonnegative(None) is None


def test_deployments_of_other_repeat_counts_keep_their_requests_noise():
    """Deployment 1 measured three repeats, deployment 2 one (a confirmation redeploy), each level
    100 +-10: the estimate is the mean of the two deployments' means, whose own noise is
    0.5 * sqrt(3 * 10^2 / 9 + 10^2) = 5.77; the floor treated the four levels alike (5.0)."""
    own = Interval(estimate=100.0, low=90.0, high=110.0, n=100, noise="requests")
    iv = stats.combine([(100.0, own, 1), (100.0, own, 1), (100.0, own, 1), (100.0, own, 2)])
    assert iv is not None and iv.half_width == pytest.approx(0.5 * math.sqrt(3 * 10**2 / 9 + 10**2))
