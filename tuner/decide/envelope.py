"""The envelope (pure): every recommendation set against what a user could run instead, measured in
the same sweep, and the recommendation itself chosen among them.

The references, per concurrency level: the level's best static depth, the best single static depth
(one depth for the whole workload), SGLang's default adaptive config (`--speculative-adaptive`
without a file) and a true no-speculation server (spec_steps 0: its own deployment, which keeps the
KV pool and the running-request limit of a server without a draft model, unlike a 0-step bucket
of an adaptive server, which still runs the draft's extend pass and reserves the draft's KV).

The recommendation is whichever of a static depth (no speculation included), SGLang's default
adaptive config and the tuned adaptive configs is best beyond noise on the workload's objective
(tuner/decide/analysis.py `recommend`: one level's throughput, or the equal-weight mean of
throughput relative to each level's best, with its 95% interval); when several are tied within
noise with the best, the simplest wins: a static depth, then SGLang's default, then a tuned
config (a tuned config must earn its extra runtime states and the file it needs).

The words each level gets ("the default ran depth 7.0 at batch 1") are read from the cells'
measurements: the running batch the server reported (its /metrics gauge) and the accept length
(SGLang's own token and verify counts), never written by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..measure import stats as st
from ..spec.configs import SpecConfig
from . import analysis
from .adaptive_search import accepted_drafts, infer_depth
from .analysis import PointStats, Recommendation
from .schedule_phase import level_batch

KIND_ORDER = {"static": 0, "no_speculation": 0, "adaptive_default": 1, "adaptive_tuned": 2}
KV_WARN_PCT = 10.0
REFERENCES = (
    ("level_best_static", "the level's best static depth"),
    ("best_static", "the best single static depth"),
    ("default_adaptive", "SGLang's default adaptive config"),
    ("no_speculation", "no speculation"),
)


def kind_of(cfg: SpecConfig) -> str:
    """`static`, `no_speculation`, `adaptive_default` or `adaptive_tuned`."""
    if cfg.adaptive:
        return "adaptive_default"
    if cfg.is_schedule:
        return "adaptive_tuned"
    return "no_speculation" if cfg.spec_steps == 0 else "static"


def accept_length(p: PointStats) -> float | None:
    vals = p.metric("accept_length")
    return sum(vals) / len(vals) if vals else None


def drafts_curve(stats: Mapping[tuple[str, int], PointStats], max_depth: int = 16) -> dict[int, float]:
    """E(c) (accepted drafts per verify step) from the static chains' accept lengths, pooled over levels."""
    by_depth: dict[int, list[float]] = {}
    for p in stats.values():
        c = p.config
        if (
            c.is_schedule
            or c.spec_steps <= 0
            or c.spec_topk != 1
            or c.spec_draft_tokens not in (None, c.spec_steps + 1)
        ):
            continue
        a = accept_length(p)
        if a:
            by_depth.setdefault(c.spec_steps, []).append(a)
    return accepted_drafts({k: sum(v) / len(v) for k, v in by_depth.items()}, max_depth)


def describe_cell(p: PointStats, drafts: Mapping[int, float]) -> str:
    """What the server did in a cell, from its own numbers: its depth (for an adaptive config, the
    depth its accept length corresponds to), its running batch, its accept length."""
    batch = level_batch(p, None)[0]
    acc = accept_length(p)
    kind = kind_of(p.config)
    if kind == "no_speculation":
        return f"ran batch {batch:g} without a draft"
    if kind.startswith("adaptive"):
        d = infer_depth(acc, drafts)
        doc = p.config.adaptive_document()
        if d is not None and doc:
            d = min(d, float(max(s for e in doc.values() for s in e["candidate_steps"])))  # never past its widest
        depth = f"depth {d:.1f}" if d is not None else "an unknown depth"
        return f"ran {depth} at batch {batch:g}" + (f" (accept length {acc:.2f})" if acc else "")
    return f"ran depth {p.spec_steps} at batch {batch:g}" + (f" (accept length {acc:.2f})" if acc else "")


@dataclass
class Choice:
    """The recommendation among the kinds, with the objective's intervals it rests on."""

    chosen: PointStats | None
    kind: str
    reason: str
    scores: dict[str, float] = field(default_factory=dict)
    score_ci: dict[str, list[float]] = field(default_factory=dict)
    tied_with: list[str] = field(default_factory=list)


