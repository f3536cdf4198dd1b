"""The workload tie-break's words (tuner/decide/workload_tiebreak.py): why a tied configuration
was left out is the reason `_kept` left it out."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.decide.workload_tiebreak import workload_choice
from tuner.measure.stats import Interval


@dataclass(frozen=True)
class Cell:
    interval: Interval
    tie_key: tuple


def test_a_configuration_below_the_highest_score_is_not_called_dominated():
    """bench/verify_cost's shape: k4 has the highest score; k3, cheaper and within its interval, is
    taken; k5 overlaps k3 but the highest beats it beyond noise, while k5 wins C=1 and C=4 against
    both. It was said to be "beaten beyond noise at a level by another tied one, winning none"."""
    scores = {"k3": 0.8996, "k4": 0.9228, "k5": 0.8814}
    ivs = {
        "k3": Interval(0.8996, 0.8849, 0.9142),
        "k4": Interval(0.9228, 0.9041, 0.9415),
        "k5": Interval(0.8814, 0.8658, 0.8970),
    }
    per_level = {  # (tok/s, half-width) at C=1 and C=4: k5 wins both beyond noise
        "k3": {1: (242.0, 4.4), 4: (780.0, 14.0)},
        "k4": {1: (245.9, 4.4), 4: (791.7, 14.4)},
        "k5": {1: (285.0, 4.8), 4: (879.0, 16.1)},
    }
    keys = {"k3": (0, 3), "k4": (0, 4), "k5": (0, 5)}  # fewer steps is cheaper
    cells = {
        cid: {c: Cell(Interval(m, m - h, m + h), keys[cid]) for c, (m, h) in lv.items()}
        for cid, lv in per_level.items()
    }
    chosen, words = workload_choice(scores, ivs, cells, [1, 4], 0.03)
    assert chosen == "k3"
    assert "k5 left out: its score below k4's beyond noise" in words, words
    assert "winning none" not in words, words
