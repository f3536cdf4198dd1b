"""Orchestration: deploy each configuration, benchmark every level, store, decide what is next.

One worker per slot (a host, or a multi-node group deployed as one; docs/architecture.md): with
several hosts of group `sglang_servers` the configurations are spread over them, each deploy
limited to its slot. Configurations are handed out in plan order (ascending steps within a
series); the early-stop rule is checked each time a configuration is about to start, from what has
been measured by then, so it also holds after `--resume`. With several hosts a deeper
configuration may already be running when a shallower one ends; it is finished, not wasted, and
only configurations not yet started are skipped.

With `--search model` the order is the model's (tuner/search.py): each time a slot is free, the
model is refitted to everything measured and names the next configuration, or says to wait for
those in flight (the slot waits until one ends), or to stop; what it decides against is recorded
as `skip` records of kind `predicted` with their predictions, so `--resume` and `report` keep them.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from sglang_filters.sglang_flags import parse_whole_number, schedule_launch_steps  # noqa: E402

from . import analysis, outputs, search
from .client import BenchClient, ClientOptions, LevelPlan, with_ticker
from .configs import ConfigPlan, SpecConfig
from .decide import adaptive_phase
from .deploy import Deployer, DeployResult
from .metrics import LevelMetrics, RequestTrace, counter_delta, level_metrics, level_samples, running_batch
from .records import (
    BenchFailedRecord,
    DeployBestRecord,
    DeployRecord,
    LevelKey,
    LevelRecord,
    PredictionRecord,
    Record,
    SkipRecord,
    SweepState,
    TimingRecord,
)
from .redact import Redactor
from .store import MemoryStore, Store
from .summary import Summary
from .sweepspec import SweepSpec, WorkloadSpec
from .workload import PromptSource

TICK_S = 10.0
REDEPLOY_ENV = "SGLANG_TUNE_DEPLOYMENT"  # see Sweep._redeploy_vars
WAIT = object()  # next_config: nothing to start now, but configurations in flight may change that


class RecordLog(Protocol):
    """Where records go: a Store (an output directory) or a MemoryStore (`bench` without --out)."""

    def append(self, record: Record | dict[str, Any]) -> dict[str, Any]: ...

    def records(self) -> list[dict[str, Any]]: ...

    def state(self) -> SweepState: ...


class Progress:
    """Progress lines on stderr (configuration, level, tokens/s); secrets scrubbed."""

    def __init__(self, stream: TextIO | None = None, redactor: Redactor | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.redactor = redactor or Redactor()
        self.quiet = quiet

    def line(self, text: str) -> None:
        if self.quiet:
            return
        print(self.redactor.scrub(text), file=self.stream, flush=True)


def client_options(w: WorkloadSpec, url: str, api_key: str | None, model: str | None = None) -> ClientOptions:
    return ClientOptions(
        url=url,
        endpoint=w.endpoint,
        input_len=w.input_len or 256,
        output_len=w.output_len or 256,
        temperature=w.temperature[0],
        top_p=w.top_p,
        ignore_eos=w.ignore_eos,
        api_key=api_key,
        model=model,
        request_timeout=w.request_timeout,
        seed=w.seed,
        source=prompt_source(w),
    )


def prompt_source(w: WorkloadSpec) -> PromptSource:
    ds = w.dataset if w.dataset is not None and w.dataset.loaded else None
    return PromptSource(
        input_len=w.input_len, output_len=w.output_len, seed=w.seed, dataset=ds, sample=w.dataset_sample
    )


def level_plan(w: WorkloadSpec, c: int, first_index: int) -> LevelPlan:
    """The fixed count (`--requests-per-level N`), or the precision loop (auto)."""
    if not w.adaptive:
        n = w.requests_for(c)
        return LevelPlan(c, n, n, first_index=first_index)
    return LevelPlan(
        c,
        w.requests_for(c),
        w.max_requests_for(c),
        max_seconds=w.max_level_s,
        precision_pct=w.precision,
        first_index=first_index,
    )


def first_index(w: WorkloadSpec, temperature: float, repeat: int, c: int) -> int:
    """Where a level's prompts start: the same for every configuration and deployment, whatever
    number of requests earlier levels needed, so every configuration sees the same prompts."""
    ti = w.temperature.index(temperature) if temperature in w.temperature else 0
    ci = w.concurrency.index(c) if c in w.concurrency else 0
    return ((ti * 64 + (repeat - 1)) * 64 + ci) * 1_000_000


def level_line(cfg: SpecConfig, c: int, rep: int, repeats: int, m: LevelMetrics, extra: str = "") -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    s = (
        f"[{cfg.label}{extra} C={c} rep {rep}/{repeats}] {f(m.output_tok_s, '.0f')} tok/s agg "
        f"(+-{f(m.precision_pct, '.1f')}%, {m.requests} requests), "
        f"{f(m.per_request_tok_s, '.1f')} tok/s/req, TTFT p50 {f(m.ttft_ms_p50, '.0f')} ms, "
        f"accept {f(m.accept_length, '.2f')}"
    )
    if m.running_reqs_p90 is not None:
        s += f", running batch {m.running_reqs_p90:g}"
    if m.requests_failed:
        s += f", {m.requests_failed}/{m.requests} FAILED"
    return s


@dataclass
class LevelsOutcome:
    reason: str | None = None  # why the benchmark stopped early, if it did
    kind: str | None = None  # BenchFailedRecord.kind
    warmup_s: float = 0.0
    bench_s: float = 0.0  # the levels' own time (first send to last completion, summed)


class Ticker:
    """Progress of one level while it runs: requests done and tokens/s so far."""

    def __init__(self, progress: Progress, prefix: str, total: int):
        self.progress, self.prefix, self.total = progress, prefix, total
        self.finished: list[RequestTrace] = []
        self.started = time.perf_counter()

    def tick(self) -> None:
        el = time.perf_counter() - self.started
        toks = sum(t.output_tokens or 0 for t in self.finished if t.ok)
        self.progress.line(
            f"{self.prefix} {len(self.finished)}/{self.total} requests, {toks / el if el else 0:.0f} tok/s so far"
        )


async def wait_for_health(client: BenchClient, timeout_s: float, every_s: float = 1.0) -> float | None:
    """Seconds until /health answered again (bounded by timeout_s); None when it did not."""
    t0 = time.perf_counter()
    while True:
        if await client.health(timeout=min(10.0, max(1.0, every_s * 5))):
            return time.perf_counter() - t0
        if time.perf_counter() - t0 >= timeout_s:
            return None
        await asyncio.sleep(every_s)


async def run_levels(
    client: BenchClient,
    workload: WorkloadSpec,
    *,
    config: SpecConfig,
    host: str,
    done: set[LevelKey],
    log: RecordLog,
    progress: Progress,
    after_level: Callable[[], None] | None = None,
    deployment: int = 1,
    deployments: int = 1,
) -> LevelsOutcome:
    """Warm up, then every (temperature, repeat, level) not yet done on this deployment.

    A level during which the server went away (a failed request, then no /health) is recorded as
    lost; the tuner waits for /health (systemd restarts a crashed unit; bounded by
    `--recover-timeout`) and measures that level once more. A second loss on the same
    deployment fails the configuration with the reason.
    """
    w = workload
    res = LevelsOutcome()
    todo = [
        (temp, rep, c)
        for temp in w.temperature
        for rep in range(1, w.repeats + 1)
        for c in w.concurrency
        if (config.config_id, float(temp), c, rep, deployment) not in done
    ]
    if not todo:
        return res
    client.opts.temperature = float(todo[0][0])
    t0 = time.perf_counter()
    warm = await client.warmup(w.warmup_requests, min(4, max(w.concurrency)))
    res.warmup_s = time.perf_counter() - t0
    if warm and not any(t.ok for t in warm):
        res.reason, res.kind = f"every warm-up request failed: {warm[0].error}", "warmup"
        return res
    dep_txt = f" dep {deployment}/{deployments}" if deployments > 1 else ""
    temp_txt = len(w.temperature) > 1
    losses = 0
    for temp, rep, c in todo:
        client.opts.temperature = float(temp)
        extra = dep_txt + (f" T={temp:g}" if temp_txt else "")
        attempt = 1
        while True:
            plan = level_plan(w, c, first_index(w, float(temp), rep, c))
            before = await client.counters()
            ticker = Ticker(progress, f"[{config.label}{extra} C={c} rep {rep}/{w.repeats}]", plan.max_requests)
            stop_sampling = asyncio.Event()
            sampler = asyncio.ensure_future(client.running_samples(stop_sampling))
            try:
                run = await with_ticker(client.run_plan(plan, on_done=ticker.finished.append), ticker.tick, TICK_S)
            finally:
                stop_sampling.set()
            running = await sampler
            after = await client.counters()
            traces = run.traces
            m = level_metrics(c, traces, counter_delta(before, after), until=run.until)
            m.running_reqs_p90, m.running_reqs_mean, m.running_reqs_samples = running_batch(running, traces, run.until)
            res.bench_s += m.wall_s
            rec = LevelRecord(
                config=config,
                metrics=m,
                host=host,
                concurrency=c,
                repeat=rep,
                temperature=float(temp),
                top_p=w.top_p if temp > 0 else None,
                input_len=w.input_len,
                output_len=w.output_len,
                endpoint=w.endpoint,
                bench_s=round(time.perf_counter() - ticker.started, 3),
                deployment=deployment,
                attempt=attempt,
                server_lost=run.lost,
                stop_reason=run.stop_reason,
                samples=level_samples(c, traces, until=run.until),
            )
            log.append(rec)
            line = level_line(config, c, rep, w.repeats, m, extra)
            if attempt > 1:
                line += " (measured again after the server came back)"
            progress.line(line + (" SERVER LOST" if run.lost else ""))
            if after_level is not None:
                after_level()
            if not run.lost:
                done.add(rec.key)
                break
            losses += 1
            first = next((t.error for t in traces if t.error), "unknown")
            if losses >= 2:
                res.reason = (
                    f"the server went away twice (the second time at concurrency {c}, temperature {temp:g}: "
                    f"{first}); the configuration fails"
                )
                res.kind = "server_lost"
                return res
            progress.line(
                f"[{config.label}{extra}] the server went away at concurrency {c} ({first}); waiting up to "
                f"{w.recover_timeout:g} s for /health"
            )
            back = await wait_for_health(client, w.recover_timeout)
            if back is None:
                res.reason = (
                    f"the server went away at concurrency {c} ({first}) and did not answer /health within "
                    f"{w.recover_timeout:g} s"
                )
                res.kind = "server_lost"
                return res
            progress.line(f"[{config.label}{extra}] the server answers again after {back:.1f} s: measuring C={c} again")
            attempt += 1
    return res


class Sweep:
    def __init__(
        self,
        *,
        spec: SweepSpec,
        plan: ConfigPlan,
        store: Store,
        deployer: Deployer,
        hosts: list[str],
        progress: Progress,
        api_key: str | None = None,
    ):
        self.spec = spec
        self.plan = plan
        self.store = store
        self.deployer = deployer
        self.hosts = hosts
        self.progress = progress
        self.api_key = api_key
        # work units are (configuration id, deployment): --repeat-deploys N deploys each one N times
        self.in_progress: set[tuple[str, int]] = set()
        self.finished: set[tuple[str, int]] = set()
        self.done: set[LevelKey] = set()
        self._changed: asyncio.Condition | None = None  # a configuration finished (model search waits on it)
        self._search_done = False  # the model-guided search named its last configuration
        self.extra: list[SpecConfig] = []  # the schedule phase's configurations (tuner/schedule_sweep.py)

    @property
    def workload(self) -> WorkloadSpec:
        return self.spec.workload

    # -- what to run next ------------------------------------------------------------------
    def _all_levels_done(self, cid: str, deployment: int = 1) -> bool:
        w = self.workload
        return all(
            (cid, float(t), c, r, deployment) in self.done
            for t in w.temperature
            for c in w.concurrency
            for r in range(1, w.repeats + 1)
        )

    def _skip_reason(self, cfg: SpecConfig, state: SweepState) -> tuple[str, str] | None:
        capacity = self._capacity_skip(cfg, state)
        if capacity is not None:
            return capacity, "capacity"
        same = [c for c in self.plan.configs if c.series == cfg.series and 0 < c.spec_steps < cfg.spec_steps]
        # Past the peak at every level, at every temperature (each temperature on its own).
        details = []
        for temp in self.workload.temperature:
            stats = analysis.aggregate(state.levels(), temperature=float(temp))
            series = []
            for c in sorted(same, key=lambda c: c.spec_steps):
                if (c.config_id, 1) not in self.finished or not self._all_levels_done(c.config_id):
                    continue
                pts = {cc: p for (cid, cc), p in stats.items() if cid == c.config_id}
                if pts:
                    series.append((c, pts))
            if len(series) < 2:
                return None
            es = analysis.early_stop([pts for _, pts in series], self.workload.concurrency)
            if not es.stop:
                return None
            details.append((f"temperature {temp:g}: " if len(self.workload.temperature) > 1 else "") + es.detail)
        return (f"after spec_steps {series[-1][0].spec_steps}: {'; '.join(details)}", "early_stop")

    def next_unit(self) -> tuple[SpecConfig, int] | None | object:
        """The next (configuration, deployment) to run: every configuration's first deployment in
        plan order (or as the model-guided search picks them), then the second round, and so on
        (rounds spread drift over every configuration alike; a configuration skipped or failed in
        round 1 is not redeployed). WAIT (model search only) when only the configurations in
        flight can tell what is next; None when the sweep is done."""
        if self.extra:
            return self._next_in(self.extra, 1)
        first = 1
        if self.spec.search == "model" and not self._search_done:
            picked = self._next_by_model()
            if picked is WAIT:
                return WAIT
            if isinstance(picked, SpecConfig):
                return picked, 1
            if any(dep == 1 for _, dep in self.in_progress):
                return WAIT  # the repeat rounds start once the search's own round is over
            self._search_done = True
        if self.spec.search == "model":
            first = 2
        return self._next_in(self.plan.configs, first)

    def _next_in(self, configs: list[SpecConfig], first: int) -> tuple[SpecConfig, int] | None:
        """The next unit among `configs`, rounds `first`.. of --repeat-deploys."""
        state = self.store.state()
        self.done |= state.done
        for dep in range(first, self.spec.repeat_deploys + 1):
            for cfg in configs:
                cid = cfg.config_id
                unit = (cid, dep)
                if unit in self.in_progress or unit in self.finished:
                    continue
                skipped = state.skipped.get(cid)
                # the model's skips are its own: a grid sweep (say, `--resume --search grid`) measures them
                grid_skip = skipped is not None and (skipped.kind != "predicted" or dep > 1)
                if grid_skip or cid in state.unstable or self._all_levels_done(cid, dep):
                    self.finished.add(unit)
                    continue
                if cid in state.failed and (dep == 1 or not state.has_levels(cid)):
                    self.finished.add(unit)
                    continue
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
                self.in_progress.add(unit)
                return cfg, dep
        return None

    def next_config(self) -> SpecConfig | None | object:
        unit = self.next_unit()
        return unit[0] if isinstance(unit, tuple) else unit

    def _next_by_model(self) -> SpecConfig | None | object:
        """`--search model`: finish what an interrupted run left half-measured, skip what a capacity
        failure rules out (the grid's rule), then ask the model (tuner/search.py)."""
        state = self.store.state()
        self.done |= state.done
        for cfg in self.plan.configs:
            cid = cfg.config_id
            if (cid, 1) in self.in_progress or (cid, 1) in self.finished or cid in state.failed:
                continue
            if state.has_levels(cid) and not self._all_levels_done(cid) and cid not in state.skipped:
                self.in_progress.add((cid, 1))
                return cfg
            if cid not in state.deploys and cid not in state.skipped and self.spec.early_stop and cfg.spec_steps > 0:
                skip = self._capacity_skip(cfg, state)
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
            target=list(target) if target else None,
            measure_all=not self.spec.early_stop,
            schedule_algorithm=self.spec.algorithm if self.spec.schedule else None,
        )
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
            self.progress.line(
                f"[search] next: {cfg.label}: {decision.why}" + search.prediction_text(decision.prediction)
            )
            self.in_progress.add((cfg.config_id, 1))
            return cfg
        if decision.wait:
            return WAIT
        self.progress.line(f"[search] done: {decision.why}")
        return None

    def _capacity_skip(self, cfg: SpecConfig, state: SweepState) -> str | None:
        """A shallower depth of the series failed to start for lack of KV memory."""
        for c in self.plan.configs:
            if c.series != cfg.series or not 0 < c.spec_steps < cfg.spec_steps:
                continue
            dep = state.failed.get(c.config_id)
            if dep is not None and analysis.is_capacity_failure(f"{dep.reason}\n{dep.detail or ''}"):
                return (
                    f"spec_steps {c.spec_steps} could not start for lack of KV memory "
                    f"({(dep.reason or '')[:160]}); deeper speculation needs more of it"
                )
        return None

    def _say_misfits(self, cfg: SpecConfig) -> None:
        """After a predicted configuration is measured: where the measurement left its interval."""
        state = self.store.state()
        if cfg.config_id not in state.predictions:
            return
        misses = [m for m in search.find_misfits(state) if m.config.config_id == cfg.config_id]
        if not misses:
            self.progress.line(f"[{cfg.label}] measured within its predicted intervals")
        for m in misses:
            self.progress.line(
                f"[{cfg.label}] MISFIT: {search.misfit_text(m)}; the model refits and widens its intervals"
            )

    # -- one configuration -------------------------------------------------------------------
    def _rebuild(self) -> None:
        outputs.write_all(self.store, self.spec, plot=False, report=False)

    def _deploy_line(self, cfg: SpecConfig, res: DeployResult) -> str:
        if not res.ok:
            return f"[{cfg.label}] deploy FAILED on {res.host} after {res.elapsed_s:.1f} s: {res.reason}" + (
                f" ({res.rollback})" if res.rollback else ""
            )
        rep = res.report or {}
        cap = rep.get("capacity") or {}
        spec = rep.get("speculative") or {}
        ready = rep.get("ready_seconds")
        return (
            f"[{cfg.label}] up on {res.host} in {res.elapsed_s:.1f} s (server ready "
            f"{'-' if ready is None else format(ready, '.1f')} s): max_total_num_tokens "
            f"{cap.get('max_total_num_tokens')}, max_running_requests {cap.get('max_running_requests')}, "
            f"draft tokens {spec.get('num_draft_tokens')}"
        )

    def _client(self, res: DeployResult) -> BenchClient:
        served = ((res.report or {}).get("server") or {}).get("served_model_name")
        assert res.client_url is not None
        return BenchClient(client_options(self.workload, res.client_url, self.api_key, served))

    def _redeploy_vars(self, deployment: int) -> dict[str, Any]:
        """With --repeat-deploys, each deployment carries its number in the server's environment
        (`sglang_server_environment`), so the role sees a changed unit and restarts the server even
        when the configuration is the one already running (an identical run restarts nothing)."""
        if self.spec.repeat_deploys <= 1:
            return {}
        given = self.spec.extra_vars.get("sglang_server_environment") or {}
        if not isinstance(given, Mapping):  # the role refuses it with its own message
            return {}
        env = dict(given)
        env[REDEPLOY_ENV] = str(deployment)
        return {"sglang_server_environment": env}

    async def run_config(self, cfg: SpecConfig, host: str, deployment: int = 1) -> None:
        started = time.perf_counter()
        mode = "configure+run tags" if self.deployer.has_had_full_run(host) else "full run"
        members = self.deployer.members(host)
        where = host if members == [host] else f"{host} ({', '.join(members)})"
        n = self.spec.repeat_deploys
        dep_txt = f" (deployment {deployment}/{n})" if n > 1 else ""
        self.progress.line(f"[{cfg.label}] deploying on {where}{dep_txt} ({mode})")
        label = cfg.config_id if n <= 1 else f"{cfg.config_id}-d{deployment}"
        res = await asyncio.to_thread(
            self.deployer.deploy, cfg, host, label=label, extravars=self._redeploy_vars(deployment)
        )
        if res.ok and not res.client_url:
            res.ok, res.reason = False, "the play published no client_url for the host"
        rec = res.record()
        rec.deployment = deployment
        self.store.append(rec)
        self.progress.line(self._deploy_line(cfg, res))
        if not res.ok:
            self._rebuild()
            return
        async with self._client(res) as client:
            lv = await run_levels(
                client,
                self.workload,
                config=cfg,
                host=host,
                done=self.done,
                log=self.store,
                progress=self.progress,
                after_level=self._rebuild,
                deployment=deployment,
                deployments=n,
            )
        if lv.reason:
            self.store.append(
                BenchFailedRecord(config=cfg, host=host, reason=lv.reason, kind=lv.kind, deployment=deployment)
            )
            self.progress.line(f"[{cfg.label}] benchmark stopped: {lv.reason}")
        self._say_misfits(cfg)
        self.store.append(
            TimingRecord(
                config=cfg,
                host=host,
                total_s=round(time.perf_counter() - started, 3),
                deploy_s=round(res.elapsed_s, 3),
                ready_s=(res.report or {}).get("ready_seconds"),
                warmup_s=round(lv.warmup_s, 3),
                bench_s=round(lv.bench_s, 3),
                full_run=not res.tags,
            )
        )

    async def _worker(self, host: str) -> None:
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        while True:
            unit = self.next_unit()
            if unit is WAIT:
                async with changed:
                    await changed.wait()
                continue
            if not isinstance(unit, tuple):
                return
                return
            cfg, dep = unit
            try:
                await self.run_config(cfg, host, dep)
            finally:
                self.in_progress.discard((cfg.config_id, dep))
                self.finished.add((cfg.config_id, dep))
                async with changed:
                    changed.notify_all()

    # -- the whole sweep -----------------------------------------------------------------------
    def _schedule_stage(self, stage: str) -> list[SpecConfig]:
        """After the static sweep, one stage of the schedule phase (tuner/decide/adaptive_phase.py):
        `envelope` (SGLang's default adaptive config and a no-speculation server), then `search`
        (tuned adaptive configs from what those and the static depths measured), within
        `--schedule-budget`; what each stage decided is said on the progress log."""
        summary = outputs.write_all(self.store, self.spec)
        state = self.store.state()
        static_ids = {c.config_id for c in self.plan.configs}
        budget = self.spec.schedule_budget
        if stage == "envelope":
            plan = adaptive_phase.plan_envelope(state, static_ids, self.spec.algorithm, budget)
        else:
            view = summary.views.get(summary.temperatures[0]) if summary.temperatures else None
            if view is None:
                return []
            w = self.workload
            tokens = (
                (w.input_len or 0) + (w.output_len or 0)
                if isinstance(w.input_len, int) and isinstance(w.output_len, int)
                else 0
            )
            limit = parse_whole_number(self.spec.extra_vars.get("sglang_server_spec_max_steps")) or 16
            plan = adaptive_phase.plan_tuned(
                view.every,
                view.stats,
                state,
                summary.levels,
                self.spec.algorithm,
                budget,
                tokens,
                limit,
                schedule_launch_steps,
                static_ids,
            )
        if plan.skipped:
            self.progress.line(f"[schedule] {stage}: not measured: {plan.skipped}")
            return []
        for line in plan.lines:
            self.progress.line(f"[schedule] {line}")
        return plan.configs

    async def _deploy_best(self, summary: Summary) -> bool:
        chosen = summary.recommendation.chosen
        if chosen is None:
            self.progress.line("--deploy-best: nothing to deploy (no recommendation)")
            return False
        cfg = chosen.config

        async def one(host: str) -> bool:
            self.progress.line(f"[best {cfg.label}] deploying on {host}")
            res = await asyncio.to_thread(self.deployer.deploy, cfg, host, label=f"best-{cfg.config_id}")
            verified, why = False, res.reason
            if res.ok and res.client_url:
                async with self._client(res) as client:
                    healthy = await client.health()
                    probe = await client.request(client.take_indices(1), max_tokens=8) if healthy else None
                    verified = bool(healthy and probe is not None and probe.ok)
                    if not verified:
                        why = (
                            "not healthy after deploy"
                            if not healthy or probe is None
                            else f"probe request failed: {probe.error}"
                        )
            self.store.append(DeployBestRecord.of(res.record(), verified=verified, reason=why))
            self.progress.line(
                f"[best {cfg.label}] on {host}: " + ("up and answering" if verified else f"FAILED: {why}")
            )
            return verified

        results = await asyncio.gather(*(one(h) for h in self.hosts))
        return all(results)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        interrupted = threading.Event()

        def on_signal() -> None:
            interrupted.set()
            self.deployer.cancel.set()  # ends a running ansible-runner play
            if main is not None:
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        known = self.store.state().skipped
        for cfg, why in self.plan.infeasible:
            if cfg.config_id not in known:
                self.store.append(SkipRecord(config=cfg, kind="infeasible", reason=why))
        try:
            await asyncio.gather(*(self._worker(h) for h in self.hosts))
            if self.spec.schedule:
                for stage in ("envelope", "search"):
                    self.extra = self._schedule_stage(stage)
                    if self.extra:
                        await asyncio.gather(*(self._worker(h) for h in self.hosts))
        except asyncio.CancelledError:
            if not interrupted.is_set():
                raise
            self.progress.line("interrupted: finished points are kept; continue with --resume")
            self._rebuild()
            return 1
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        summary = outputs.write_all(self.store, self.spec)
        rc = 0 if summary.recommendation.chosen is not None else 1
        if summary.recommendation.chosen is None:
            self.progress.line(f"no recommendation: {summary.recommendation.reason}")
        if self.spec.deploy_best:
            try:
                ok = await self._deploy_best(summary)
            except asyncio.CancelledError:
                self.progress.line("interrupted during --deploy-best")
                return 1
            outputs.write_all(self.store, self.spec)
            if not ok:
                rc = 1
        return rc


