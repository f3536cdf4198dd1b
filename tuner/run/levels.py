"""One deployment's benchmark: warm up, then every (temperature, repeat, level) in turn, each level's
record appended as it ends; the server going away mid-level is waited for and measured again.
Used by the sweep (tuner/run/sweep.py) and by `bench --url`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from ..data.records import (
    LevelKey,
    LevelRecord,
    Record,
    SweepState,
)
from ..data.redact import Redactor
from ..measure.metrics import LevelMetrics, RequestTrace, counter_delta, level_metrics, level_samples, running_batch
from ..spec.configs import SpecConfig
from ..spec.flags import MAX_LEVEL_AXIS
from ..spec.sweepspec import WorkloadSpec
from ..spec.workload import PromptSource
from .client import BenchClient, ClientOptions, LevelPlan, with_ticker

TICK_S = 10.0


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
        if not self.quiet:
            self.error(text)

    def error(self, text: str) -> None:
        """Why a run failed: written even when quiet (a failure with no reason is worse than noise)."""
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
    axis = MAX_LEVEL_AXIS  # repeats and concurrency levels a sweep may have (tuner/spec/flags.py)
    return ((ti * axis + (repeat - 1)) * axis + ci) * 1_000_000


def level_line(cfg: SpecConfig, c: int, rep: int, repeats: int, m: LevelMetrics, extra: str = "") -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    # no interval under two of the level's batch windows (a level cut short: tuner/measure/stats.py
    # ratio_interval), said in words rather than as "+--%"
    spread = "no interval" if m.precision_pct is None else f"+-{m.precision_pct:.1f}%"
    s = (
        f"[{cfg.label}{extra} C={c} rep {rep}/{repeats}] {f(m.output_tok_s, '.0f')} tok/s agg "
        f"({spread}, {m.requests} requests), "
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
    only: Sequence[int] | None = None,
) -> LevelsOutcome:
    """Warm up, then every (temperature, repeat, level) not yet done on this deployment (of the
    levels in `only` when given: a confirmation start measures only the levels in doubt, each on
    the prompts it had on every other deployment).

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
        if (only is None or c in only) and (config.config_id, float(temp), c, rep, deployment) not in done
    ]
    if not todo:
        return res
    client.opts.temperature = float(todo[0][0])
    t0 = time.perf_counter()
    warm = await client.warmup(w.warmup_requests, min(4, max(c for _t, _r, c in todo)))
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
            # a restarted server is cold again (JIT, graphs, connections): warm it as at the start
            await client.warmup(w.warmup_requests, min(4, c))
            attempt += 1
    return res
