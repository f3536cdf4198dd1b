"""The search's policy (pure): which configuration to deploy next, which to skip, when to stop."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ...data.prediction import Band, LevelPrediction, Prediction
from ...data.records import SweepState
from ...spec.configs import SpecConfig
from ...spec.sweepspec import WorkloadSpec
from .. import analysis, schedule_phase
from ..analysis import LevelChoice, PointStats
from ..capacity import capacity_skip
from .model import Misfit, find_misfits, fit_model, vouched_by
from .observe import MIN_CHANCE, Z, point_sd, win_margin

# -- deciding ------------------------------------------------------------------------------------


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _band_sd(band: Band) -> float:
    return max((band.hi - band.lo) / (2 * Z), 1e-9)


@dataclass(frozen=True)
class Threat:
    """How likely a configuration is to win one level beyond the noise."""

    concurrency: int
    threshold: float  # what it must exceed
    chance: float


def level_threat(lp: LevelPrediction, choice: LevelChoice | None) -> Threat:
    """The chance this configuration beats the best measured at the level by more than the choice's
    tolerance. One that could at most tie is not worth a deployment: what it could add is within the
    level's noise, and a sweep that deployed it would still call the level tied within noise."""
    if choice is None:
        return Threat(lp.concurrency, 0.0, 1.0)
    return beat_chance(lp, choice.best)


def beat_chance(lp: LevelPrediction, best: PointStats) -> Threat:
    """The chance the predicted level beats a measured one by more than the choice's tolerance."""
    threshold = best.mean + win_margin(best)
    sd = math.sqrt(_band_sd(lp.output_tok_s) ** 2 + point_sd(best) ** 2)
    return Threat(lp.concurrency, threshold, 1.0 - _phi((threshold - lp.output_tok_s.mean) / sd))


def mix_chance(pred: Prediction, choices: Mapping[int, LevelChoice], target: Sequence[int], top: TopScore) -> float:
    """The chance this configuration tops the workload recommendation beyond the noise (each
    target level's throughput relative to the level's best, averaged), its levels' errors taken
    as one. The margin is the recommendation's own (tuner/decide/analysis.py `recommend`: two scores whose
    intervals overlap are tied), taken as if the newcomer were measured as precisely as the top:
    one that could at most tie would only hand the choice to the tie-break."""
    rel, sds = [], []
    for c in target:
        lp = pred.level(c)
        ch = choices.get(c)
        if lp is None or ch is None or ch.best.mean <= 0:
            return 1.0
        rel.append(min(1.0, lp.output_tok_s.mean / ch.best.mean))
        sds.append(_band_sd(lp.output_tok_s) / ch.best.mean)
    score, sd = sum(rel) / len(rel), max(sum(sds) / len(sds), 1e-9)
    return 1.0 - _phi((top.score + top.margin - score) / sd)


@dataclass(frozen=True)
class TopScore:
    """The best workload score measured so far and what a newcomer must beat it by."""

    score: float
    margin: float


def top_score(rec: analysis.Recommendation | None) -> TopScore | None:
    """The highest score of the recommendation (not the tie-break's pick) and its margin: the sum
    of two of its interval's half-widths, at least the choice's 1% floor."""
    if rec is None or not rec.scores:
        return None
    cid = max(rec.scores, key=lambda k: rec.scores[k])
    score = rec.scores[cid]
    ci = rec.score_ci.get(cid)
    half = (ci[1] - ci[0]) / 2 if ci and len(ci) == 2 else 0.0
    return TopScore(score, max(2 * half, analysis.MIN_REL_TOL * score))


@dataclass(frozen=True)
class Decision:
    """What to do next: deploy a configuration (with what the model predicts for it, when it
    predicts it), wait for configurations in flight, or stop. `skips` are configurations decided
    against now, each with the prediction that justified it and why."""

    deploy: SpecConfig | None = None
    prediction: Prediction | None = None
    why: str = ""
    skips: tuple[tuple[SpecConfig, Prediction, str], ...] = ()
    wait: bool = False
    misfits: tuple[Misfit, ...] = ()
    vouched: str | None = None  # the deployment that proved the refit after the misfits (`vouched_by`)
    model: str = ""  # the fit in a line, for the log
    kept_off: tuple[SpecConfig, ...] = ()  # what it would have deployed first, refused on this slot (`refused`)

    @property
    def done(self) -> bool:
        return self.deploy is None and not self.wait