def server_record(url: str, info: dict[str, Any], served: str | None) -> DeployRecord:
    """`bench --url`: what the running server says it is, as a deploy record (`source`
    "server_info"), from the same /server_info parser the sglang_ready module uses."""
    spec = info.get("speculative") or {}
    steps = spec.get("num_steps") if spec.get("enabled") else 0
    topk = spec.get("eagle_topk") or 1
    draft = spec.get("num_draft_tokens") if (steps and topk > 1) else None
    cfg = SpecConfig(int(steps or 0), int(topk), draft, str(spec.get("algorithm") or "NEXTN"))
    return DeployRecord(
        config=cfg,
        host=url,
        status="ok",
        client_url=url,
        source="server_info",
        capacity={
            "max_total_num_tokens": info.get("max_total_num_tokens"),
            "max_running_requests": info.get("max_running_requests"),
            "max_prefill_tokens": info.get("max_prefill_tokens"),
            "chunked_prefill_size": info.get("chunked_prefill_size"),
            "context_len": info.get("context_length"),
        },
        speculative={k: spec.get(k) for k in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")},
        server={"version": info.get("version"), "served_model_name": served},
    )


async def bench_url(
    spec: SweepSpec, store: Store | None, progress: Progress, api_key: str | None
) -> tuple[int, Summary | None, SweepState]:
    """`bench --url`: the same client and metrics against a running server, no deploy."""
    from .client import ServerError

    assert spec.url is not None
    url = spec.url
    log: RecordLog = store if store is not None else MemoryStore()

    def rebuild() -> None:
        if store is not None:
            outputs.write_all(store, spec, plot=False, report=False)

    async with BenchClient(client_options(spec.workload, url, api_key)) as client:
        try:
            info = await client.parsed_server_info()
        except ServerError as exc:
            progress.line(f"{url}: {exc}")
            return 1, None, log.state()
        served = info.get("served_model_name") or await client.served_model_name()
        client.opts.model = served
        rec = server_record(url, info, served)
        cfg = rec.config
        log.append(rec)
        progress.line(
            f"[{url}] {cfg.label}: max_total_num_tokens {rec.max_total_num_tokens}, "
            f"max_running_requests {rec.max_running_requests}, model {served}"
        )
        lv = await run_levels(
            client,
            spec.workload,
            config=cfg,
            host=url,
            done=set(),
            log=log,
            progress=progress,
            after_level=rebuild,
        )
        if lv.reason:
            log.append(BenchFailedRecord(config=cfg, host=url, reason=lv.reason, kind=lv.kind))
            progress.line(f"[{url}] benchmark stopped: {lv.reason}")
    summary = outputs.write_all(store, spec) if store is not None else None
    state = log.state()
    ok = any(lv.measured for lv in state.levels(measured_only=False))
    if summary is not None and summary.recommendation.chosen is None:
        ok = False  # nothing competes (every level lost requests, or none meets the SLO): as `sweep`
    return (0 if ok and not lv.reason else 1), summary, state