def objective(
    stats: Mapping[tuple[str, int], PointStats], ids: Sequence[str], levels: Sequence[int], target: Sequence[int] | None
) -> tuple[dict[str, float], dict[str, st.Interval], str]:
    """Each configuration's objective and its interval, scored together (`analysis.recommend`'s
    rule: one level's throughput, or the equal-weight relative mean over the target levels)."""
    tlevels = list(target) if target else list(levels)
    cells = {k: p for k, p in stats.items() if k[0] in ids and k[1] in tlevels}
    if len(tlevels) == 1:
        c = tlevels[0]
        ivs = {cid: cells[(cid, c)].interval for cid in ids if (cid, c) in cells and analysis.competes(cells[(cid, c)])}
        return {k: v.estimate for k, v in ivs.items()}, ivs, f"throughput at concurrency {c}"
    rec = analysis.recommend(dict(cells), levels, target)
    ivs = {cid: st.Interval(rec.scores[cid], ci[0], ci[1], 0, "requests") for cid, ci in rec.score_ci.items()}
    return dict(rec.scores), ivs, "mean relative throughput"


def choose(
    every: Mapping[tuple[str, int], PointStats],
    static: Recommendation,
    levels: Sequence[int],
    target: Sequence[int] | None,
) -> Choice:
    """The best beyond noise among the best single static depth, SGLang's default adaptive config
    and every tuned adaptive config measured; ties go to the simpler kind."""
    if static.chosen is None:
        return Choice(None, "static", static.reason)
    configs = {p.config.config_id: p.config for p in every.values()}
    ids = [static.chosen.config_id] + sorted(cid for cid, c in configs.items() if c.is_schedule)
    scores, ivs, name = objective(every, ids, levels, target)
    if static.chosen.config_id not in ivs:
        return Choice(static.chosen, kind_of(static.chosen.config), static.reason)
    top = max(ivs, key=lambda k: ivs[k].estimate)
    tied = [cid for cid in ivs if not st.beats(ivs[top], ivs[cid])]
    # ties do not chain (as analysis.choose_for_level): one the top does not beat may still be
    # beaten beyond noise by another of them, and then it is not the simpler kind's to take
    tied = [cid for cid in tied if not any(st.beats(ivs[o], ivs[cid]) for o in tied)]
    pick = min(tied, key=lambda cid: (KIND_ORDER[kind_of(configs[cid])], -ivs[cid].estimate))
    kind = kind_of(configs[pick])
    base = ivs[static.chosen.config_id]
    # the pick's cell at the first level it was scored on (a level where nothing competed is left
    # out of the score, and the pick may have no cell there)
    scored = [
        every[(pick, c)] for c in (target or levels) if (pick, c) in every and analysis.competes(every[(pick, c)])
    ]
    chosen = static.chosen if pick == static.chosen.config_id else (scored[0] if scored else None)
    if pick == static.chosen.config_id:
        others = [cid for cid in ivs if cid != pick]
        if not others:
            reason = static.reason
        else:
            ahead = [cid for cid in others if st.beats(ivs[pick], ivs[cid])]
            level = [cid for cid in others if ivs[cid].overlaps(ivs[pick])]
            reason = (
                static.reason
                + (f"; on the {name} it beats {', '.join(ahead)} beyond noise" if ahead else "")
                + (f"; tied within noise with {', '.join(level)}, and a static depth is the simpler" if level else "")
            )
    else:
        diff = (ivs[pick].estimate - base.estimate) / base.estimate * 100.0 if base.estimate else 0.0
        verdict = "beyond noise" if st.beats(ivs[pick], base) else "tied within noise"
        reason = f"{configs[pick].label}: {name} {diff:+.1f}% against the best static depth {static.chosen.config_id}, {verdict}"
        rest = [cid for cid in tied if cid != pick]
        if rest:
            reason += (
                f"; tied within noise with {', '.join(rest)} (no simpler kind among them; this one scored highest)"
            )
        if pick != top:
            reason += f"; {top} scored higher but not beyond noise, and {configs[pick].label} is simpler"
    return Choice(
        chosen,
        kind,
        reason,
        scores,
        {cid: iv.as_list(4) for cid, iv in ivs.items()},
        [cid for cid in ivs if cid != pick and ivs[cid].overlaps(ivs[pick])],
    )