def first_round(configs: Sequence[SpecConfig]) -> list[SpecConfig]:
    """What the search measures before it predicts anything, in order: the baseline without
    speculation, then the anchor depths of every series (decide() deploys these first; the dry run
    prints them)."""
    out = [c for c in configs if c.spec_steps == 0]
    for key in dict.fromkeys(c.series for c in configs if c.spec_steps > 0):
        out += anchors([c for c in configs if c.series == key and c.spec_steps > 0])
    return out


def anchors(configs: Sequence[SpecConfig]) -> list[SpecConfig]:
    """The depths of a series that are measured before any of it is predicted: at a third and two
    thirds of its range (one, the middle, for three depths or fewer). Two depths pin the trends in
    depth (acceptance further out, the cost of a draft step, the capacity lines); spread out, they
    leave the least to extrapolate on either side."""
    ordered = sorted(configs, key=lambda c: c.spec_steps)
    n = len(ordered)
    if n <= 3:
        return [ordered[(n - 1) // 2]] if ordered else []
    picks = [ordered[round((n - 1) / 3)], ordered[round(2 * (n - 1) / 3)]]
    return list(dict.fromkeys(picks))


def _closest(pred: Prediction, threats: Sequence[Threat]) -> str:
    """The level where the configuration came nearest to winning, in words."""

    def nearness(t: Threat) -> tuple[float, float]:
        lp = pred.level(t.concurrency)
        return (t.chance, lp.output_tok_s.mean / t.threshold if lp is not None and t.threshold > 0 else 0.0)

    th = max(threats, key=nearness, default=None)
    lp = None if th is None else pred.level(th.concurrency)
    if th is None or lp is None:
        return "no level could change"
    return (
        f"closest at C={th.concurrency}: predicted {lp.output_tok_s.mean:,.0f} tok/s "
        f"({lp.output_tok_s.lo:,.0f}-{lp.output_tok_s.hi:,.0f}), {th.threshold:,.0f} needed to win, "
        f"{th.chance:.0%} chance"
    )


def decide(
    state: SweepState,
    configs: Sequence[SpecConfig],
    workload: WorkloadSpec,
    *,
    exclude: Iterable[str] = (),
    target: Sequence[int] | None = None,
    measure_all: bool = False,
    schedule_algorithm: str | None = None,
    running: Iterable[str] = (),
    refused: Iterable[str] = (),
) -> Decision:
    """The next step for a slot whose role refuses the configurations `refused` (another slot runs
    them: tuner/spec/configs.py `ConfigPlan.slot_refusal`); the other arguments are `_decide`'s. A
    refused pick is held for a slot that runs it, as if in flight there, and the search decides
    again without it: so this slot takes the next one it runs, or waits (held picks count as in
    flight: their results may change the model), and never ends the search while one is open."""
    held = set(exclude)
    kept: list[SpecConfig] = []
    skips: dict[str, tuple[SpecConfig, Prediction, str]] = {}
    no = set(refused)
    while True:
        d = _decide(
            state,
            configs,
            workload,
            exclude=held,
            target=target,
            measure_all=measure_all,
            schedule_algorithm=schedule_algorithm,
            running=running,
        )
        skips.update((s[0].config_id, s) for s in d.skips if s[0].config_id not in skips)
        if d.deploy is None or d.deploy.config_id not in no:
            return dataclasses.replace(d, skips=tuple(skips.values()), kept_off=tuple(kept))
        kept.append(d.deploy)
        held.add(d.deploy.config_id)


def _decide(
    state: SweepState,
    configs: Sequence[SpecConfig],
    workload: WorkloadSpec,
    *,
    exclude: Iterable[str] = (),
    target: Sequence[int] | None = None,
    measure_all: bool = False,
    schedule_algorithm: str | None = None,
    running: Iterable[str] = (),
) -> Decision:
    """The next step of a model-guided sweep over `configs` (the plan's feasible configurations).

    `exclude`: configurations in flight or already handled in this run; `running`: those of them
    still deploying or being measured (a deploy record is written before the levels: with several
    hosts a configuration whose server is up is still in flight until its levels are in). `target`: the levels of
    the workload recommendation. With `measure_all` (--no-early-stop) nothing is skipped; the
    model only orders the deployments. `schedule_algorithm`: the sweep builds a per-batch-size
    schedule afterwards (tuner/decide/schedule_phase.py) for this algorithm; the schedule is made of the
    levels' winners, so winning a level is what changes it, except where a tree wins: the schedule
    pins the best chain there, and a chain that could beat that one is deployed too.
    """
    excluded = set(exclude)
    # a set-aside (`infeasible`) skip of one of `configs` was an earlier run's, whose hosts all refused
    # it (a --resume --limit): this run's plan has a host that runs it
    done = (
        set(state.deploys) | set(state.failed) | {cid for cid, sk in state.skipped.items() if sk.kind != "infeasible"}
    )
    done |= {m.level.config_id for m in state.measured}
    open_ = [c for c in configs if c.config_id not in done and c.config_id not in excluded]
    busy = set(running)
    in_flight = [c for c in configs if (c.config_id in excluded and c.config_id not in done) or c.config_id in busy]
    misfits = tuple(find_misfits(state))
    # A model the measurements contradicted measures instead of predicting: from a misfit on,
    # nothing is skipped on its predictions (they still order what is deployed next) until the
    # refitted model has predicted a fresh deployment inside its band (`vouched_by`). The model
    # is fitted at one temperature (the first measured: analysis.aggregate), so a sweep of several
    # skips nothing either: a configuration that loses at one may win at another.
    several_temperatures = len(workload.temperature) > 1
    vouched = vouched_by(state, misfits, running=[c.config_id for c in in_flight])
    distrusted = bool(misfits) and vouched is None
    measure_all = measure_all or distrusted
    # (capacity does not depend on temperature: a pool predicted empty is still not deployed)
    measure_every = measure_all or several_temperatures
    if not open_:
        return Decision(
            wait=bool(in_flight), why="every configuration is measured or decided", misfits=misfits, vouched=vouched
        )

    # Measured, not predicted: the first round (the baseline, then the anchor depths of every series).
    round1 = first_round(configs)
    for cfg in round1:
        if cfg.spec_steps == 0 and cfg in open_:
            return Decision(
                deploy=cfg,
                why="the baseline without speculation is measured, not predicted",
                misfits=misfits,
                vouched=vouched,
            )
    flying = {c.config_id for c in in_flight}
    measured = {m.level.config_id for m in state.measured if m.level.measured}
    settling: set[tuple[int, int | None, str]] = set()  # series whose anchors are still in flight
    for key in dict.fromkeys(c.series for c in configs if c.spec_steps > 0):
        members = [c for c in configs if c.series == key and c.spec_steps > 0]
        wanted = [c for c in round1 if c.series == key and c.spec_steps > 0]
        have = [c for c in members if c.config_id in measured]
        pending = [c for c in members if c.config_id in flying]
        if len(have) + len(pending) >= len(wanted):
            if len(have) < len(wanted):
                settling.add(key)
            continue
        candidates = [c for c in members if c in open_ and capacity_skip(c, state) is None]
        if not candidates:
            continue
        # the anchors not yet tried; when one failed, the open depth nearest to it
        missing = [a for a in wanted if a.config_id not in measured]
        pick = min(candidates, key=lambda c: (min(abs(c.spec_steps - a.spec_steps) for a in missing), c.spec_steps))
        why = (
            "an anchor depth of its series, measured before predicting"
            if pick in wanted
            else "the depth nearest to an anchor that could not be measured, measured before predicting"
        )
        return Decision(deploy=pick, why=why, misfits=misfits, vouched=vouched)

    model = fit_model(state, workload)
    if model.step is None:
        if measure_all and not in_flight:
            # no depth started (its anchors failed for lack of KV memory): nothing to predict from,
            # and --no-early-stop skips nothing, as the grid with the same flags deploys every depth
            rest = sorted(open_, key=lambda c: c.order_key)
            return Decision(
                deploy=rest[0],
                why="measured, not predicted: no depth has started to predict from (--no-early-stop skips nothing)",
                misfits=misfits,
                vouched=vouched,
            )
        return Decision(
            wait=bool(in_flight), why="waiting for a first measured depth", misfits=misfits, vouched=vouched
        )
    stats = analysis.aggregate(state.levels())
    # A configuration that failed the correctness gate or lost its server twice is never the bar to
    # beat: a wrong answer fast enough to make the others look hopeless must not get them skipped.
    analysis.mark_outcomes(stats, state)
    # With --slo a configuration that misses it does not compete (tuner/decide/analysis.py), so the bar
    # to beat at a level is the best that meets it; at a level where none measured does, every
    # configuration left could be the first to. The latencies an SLO limits are not predicted:
    # nothing is skipped for them.
    analysis.apply_slo(stats, workload.slo)
    chain_best = schedule_chains(stats, state, schedule_algorithm)
    levels = list(workload.concurrency)
    choices = analysis.by_concurrency(stats, levels)
    tlevels = list(target) if target else levels
    top = top_score(analysis.recommend(stats, levels, tlevels)) if len(tlevels) > 1 else None

    scored: list[tuple[float, SpecConfig, Prediction, list[Threat]]] = []
    skips: list[tuple[SpecConfig, Prediction, str]] = []
    unknown: list[SpecConfig] = []
    for cfg in open_:
        failed = capacity_skip(cfg, state)
        if cfg.series in settling:
            unknown.append(cfg)
            continue
        pred = Prediction(can_run=False, reason=failed, basis=model.basis) if failed else model.predict(cfg)
        if pred is None:
            unknown.append(cfg)  # its series' anchors are in flight
            continue
        if not pred.can_run:
            if measure_all:
                scored.append((0.0, cfg, pred, []))
            else:
                skips.append((cfg, pred, f"not deployed: {pred.reason}"))
            continue
        threats = [level_threat(lp, choices.get(lp.concurrency)) for lp in pred.levels]
        if chain_best is not None and schedule_phase.is_chain(cfg, schedule_algorithm or ""):
            # where a tree wins a level, the schedule pins the best chain there instead: a chain
            # that could beat that one changes the schedule without winning the level
            threats += [
                beat_chance(lp, chain_best[lp.concurrency])
                for lp in pred.levels
                if lp.concurrency in chain_best
                and lp.concurrency in choices
                and not schedule_phase.is_chain(choices[lp.concurrency].chosen.config, schedule_algorithm or "")
            ]
        chance = max([t.chance for t in threats] + [1.0 if any(pred.level(c) is None for c in levels) else 0.0])
        if top is not None:
            chance = max(chance, mix_chance(pred, choices, tlevels, top))
        scored.append((chance, cfg, _with_chances(pred, threats, chance), threats))

    if unknown and in_flight and not any(s[0] >= MIN_CHANCE for s in scored):
        return Decision(
            wait=True, skips=tuple(skips), why="the anchors of a series are in flight", misfits=misfits, vouched=vouched
        )
    contenders = [s for s in scored if s[0] >= MIN_CHANCE or measure_every]
    if contenders:
        chance, cfg, pred, _ = max(contenders, key=lambda s: (s[0], [-x for x in s[1].order_key[:3]]))
        why = f"the best chance to win a level beyond the noise ({chance:.0%})"
        if distrusted and chance < MIN_CHANCE:
            why = (
                f"measured, not predicted: the model missed {len(misfits)} measurement(s) (misfits), so it skips "
                "nothing until its refit predicts a fresh deployment inside its band"
            )
        elif several_temperatures and chance < MIN_CHANCE:
            why = "measured, not predicted: the model is fitted at one temperature and the sweep has several"
        return Decision(
            deploy=cfg,
            prediction=pred,
            why=why,
            skips=tuple(skips),
            misfits=misfits,
            vouched=vouched,
            model=model.describe(),
        )
    if in_flight:
        return Decision(
            wait=True,
            skips=tuple(skips),
            why="configurations in flight may change the model",
            misfits=misfits,
            vouched=vouched,
        )
    if unknown:
        # nothing to predict it from (its series' measured depths gave no acceptance fit): measured,
        # since a configuration the search cannot judge is neither skipped nor left undecided
        return Decision(
            deploy=min(unknown, key=lambda c: c.order_key),
            why="measured, not predicted: its series' measured depths give nothing to predict it from",
            skips=tuple(skips),
            misfits=misfits,
            vouched=vouched,
            model=model.describe(),
        )
    for _, cfg, pred, threats in scored:
        why = f"predicted not to win any level beyond the noise (under {MIN_CHANCE:.0%} chance); "
        skips.append((cfg, pred, why + _closest(pred, threats)))
    return Decision(
        skips=tuple(skips),
        why="no configuration left has a chance to win a level",
        misfits=misfits,
        vouched=vouched,
        model=model.describe(),
    )


def schedule_chains(
    stats: Mapping[tuple[str, int], PointStats], state: SweepState, algorithm: str | None
) -> dict[int, PointStats] | None:
    """Per level, the best chain measured that competes (what a schedule bucket would pin there),
    when the sweep builds a schedule and the server can run one; else None."""
    if algorithm is None or schedule_phase.unsupported(state, algorithm) is not None:
        return None
    best: dict[int, PointStats] = {}
    for (_cid, c), p in stats.items():
        chain = schedule_phase.is_chain(p.config, algorithm) and p.mean > 0 and analysis.competes(p)
        if chain and (c not in best or p.mean > best[c].mean):
            best[c] = p
    return best


def _with_chances(pred: Prediction, threats: Sequence[Threat], chance: float) -> Prediction:
    by_level: dict[int, float] = {}
    for t in threats:
        by_level[t.concurrency] = max(by_level.get(t.concurrency, 0.0), t.chance)
    levels = tuple(dataclasses.replace(lp, chance=by_level.get(lp.concurrency, 0.0)) for lp in pred.levels)
    return dataclasses.replace(pred, levels=levels, chance=chance)
