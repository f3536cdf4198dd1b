"""Orchestration: deploy each configuration, benchmark every level, store, decide what is next.

One worker per host (design.md "Many hosts"): with several hosts of group `sglang_servers` the
configurations are spread over them, each deploy limited to its host. Configurations are handed
out in plan order (ascending steps within a series); the early-stop rule is checked each time a
configuration is about to start, from what has been measured by then, so it also holds after
`--resume`. With several hosts a deeper configuration may already be running when a shallower
one ends; it is finished, not wasted, and only configurations not yet started are skipped.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from . import analysis, outputs
from .client import BenchClient, ClientOptions, with_ticker
from .deploy import Deployer, DeployResult
from .metrics import RequestTrace, counter_delta, level_metrics
from .redact import Redactor
from .specs import ConfigPlan, SpecConfig, requests_for_level
from .store import ResumeState, Store, result_rows

# sweep.json keys that define a sweep: `--resume` refuses a directory whose values differ.
IDENTITY_KEYS = (
    "command",
    "steps",
    "topk",
    "draft_tokens",
    "algorithm",
    "concurrency",
    "input_len",
    "output_len",
    "requests_per_level",
    "temperature",
    "repeats",
    "endpoint",
    "ignore_eos",
    "seed",
    "inventory",
    "limit",
    "extra_vars",
    "playbook",
    "url",
)

TICK_S = 10.0


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


def cfg_label(cfg: SpecConfig) -> str:
    if cfg.spec_steps == 0:
        return "k=0 (no speculation)"
    s = f"k={cfg.spec_steps}"
    if cfg.spec_topk != 1:
        s += f" topk={cfg.spec_topk}"
    if cfg.spec_draft_tokens is not None:
        s += f" draft={cfg.spec_draft_tokens}"
    return s


@dataclass
class BenchSettings:
    concurrency: list[int]
    input_len: int = 256
    output_len: int = 256
    requests_per_level: int | None = None
    temperature: float = 0.0
    repeats: int = 1
    endpoint: str = "generate"
    ignore_eos: bool = True
    warmup_requests: int = 4
    request_timeout: float = 600.0
    seed: int = 0
    api_key: str | None = None

    def client_options(self, url: str, model: str | None = None) -> ClientOptions:
        return ClientOptions(
            url=url,
            endpoint=self.endpoint,
            input_len=self.input_len,
            output_len=self.output_len,
            temperature=self.temperature,
            ignore_eos=self.ignore_eos,
            api_key=self.api_key,
            model=model,
            request_timeout=self.request_timeout,
            seed=self.seed,
        )


def level_line(cfg: SpecConfig, c: int, rep: int, repeats: int, m: dict[str, Any]) -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    s = (
        f"[{cfg_label(cfg)} C={c} rep {rep}/{repeats}] {f(m.get('output_tok_s'), '.0f')} tok/s agg, "
        f"{f(m.get('per_request_tok_s'), '.1f')} tok/s/req, TTFT p50 {f(m.get('ttft_ms_p50'), '.0f')} ms, "
        f"accept {f(m.get('accept_length'), '.2f')}"
    )
    if m.get("requests_failed"):
        s += f", {m['requests_failed']}/{m['requests']} FAILED"
    return s


@dataclass
class LevelsOutcome:
    reason: str | None = None  # why the benchmark stopped early, if it did
    warmup_s: float = 0.0
    bench_s: float = 0.0  # the levels' own time (first send to last completion, summed)


async def run_levels(
    client: BenchClient,
    settings: BenchSettings,
    *,
    config: SpecConfig,
    host: str,
    done: set[tuple[str, int, int]],
    store: Store,
    progress: Progress,
    after_level: Callable[[], None] | None = None,
) -> LevelsOutcome:
    """Warm up, then every (repeat, level) not yet done."""
    cid = config.config_id
    res = LevelsOutcome()
    todo = [
        (rep, c) for rep in range(1, settings.repeats + 1) for c in settings.concurrency if (cid, c, rep) not in done
    ]
    if not todo:
        return res
    t0 = time.perf_counter()
    warm = await client.warmup(settings.warmup_requests, min(4, max(settings.concurrency)))
    res.warmup_s = time.perf_counter() - t0
    if warm and not any(t.ok for t in warm):
        res.reason = f"every warm-up request failed: {warm[0].error}"
        return res
    for rep, c in todo:
        n = requests_for_level(c, settings.requests_per_level)
        before = await client.counters()
        finished: list[RequestTrace] = []
        started = time.perf_counter()

        def tick() -> None:
            el = time.perf_counter() - started
            toks = sum(t.output_tokens or 0 for t in finished if t.ok)
            progress.line(
                f"[{cfg_label(config)} C={c} rep {rep}/{settings.repeats}] "
                f"{len(finished)}/{n} requests, {toks / el if el else 0:.0f} tok/s so far"
            )

        traces = await with_ticker(client.run_level(c, n, on_done=finished.append), tick, TICK_S)
        after = await client.counters()
        m = level_metrics(c, traces, counter_delta(before, after)).to_dict()
        res.bench_s += m["wall_s"]
        store.append(
            {
                "type": "level",
                "config": config.to_dict(),
                "host": host,
                "repeat": rep,
                "concurrency": c,
                "temperature": settings.temperature,
                "input_len": settings.input_len,
                "output_len": settings.output_len,
                "endpoint": settings.endpoint,
                "metrics": m,
                "bench_s": round(time.perf_counter() - started, 3),
            }
        )
        done.add((cid, c, rep))
        progress.line(level_line(config, c, rep, settings.repeats, m))
        if after_level is not None:
            after_level()
        if m["requests_ok"] == 0 and not await client.health():
            first = next((t.error for t in traces if t.error), "unknown")
            res.reason = f"the server stopped answering at concurrency {c} ({first})"
            return res
    return res


class Sweep:
    def __init__(
        self,
        *,
        params: dict[str, Any],
        plan: ConfigPlan,
        settings: BenchSettings,
        store: Store,
        deployer: Deployer,
        hosts: list[str],
        progress: Progress,
        early_stop: bool = True,
        deploy_best: bool = False,
        target: list[int] | None = None,
    ):
        self.params = params
        self.plan = plan
        self.settings = settings
        self.store = store
        self.deployer = deployer
        self.hosts = hosts
        self.progress = progress
        self.early_stop = early_stop
        self.deploy_best = deploy_best
        self.target = target
        self.in_progress: set[str] = set()
        self.finished: set[str] = set()
        self.done: set[tuple[str, int, int]] = set()

    # -- what to run next ------------------------------------------------------------------
    def _all_levels_done(self, cid: str) -> bool:
        return all(
            (cid, c, r) in self.done for c in self.settings.concurrency for r in range(1, self.settings.repeats + 1)
        )

    def _skip_reason(
        self, cfg: SpecConfig, records: list[dict[str, Any]], state: ResumeState
    ) -> tuple[str, str] | None:
        same = [c for c in self.plan.configs if c.series == cfg.series and 0 < c.spec_steps < cfg.spec_steps]
        details = {
            (r.get("config") or {}).get("config_id"): f"{r.get('reason')}\n{r.get('detail') or ''}"
            for r in records
            if r.get("type") == "deploy" and r.get("status") != "ok"
        }
        for c in same:
            reason = state.failed.get(c.config_id)
            if reason and analysis.is_capacity_failure(details.get(c.config_id) or reason):
                return (
                    f"spec_steps {c.spec_steps} could not start for lack of KV memory "
                    f"({reason[:160]}); deeper speculation needs more of it",
                    "capacity",
                )
        stats = analysis.aggregate(result_rows(records, self.params))
        series = []
        for c in sorted(same, key=lambda c: c.spec_steps):
            if c.config_id not in self.finished or not self._all_levels_done(c.config_id):
                continue
            pts = {cc: p for (cid, cc), p in stats.items() if cid == c.config_id}
            if pts:
                series.append((c, pts))
        if len(series) < 2:
            return None
        es = analysis.early_stop([pts for _, pts in series], self.settings.concurrency)
        if es.stop:
            return (f"after spec_steps {series[-1][0].spec_steps}: {es.detail}", "early_stop")
        return None

    def next_config(self) -> SpecConfig | None:
        records = self.store.records()
        state = ResumeState.from_records(records)
        self.done |= state.done_levels
        for cfg in self.plan.configs:
            cid = cfg.config_id
            if cid in self.in_progress or cid in self.finished:
                continue
            if cid in state.failed or cid in state.skipped or self._all_levels_done(cid):
                self.finished.add(cid)
                continue
            if self.early_stop and cfg.spec_steps > 0:
                skip = self._skip_reason(cfg, records, state)
                if skip is not None:
                    reason, kind = skip
                    self.store.append({"type": "skip", "kind": kind, "config": cfg.to_dict(), "reason": reason})
                    self.progress.line(f"[{cfg_label(cfg)}] skipped: {reason}")
                    self.finished.add(cid)
                    records = self.store.records()
                    state = ResumeState.from_records(records)
                    continue
            self.in_progress.add(cid)
            return cfg
        return None

    # -- one configuration -------------------------------------------------------------------
    def _rebuild(self) -> None:
        outputs.write_all(self.store, self.params, target=self.target, plot=False, report=False)

    def _deploy_line(self, cfg: SpecConfig, res: DeployResult) -> str:
        if not res.ok:
            return f"[{cfg_label(cfg)}] deploy FAILED on {res.host} after {res.elapsed_s:.1f} s: {res.reason}" + (
                f" ({res.rollback})" if res.rollback else ""
            )
        rep = res.report or {}
        cap = rep.get("capacity") or {}
        spec = rep.get("speculative") or {}
        ready = rep.get("ready_seconds")
        return (
            f"[{cfg_label(cfg)}] up on {res.host} in {res.elapsed_s:.1f} s (server ready "
            f"{'-' if ready is None else format(ready, '.1f')} s): max_total_num_tokens "
            f"{cap.get('max_total_num_tokens')}, max_running_requests {cap.get('max_running_requests')}, "
            f"draft tokens {spec.get('num_draft_tokens')}"
        )

    async def run_config(self, cfg: SpecConfig, host: str) -> None:
        started = time.perf_counter()
        mode = "configure+run tags" if self.deployer.has_had_full_run(host) else "full run"
        where = host if self.deployer.members(host) == [host] else f"{host} ({', '.join(self.deployer.members(host))})"
        self.progress.line(f"[{cfg_label(cfg)}] deploying on {where} ({mode})")
        res = await asyncio.to_thread(self.deployer.deploy, cfg, host)
        if res.ok and not res.client_url:
            res.ok, res.reason = False, "the play published no client_url for the host"
        self.store.append(res.record())
        self.progress.line(self._deploy_line(cfg, res))
        if not res.ok:
            self._rebuild()
            return
        served = ((res.report or {}).get("server") or {}).get("served_model_name")
        async with BenchClient(self.settings.client_options(res.client_url, served)) as client:
            lv = await run_levels(
                client,
                self.settings,
                config=cfg,
                host=host,
                done=self.done,
                store=self.store,
                progress=self.progress,
                after_level=self._rebuild,
            )
        if lv.reason:
            self.store.append({"type": "bench_failed", "config": cfg.to_dict(), "host": host, "reason": lv.reason})
            self.progress.line(f"[{cfg_label(cfg)}] benchmark stopped: {lv.reason}")
        # Where a configuration's time went (bench/sweep_overhead.py reads this).
        self.store.append(
            {
                "type": "timing",
                "config": cfg.to_dict(),
                "host": host,
                "total_s": round(time.perf_counter() - started, 3),
                "deploy_s": round(res.elapsed_s, 3),
                "ready_s": (res.report or {}).get("ready_seconds"),
                "warmup_s": round(lv.warmup_s, 3),
                "bench_s": round(lv.bench_s, 3),
                "full_run": not res.tags,
            }
        )

    async def _worker(self, host: str) -> None:
        while True:
            cfg = self.next_config()
            if cfg is None:
                return
            try:
                await self.run_config(cfg, host)
            finally:
                self.in_progress.discard(cfg.config_id)
                self.finished.add(cfg.config_id)

    # -- the whole sweep -----------------------------------------------------------------------
    async def _deploy_best(self, summary: outputs.Summary) -> bool:
        chosen = summary.recommendation.chosen
        if chosen is None:
            self.progress.line("--deploy-best: nothing to deploy (no recommendation)")
            return False
        cfg = SpecConfig(chosen.spec_steps, chosen.spec_topk, chosen.spec_draft_tokens, chosen.spec_algorithm)

        async def one(host: str) -> bool:
            self.progress.line(f"[best {cfg_label(cfg)}] deploying on {host}")
            res = await asyncio.to_thread(self.deployer.deploy, cfg, host, label=f"best-{cfg.config_id}")
            verified, why = False, res.reason
            if res.ok and res.client_url:
                served = ((res.report or {}).get("server") or {}).get("served_model_name")
                async with BenchClient(self.settings.client_options(res.client_url, served)) as client:
                    healthy = await client.health()
                    probe = await client.request(client.take_indices(1), max_tokens=8) if healthy else None
                    verified = bool(healthy and probe is not None and probe.ok)
                    if not verified:
                        why = "not healthy after deploy" if not healthy else f"probe request failed: {probe.error}"
            rec = res.record()
            rec.update(
                {
                    "type": "deploy_best",
                    "status": "ok" if verified else "failed",
                    "reason": None if verified else why,
                    "verified": verified,
                }
            )
            self.store.append(rec)
            self.progress.line(
                f"[best {cfg_label(cfg)}] on {host}: " + ("up and answering" if verified else f"FAILED: {why}")
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
        for cfg, why in self.plan.infeasible:
            if not any(
                r.get("type") == "skip" and (r.get("config") or {}).get("config_id") == cfg.config_id
                for r in self.store.records()
            ):
                self.store.append({"type": "skip", "kind": "infeasible", "config": cfg.to_dict(), "reason": why})
        try:
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
        summary = outputs.write_all(self.store, self.params, target=self.target)
        rc = 0 if summary.recommendation.chosen is not None else 1
        if summary.recommendation.chosen is None:
            self.progress.line(f"no recommendation: {summary.recommendation.reason}")
        if self.deploy_best:
            try:
                ok = await self._deploy_best(summary)
            except asyncio.CancelledError:
                self.progress.line("interrupted during --deploy-best")
                return 1
            summary = outputs.write_all(self.store, self.params, target=self.target)
            if not ok:
                rc = 1
        return rc


async def bench_url(
    url: str, settings: BenchSettings, store: Store | None, progress: Progress, params: dict[str, Any]
) -> tuple[int, outputs.Summary | None, list[dict[str, Any]]]:
    """`bench --url`: the same client and metrics against a running server, no deploy."""
    from .client import ServerError

    async with BenchClient(settings.client_options(url)) as client:
        try:
            info = await client.parsed_server_info()
        except ServerError as exc:
            progress.line(f"{url}: {exc}")
            return 1, None, []
        spec = info.get("speculative") or {}
        steps = spec.get("num_steps") if spec.get("enabled") else 0
        topk = spec.get("eagle_topk") or 1
        draft = spec.get("num_draft_tokens") if (steps and topk > 1) else None
        cfg = SpecConfig(int(steps or 0), int(topk), draft, str(spec.get("algorithm") or "NEXTN"))
        served = info.get("served_model_name") or await client.served_model_name()
        client.opts.model = served
        record = {
            "type": "deploy",
            "source": "server_info",
            "config": cfg.to_dict(),
            "host": url,
            "status": "ok",
            "client_url": url,
            "ready_s": None,
            "capacity": {
                "max_total_num_tokens": info.get("max_total_num_tokens"),
                "max_running_requests": info.get("max_running_requests"),
                "max_prefill_tokens": info.get("max_prefill_tokens"),
                "chunked_prefill_size": info.get("chunked_prefill_size"),
                "context_len": info.get("context_length"),
            },
            "speculative": {k: spec.get(k) for k in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")},
            "server": {"version": info.get("version"), "served_model_name": served},
        }
        mem_store = store or _MemoryStore()
        mem_store.append(record)
        progress.line(
            f"[{url}] {cfg_label(cfg)}: max_total_num_tokens {info.get('max_total_num_tokens')}, "
            f"max_running_requests {info.get('max_running_requests')}, model {served}"
        )
        lv = await run_levels(
            client,
            settings,
            config=cfg,
            host=url,
            done=set(),
            store=mem_store,
            progress=progress,
            after_level=(lambda: outputs.write_all(store, params, plot=False, report=False))
            if store is not None
            else None,
        )
        reason = lv.reason
        if reason:
            mem_store.append({"type": "bench_failed", "config": cfg.to_dict(), "host": url, "reason": reason})
            progress.line(f"[{url}] benchmark stopped: {reason}")
    records = mem_store.records()
    summary = None
    if store is not None:
        summary = outputs.write_all(store, params)
    rows = [r for r in result_rows(records, {"concurrency": settings.concurrency}) if r.get("status")]
    ok = any(r.get("status") in ("ok", "partial") for r in rows)
    return (0 if ok and not reason else 1), summary, rows


class _MemoryStore:
    """`bench` without `--out`: the same records, kept in memory only."""

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        self._records.append(record)
        return record

    def records(self) -> list[dict[str, Any]]:
        return list(self._records)