@dataclass
class Envelope:
    """Per level: the recommendation and the four references, each a cell (absent where not measured)."""

    rows: dict[int, dict[str, PointStats]] = field(default_factory=dict)
    words: dict[int, str] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    drafts: dict[int, float] = field(default_factory=dict)
    # the objective the recommendation was chosen on, scored over its candidates together (`choose`)
    objective: dict[str, Any] = field(default_factory=dict)
    # every configuration measured at a level (static depths and tuned schedules): "wins beyond
    # noise" must hold against them all, not only against the columns (a column's winner tied with
    # a configuration no column shows is tied)
    rivals: dict[int, list[PointStats]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def cell(p: PointStats) -> dict[str, Any]:
            return {
                "config_id": p.config_id,
                "kind": kind_of(p.config),
                "output_tok_s": round(p.mean, 2),
                "output_tok_s_ci95": p.interval.as_list(2),
                "running_batch": level_batch(p, None)[0],
                "accept_length": None if accept_length(p) is None else round(accept_length(p) or 0.0, 3),
            }

        return {
            "per_level": {
                str(c): {**{k: cell(v) for k, v in row.items()}, "who_wins": self.words.get(c)}
                for c, row in sorted(self.rows.items())
            },
            "summary": self.summary,
            "objective": self.objective or None,
        }


def build(
    every: Mapping[tuple[str, int], PointStats],
    static_stats: Mapping[tuple[str, int], PointStats],
    recommended: PointStats | None,
    best_static: PointStats | None,
    levels: Sequence[int],
) -> Envelope:
    """The envelope of the recommendation at every level, with who wins each level and why."""
    env = Envelope(drafts=drafts_curve(static_stats))
    choices = analysis.by_concurrency(dict(static_stats), levels)
    default_id = next((p.config_id for p in every.values() if p.config.adaptive), None)
    for c in levels:
        row: dict[str, PointStats] = {}
        if recommended is not None and (recommended.config_id, c) in every:
            row["recommended"] = every[(recommended.config_id, c)]
        ch = choices.get(c)
        if ch is not None:
            row["level_best_static"] = ch.chosen
        if best_static is not None and (best_static.config_id, c) in every:
            row["best_static"] = every[(best_static.config_id, c)]
        if default_id is not None and (default_id, c) in every:
            row["default_adaptive"] = every[(default_id, c)]
        if ("k0", c) in every:
            row["no_speculation"] = every[("k0", c)]
        if row:
            env.rows[c] = row
            # every configuration measured at the level, tuned adaptive ones included: a tuned
            # schedule measured higher than the column's pick was left out of "wins beyond noise"
            env.rivals[c] = [p for (_cid, cc), p in every.items() if cc == c]
            env.words[c] = who_wins(row, env.drafts, env.rivals[c])
    env.summary = summary_lines(env)
    return env


def _name(key: str, p: PointStats) -> str:
    kind = kind_of(p.config)
    if kind == "adaptive_default":
        name = "SGLang's default"
    elif kind == "no_speculation":
        name = "no speculation"
    else:
        name = p.config.label
    return f"the recommendation ({name})" if key == "recommended" and kind == "adaptive_tuned" else name


def who_wins(row: Mapping[str, PointStats], drafts: Mapping[int, float], rivals: Sequence[PointStats] = ()) -> str:
    """Who is fastest at this level, beyond noise or tied (against the columns and every
    configuration measured there, `rivals`), and what the measurements say it did."""
    distinct: dict[str, tuple[str, PointStats]] = {}
    columns = ("recommended", "level_best_static", "best_static", "default_adaptive", "no_speculation")
    for key, p in [*((k, row.get(k)) for k in columns), *(("static", q) for q in rivals)]:
        if p is not None and analysis.competes(p) and p.config_id not in distinct:
            distinct[p.config_id] = (key, p)
    if not distinct:
        return "nothing measured here competes (lost requests, failed the gate or missed the SLO)"
    ranked = sorted(distinct.values(), key=lambda kp: -kp[1].mean)
    key, best = ranked[0]
    tied = [kp for kp in ranked[1:] if not best.beats(kp[1])]
    if len(ranked) == 1:  # nothing to win against: not "beyond noise" (a `bench --out` of one server)
        head = f"{_name(key, best)} is the only configuration here that competes"
    elif not tied:
        head = f"{_name(key, best)} wins beyond noise"
    else:
        head = f"{_name(key, best)} is fastest, tied within noise with " + ", ".join(_name(k, p) for k, p in tied)
    out = f"{head} ({_tok_s(best.mean)} tok/s): it {describe_cell(best, drafts)}"
    if len(ranked) > 1:
        k2, second = (tied or ranked[1:])[0]
        out += f"; {_name(k2, second)} {describe_cell(second, drafts)} ({_tok_s(second.mean)} tok/s)"
    return out


def _tok_s(value: float) -> str:
    """Whole tokens per second, as the envelope states them; a server under half a token per second
    keeps its figures (0.024, not 0)."""
    return st.fixed(value, 0) if abs(value) >= 0.5 else st.fixed(value, 1)


def summary_lines(env: Envelope) -> list[str]:
    """Statements over the levels: from which level no speculation wins, where SGLang's default wins."""
    out: list[str] = []
    levels = sorted(env.rows)

    def best_key(c: int) -> str | None:
        row = env.rows[c]
        cells = [
            (k, p) for k, p in [*row.items(), *(("static", q) for q in env.rivals.get(c, []))] if analysis.competes(p)
        ]
        if not cells:
            return None
        _, p = max(cells, key=lambda kp: kp[1].mean)
        others = [q for _, q in cells if q.config_id != p.config_id]
        # alone at a level it wins nothing beyond the noise (only the baseline measured, say)
        return kind_of(p.config) if others and all(p.beats(q) for q in others) else None

    nospec = [c for c in levels if best_key(c) == "no_speculation"]
    if nospec:
        start = nospec[0]
        if all(best_key(c) == "no_speculation" for c in levels if c >= start) and "no_speculation" in env.rows[start]:
            p = env.rows[start]["no_speculation"]
            out.append(
                f"no speculation wins beyond noise from concurrency {start} up (batch {level_batch(p, None)[0]:g})"
            )
    for c in levels:
        if best_key(c) == "adaptive_default" and "default_adaptive" in env.rows[c]:
            out.append(
                f"SGLang's default wins concurrency {c}: it {describe_cell(env.rows[c]['default_adaptive'], env.drafts)}"
            )
    return out


def kv_warning(
    chosen: SpecConfig | None,
    best_static: PointStats | None,
    pools: Mapping[int, int | None],
    widest: int | None,
    own: int | None = None,
) -> str | None:
    """A warning when the recommended adaptive config's widest candidate costs more than 10% of the
    KV pool the recommended static depth has: a static server at the widest depth holds that much
    less (measured, else the straight line through the static depths' pools). SGLang reserves KV for
    the widest candidate at every decode step and builds its buffers (allocation_sizing.py). `own`,
    the pool the adaptive config's own deployment reported, is what it holds: read first (the line
    through the static pools had warned of no pool at all beside a deployment that reported more
    than the static depth's)."""
    if chosen is None or not chosen.is_schedule or best_static is None or widest is None:
        return None
    base = pools.get(best_static.spec_steps)
    if not base:
        return None
    at = own if own else pools.get(widest)
    how = "measured on its own deployment" if own else "measured"
    if at is None:
        pts = sorted((k, v) for k, v in pools.items() if v)
        if len(pts) < 2:
            return None
        n = len(pts)
        mx = sum(k for k, _ in pts) / n
        my = sum(v for _, v in pts) / n
        sxx = sum((k - mx) ** 2 for k, _ in pts)
        slope = sum((k - mx) * (v - my) for k, v in pts) / sxx if sxx else 0.0
        at = int(my + slope * (widest - mx))
        how = "extrapolated from the static depths' pools"
    cost = (base - at) / base * 100.0
    if cost <= KV_WARN_PCT:
        return None
    if at <= 0:
        return (
            f"the static depths' pools, on a straight line, leave no KV pool at the widest candidate's depth "
            f"({widest}), against {base} tokens for the recommended static depth {best_static.config_id}: SGLang "
            "reserves KV and builds buffers for the widest candidate; check long contexts and bursts before running it"
        )
    return (
        f"the widest candidate (depth {widest}) costs {cost:.0f}% of the KV pool against the recommended static "
        f"depth {best_static.config_id} ({at} tokens {how}, against {base}): SGLang reserves KV and builds buffers "
        "for the widest candidate; check long contexts and bursts before running it"
    )
