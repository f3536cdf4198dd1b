"""Which of the configurations whose workload scores are tied within noise `recommend` takes.

One configuration serves every level, so where the scores cannot be told apart the workload's
choice is a tie-break, as per level (tuner/decide/analysis.py `choose_for_level`), and it follows
the same reading of "tied": the data cannot separate them, which does not make them equal, and
the higher score is the better bet unless the cheaper one buys something measured:

- a tied configuration that another tied one beats beyond noise at some target level and beats at
  none is out (it would give throughput away for nothing);
- of the rest, the cheaper one (more KV capacity, then fewer steps: `PointStats.tie_key`) is taken
  only when its score is within `min_rel` of the highest or it beats the highest beyond noise at some
  target level: a genuine trade-off, as no speculation that wins the high-load levels against a
  depth with a better mean score (bench/schedule_vs_static.md); otherwise the highest score.

Found on a profile of another GPU: the scores' intervals met through a noisy 4-request C=1 and a
depth 8% below the best score was taken for 0.4% more KV capacity. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..measure import stats as st
from ..measure.stats import Interval


def workload_choice(
    scores: Mapping[str, float],
    ivs: Mapping[str, Interval],
    cells: Mapping[str, Mapping[int, Any]],
    levels: Sequence[int],
    min_rel: float,
) -> tuple[str, list[str], bool]:
    """(the chosen configuration, the tied ones it was chosen among, whether the cheaper-setting
    tie-break decided); `cells`: configuration -> level -> PointStats (interval, tie_key)."""
    top = max(scores, key=lambda k: scores[k])
    tied = [cid for cid in scores if not st.beats(ivs[top], ivs[cid])]

    def wins_at(a: str, b: str) -> bool:
        return any(st.beats(cells[a][c].interval, cells[b][c].interval) for c in levels)

    def dominated(cid: str) -> bool:
        return any(o != cid and wins_at(o, cid) and not wins_at(cid, o) for o in tied)

    # (intervals do not order transitively: should every tied one be dominated, all stay)
    kept = [cid for cid in tied if not dominated(cid)] or tied
    best = max(kept, key=lambda k: scores[k])
    eligible = [cid for cid in kept if scores[cid] >= scores[best] * (1.0 - min_rel) or wins_at(cid, best)]
    first = levels[0]
    chosen = min(eligible, key=lambda cid: cells[cid][first].tie_key)
    return chosen, sorted(kept, key=lambda cid: cells[cid][first].tie_key), len(eligible) > 1
