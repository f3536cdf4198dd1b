"""What runs next: the sweep's plan in order (or as the model-guided search picks), rounds of
--repeat-deploys, the early-stop and capacity skips, and the schedule phase's configurations.
Running them is tuner/run/sweep.py's; this module only hands out (configuration, deployment) units
and records the skips it decides."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ..data.records import (
    LevelKey,
    PredictionRecord,
    SkipRecord,
    SweepState,
    judged_failure,
)
from ..data.store import Store
from ..decide import analysis
from ..decide.capacity import capacity_skip
from ..decide.early_stop import early_stop
from ..decide.search import decide as search
from ..decide.search.text import prediction_text
from ..spec.configs import ConfigPlan, SpecConfig
from ..spec.sweepspec import SweepSpec, WorkloadSpec
from .levels import Progress

WAIT = object()  # next_unit: nothing to start now, but configurations in flight may change that
T = TypeVar("T")


class Planner:
    """Hands out work units (configuration id, deployment) to the sweep's workers."""

    def __init__(
        self, *, spec: SweepSpec, plan: ConfigPlan, store: Store, progress: Progress, hosts: Sequence[str] = ()
    ):
        self.spec = spec
        self.plan = plan
        self.store = store
        self.progress = progress
        self.hosts = list(hosts)  # the sweep's slots, in the order of the plan's `nodes`
        self._kept_off: set[tuple[str, str]] = set()  # (configuration, host) already said on the log
        # work units are (configuration id, deployment): --repeat-deploys N deploys each one N times
        self.in_progress: set[tuple[str, int]] = set()
        self.finished: set[tuple[str, int]] = set()
        self.done: set[LevelKey] = set()
        self._search_done = False  # the model-guided search named its last configuration
        self.extra: list[SpecConfig] = []  # the schedule phase's configurations (tuner/decide/schedule_phase.py)

    @property
    def workload(self) -> WorkloadSpec:
        return self.spec.workload

    def _all_levels_done(self, cid: str, deployment: int = 1) -> bool:
        w = self.workload
        return all(
            (cid, float(t), c, r, deployment) in self.done
            for t in w.temperature
            for c in w.concurrency
            for r in range(1, w.repeats + 1)
        )

    def _skip_reason(self, cfg: SpecConfig, state: SweepState) -> tuple[str, str] | None:
        capacity = capacity_skip(cfg, state)
        if capacity is not None:
            return capacity, "capacity"
        same = [c for c in self.plan.configs if c.series == cfg.series and 0 < c.spec_steps < cfg.spec_steps]
        # Past the peak at every level, at every temperature (each temperature on its own).
        details = []
        for temp in self.workload.temperature:
            stats = analysis.aggregate(state.levels(), temperature=float(temp))
            analysis.mark_outcomes(stats, state)  # a depth that failed competes nowhere, here too
            analysis.apply_slo(stats, self.workload.slo)
            series = []
            for c in sorted(same, key=lambda c: c.spec_steps):
                if (c.config_id, 1) not in self.finished or not self._all_levels_done(c.config_id):
                    continue
                pts = {cc: p for (cid, cc), p in stats.items() if cid == c.config_id}
                if pts:
                    series.append((c, pts))
            if len(series) < 2:
                return None
            es = early_stop([pts for _, pts in series], self.workload.concurrency)
            if not es.stop:
                return None
            details.append((f"temperature {temp:g}: " if len(self.workload.temperature) > 1 else "") + es.detail)
        return (f"after spec_steps {series[-1][0].spec_steps}: {'; '.join(details)}", "early_stop")

    def refusal(self, cfg: SpecConfig, host: str | None) -> str | None:
        """The role's reason to refuse `cfg` on `host`'s slot for its settings, though another slot
        runs it (else the plan set it aside: ConfigPlan.slot_refusal); None where it runs there or
        nothing is known."""
        return self.plan.slot_refusal(cfg, self.hosts.index(host)) if host in self.hosts else None

    def kept_off(self, cfg: SpecConfig, host: str | None) -> bool:
        """Whether `cfg` is kept off `host` (`refusal`), said on the log the first time: deployed
        there, the play would fail in its preflight though another slot can run it."""
        why = self.refusal(cfg, host)
        if why is not None and host is not None and (cfg.config_id, host) not in self._kept_off:
            self._kept_off.add((cfg.config_id, host))
            # none may: a configuration an earlier run measured, --resume'd on hosts that refuse it
            where = "another host runs it" if any(self.refusal(cfg, h) is None for h in self.hosts) else "no host does"
            self.progress.line(f"[{cfg.label}] kept off {host}: its role refuses it there ({why}); {where}")
        return why is not None

    def set_aside(self) -> None:
        """The configurations the plan set aside (every slot's role refuses them) as `infeasible`
        skips, each once. Not one an earlier run deployed, measured or failed to start (a --resume
        --limit to hosts that refuse it): its measurements (or its failure) stand and the report and
        recommendation use them; the log says why this run adds nothing to them."""
        state = self.store.state()
        for cfg, why in self.plan.infeasible:
            cid = cfg.config_id
            run = (
                "measured"
                if state.has_levels(cid)
                else "deployed"
                if cid in state.deploys
                else "failed to start"
                if cid in state.failed
                else None
            )
            if run is not None:
                runs = "nothing more of it runs here: the role of every host refuses it"
                self.progress.line(f"[{cfg.label}] {run} in an earlier run; {runs} ({why})")
            elif cid not in state.skipped:
                self.store.append(SkipRecord(config=cfg, kind="infeasible", reason=why))

    def runs(self, cfg: SpecConfig, host: str) -> bool:
        """Whether `host`'s role runs `cfg` (the correctness gate's redeploys and --deploy-best ask)."""
        return not self.kept_off(cfg, host)

    def place(self, items: Sequence[T], config: Callable[[T], SpecConfig]) -> list[tuple[T, str]]:
        """`items` in order, each on the first host not taken yet whose slot runs its configuration;
        one with none left waits (the caller asks again once these are done)."""
        free, out = list(self.hosts), []
        for item in items:
            host = next((h for h in free if not self.kept_off(config(item), h)), None)
            if host is not None:
                free.remove(host)
                out.append((item, host))
        return out

    def next_unit(self, host: str | None = None) -> tuple[SpecConfig, int] | None | object:
        """The next (configuration, deployment) to run on `host` (None: any): every configuration's
        first deployment in plan order (or as the model-guided search picks them), then the second
        round, and so on (rounds spread drift over every configuration alike; a configuration
        skipped or failed in round 1 is not redeployed). WAIT (model search only) when only the
        configurations in flight can tell what is next; None when the sweep is done. A
        configuration the host's role refuses (`kept_off`) is left for a host that runs it."""
        if self.extra:
            return self._next_in(self.extra, 1, host)
        first = 1
        if self.spec.search == "model" and not self._search_done:
            picked = self._next_by_model(host)
            if picked is WAIT:
                return WAIT
            if isinstance(picked, SpecConfig):
                return picked, 1
            if any(dep == 1 for _, dep in self.in_progress):
                return WAIT  # the repeat rounds start once the search's own round is over
            self._search_done = True
        if self.spec.search == "model":
            first = 2
        return self._next_in(self.plan.configs, first, host)

    def _next_in(self, configs: list[SpecConfig], first: int, host: str | None) -> tuple[SpecConfig, int] | None:
        """The next unit among `configs` for `host`, rounds `first`.. of --repeat-deploys."""
        state = self.store.state()
        self.done |= state.done
        for dep in range(first, self.spec.repeat_deploys + 1):
            for cfg in configs:
                cid = cfg.config_id
                unit = (cid, dep)
                if unit in self.in_progress or unit in self.finished:
                    continue
                skipped = state.skipped.get(cid)
                # the model's skips are its own: a grid sweep (say, `--resume --search grid`) measures them;
                # a set-aside (`infeasible`) was a run's whose hosts refused it: this plan's hosts run it
                grid_skip = (
                    skipped is not None and skipped.kind != "infeasible" and (skipped.kind != "predicted" or dep > 1)
                )
                if grid_skip or cid in state.unstable or self._all_levels_done(cid, dep):
                    self.finished.add(unit)
                    continue
                if cid in state.failed and (dep == 1 or not state.has_levels(cid)):
                    self.finished.add(unit)
                    continue
                if dep > 1 and cid in state.verify and judged_failure(state.verify[cid]):
                    # failed the correctness gate: never recommended, nothing to measure again
                    self.finished.add(unit)
                    continue
                if dep > 1 and (cid, 1) not in self.finished and (cid, 1) not in self.in_progress:
                    # a model sweep never runs round 1 here, and an earlier process measured it
                    if state.has_levels(cid) and self._all_levels_done(cid, 1):
                        self.finished.add((cid, 1))
                if dep > 1 and ((cid, 1) not in self.finished or not state.has_levels(cid)):
                    if (cid, 1) in self.finished:  # round 1 measured nothing: nothing to repeat
                        self.finished.add(unit)
                    continue
                if dep == 1 and self.spec.early_stop and cfg.spec_steps > 0 and not cfg.is_schedule:
                    skip = self._skip_reason(cfg, state)
                    if skip is not None:
                        reason, kind = skip
                        self.store.append(SkipRecord(config=cfg, kind=kind, reason=reason))
                        self.progress.line(f"[{cfg.label}] skipped: {reason}")
                        self.finished.add(unit)
                        state = self.store.state()
                        continue
                if self.kept_off(cfg, host):
                    continue
                self.in_progress.add(unit)
                return cfg, dep
        return None

    def _next_by_model(self, host: str | None) -> SpecConfig | None | object:
        """`--search model`: finish what an interrupted run left half-measured, skip what a capacity
        failure rules out (the grid's rule), then ask the model (tuner/decide/search/)."""
        state = self.store.state()
        self.done |= state.done
        elsewhere = False  # a half-measured one left for the slot that runs it (`kept_off`)
        for cfg in self.plan.configs:
            cid = cfg.config_id
            if (cid, 1) in self.in_progress or (cid, 1) in self.finished or cid in state.failed:
                continue
            if (
                # deployed (its deploy record is written once the server is up) or measured in part:
                # a run stopped during its warm-up or first level left it with no level at all
                (state.has_levels(cid) or cid in state.deploys)
                and not self._all_levels_done(cid)
                and cid not in state.skipped
                and cid not in state.unstable  # its server went away twice: failed, as the grid reads it
            ):
                if not self.kept_off(cfg, host):
                    self.in_progress.add((cid, 1))
                    return cfg
                elsewhere = True
            decided = cid in state.skipped and state.skipped[cid].kind != "infeasible"  # (as in _next_in)
            if cid not in state.deploys and not decided and self.spec.early_stop and cfg.spec_steps > 0:
                skip = capacity_skip(cfg, state)
                if skip is not None:
                    self.store.append(SkipRecord(config=cfg, kind="capacity", reason=skip))
                    self.progress.line(f"[{cfg.label}] skipped: {skip}")
                    self.finished.add((cid, 1))
                    state = self.store.state()
        target = self.workload.target_concurrency
        decision = search.decide(
            state,
            self.plan.configs,
            self.workload,
            exclude={cid for cid, dep in self.in_progress | self.finished if dep == 1},
            running={cid for cid, dep in self.in_progress if dep == 1},
            target=list(target) if target else None,
            measure_all=not self.spec.early_stop,
            schedule_algorithm=self.spec.algorithm if self.spec.schedule else None,
            refused={c.config_id for c in self.plan.configs if self.refusal(c, host) is not None},
        )
        for cfg in decision.kept_off:
            self.kept_off(cfg, host)
        for cfg, pred, why in decision.skips:
            self.store.append(SkipRecord(config=cfg, kind="predicted", reason=why, prediction=pred))
            self.progress.line(f"[{cfg.label}] skipped: {why}")
            self.finished.add((cfg.config_id, 1))
        if decision.model:
            self.progress.line(f"[search] {decision.model}")
        if decision.deploy is not None:
            cfg = decision.deploy
            if decision.prediction is not None:
                self.store.append(PredictionRecord(config=cfg, prediction=decision.prediction))
            self.progress.line(f"[search] next: {cfg.label}: {decision.why}" + prediction_text(decision.prediction))
            self.in_progress.add((cfg.config_id, 1))
            return cfg
        if decision.wait or elsewhere:
            # the model counts a deployed configuration as decided: the search is not done until
            # the slot that runs it has finished it (that slot takes it first when it asks)
            return WAIT
        self.progress.line(f"[search] done: {decision.why}")
        return None
