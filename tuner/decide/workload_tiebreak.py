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
) -> tuple[str, str]:
    """(the chosen configuration, the recommendation's clause on the tie, `tie_words`); `cells`:
    configuration -> level -> PointStats (interval, tie_key)."""
    kept, best = _kept(scores, ivs, cells, levels)
    eligible = [
        cid for cid in kept if scores[cid] >= scores[best] * (1.0 - min_rel) or _levels_won(cells, levels, cid, best)
    ]
    chosen = min(eligible, key=lambda cid: cells[cid][levels[0]].tie_key)
    return chosen, tie_words(chosen, kept, best, scores, ivs, cells, levels, min_rel)


def _levels_won(cells: Mapping[str, Mapping[int, Any]], levels: Sequence[int], a: str, b: str) -> list[int]:
    """The levels where `a` beats `b` beyond noise."""
    return [c for c in levels if st.beats(cells[a][c].interval, cells[b][c].interval)]


def _kept(
    scores: Mapping[str, float],
    ivs: Mapping[str, Interval],
    cells: Mapping[str, Mapping[int, Any]],
    levels: Sequence[int],
) -> tuple[list[str], str]:
    """The tied configurations that are not dominated, and the highest score among them."""
    top = max(scores, key=lambda k: scores[k])
    tied = [cid for cid in scores if not st.beats(ivs[top], ivs[cid])]

    def dominated(cid: str) -> bool:
        return any(
            o != cid and _levels_won(cells, levels, o, cid) and not _levels_won(cells, levels, cid, o) for o in tied
        )

    # (intervals do not order transitively: should every tied one be dominated, all stay)
    kept = [cid for cid in tied if not dominated(cid)] or tied
    return kept, max(kept, key=lambda k: scores[k])


def tie_words(
    chosen: str,
    kept: Sequence[str],
    best: str,
    scores: Mapping[str, float],
    ivs: Mapping[str, Interval],
    cells: Mapping[str, Mapping[int, Any]],
    levels: Sequence[int],
    min_rel: float,
) -> str:
    """The recommendation's clause on the tie: the configurations whose intervals overlap the
    chosen one's (recommendation.json `tied_with`), the ones left out as dominated, and why the
    chosen one was taken (the highest score, within 1% of it, or a level it wins); `kept` and
    `best` as `_kept` gives them."""
    tied = [cid for cid in scores if cid != chosen and ivs[cid].overlaps(ivs[chosen])]
    if not tied:
        return ", beyond noise" if len(scores) > 1 else ""
    text = f"; tied within noise with {', '.join(tied)}"
    out = [cid for cid in tied if cid not in kept]
    # two reasons to be left out (`_kept`): a score the highest beats beyond noise (the chosen one's
    # interval may still meet it), or dominated among those the highest does not beat
    top = max(scores, key=lambda k: scores[k])
    below = [cid for cid in out if st.beats(ivs[top], ivs[cid])]
    dominated = [cid for cid in out if cid not in below]
    if below:
        text += f" ({', '.join(below)} left out: its score below {top}'s beyond noise)"
    if dominated:
        text += f" ({', '.join(dominated)} left out: beaten beyond noise at a level by another tied one, winning none)"
    if chosen == best:
        first = levels[0]

        def cheaper(among: Sequence[str]) -> list[str]:
            return [cid for cid in among if cells[cid][first].tie_key < cells[chosen][first].tie_key]

        if cheaper(kept):
            why = " (no cheaper one within 1% of it or winning a level)"
        elif cheaper(out):  # a cheaper tied one left out as dominated: the chosen one is not the cheaper
            why = f" (the cheaper {', '.join(cheaper(out))} left out)"
        else:
            why = " (also the cheaper setting)"
        return text + ", the highest score taken" + why
    text += ", so the tie-break (more KV capacity, then fewer steps) chose it"
    if scores[chosen] >= scores[best] * (1.0 - min_rel):
        return text + f", within {min_rel:.0%} of the highest"
    wins = [str(c) for c in _levels_won(cells, levels, chosen, best)]
    return (
        text
        + f": {scores[chosen] / scores[best] - 1:+.1%} on the score but it wins C={', '.join(wins)} beyond noise against {best}"
    )
