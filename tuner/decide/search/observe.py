"""What the search reads from the sweep's state: per configuration and level, the measured
throughput, tokens per verify step, running batch and the noise around them (pure).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ...data.records import SweepState
from ...measure.metrics import sum_histograms
from ...spec.configs import SpecConfig
from ...spec.sweepspec import DEFAULT_LEN, WorkloadSpec
from .. import analysis
from ..analysis import PointStats

Z = 1.96  # the model's bands are 95% intervals, as the measured cells' are (tuner/measure/stats.py LEVEL)
TAU_PRIOR_SD = 0.3  # prior sd of the per-position slope v of logit(acceptance) with one measured depth
CALIBRATION_SD_ONE = 0.03  # relative spread assumed for a level's calibration with one configuration there
TAU_REL_FLOOR = 0.005  # tokens per verify step are never known better than 0.5% (draw noise)
STEP_REL_FLOOR = 0.01  # nor a step time better than 1%
MIN_CHANCE = 0.1  # a configuration is deployed while it has at least this chance to win a level
# What a new deployment adds to a level's measurement beyond its requests' noise (relative sd): the
# restart's draw (GPU clocks, memory placement, graph layout), which moves every level of the
# deployment together. A prediction is of the configuration's throughput; one deployment's
# measurement of it also carries that deployment's draw, which nothing measured before it shows
# (the confirmation round, which measures the spread, comes after the search:
# tuner/measure/restarts.py). The misfit check sets a measurement against the prediction with
# this added, the deployment's levels held together (model.py `measured_band`). Its size: a
# percent or two between two starts of one configuration is common on real servers (vllm-project/vllm#53436 measured SGLang's run-to-run CV
# at 0.1-2.5% by concurrency with speculation on; vllm-project/vllm#42484 saw one vLLM set-up's
# throughput move 16% between a long-running server and a fresh start).
DEPLOY_REL_SD = 0.015
MAX_WIDEN = 10.0  # the most a misfit widens the intervals by
FloatArray = npt.NDArray[np.float64]


# -- noise: one place, so a better statistic of the measurements slots in here --------------------


def win_margin(best: PointStats) -> float:
    """How much a configuration must beat the level's best by to win beyond the noise: the choice's
    own tolerance (tuner/decide/analysis.py: the two 95% intervals apart), taken as if the newcomer were
    measured as precisely as the best."""
    return analysis.tolerance(best, best)


def point_sd(p: PointStats) -> float:
    """Standard deviation of a cell's throughput estimate, read off its 95% interval."""
    return p.interval.half_width / Z


def noise_rel_sd(points: Iterable[PointStats]) -> float:
    """Relative standard deviation of one measured cell: the median over the cells of their 95%
    intervals' half-width (tuner/measure/stats.py) read as Z standard deviations, at least the choice's
    1% floor read the same way."""
    rel = sorted(point_sd(p) / p.mean for p in points if p.mean > 0)
    measured = rel[len(rel) // 2] if rel else 0.0
    return max(measured, analysis.MIN_REL_TOL / Z)


def request_lengths(workload: WorkloadSpec, state: SweepState) -> tuple[int, int]:
    """A request's prompt and output tokens: the workload's fixed lengths, or with a dataset what
    the levels measured (the server's prompt count, tokens per request); before any level, the
    synthetic default."""
    levels = [lv for lv in state.levels() if lv.metrics.requests_ok]
    prompt = workload.input_len
    if prompt is None:
        seen = [lv.metrics.prompt_tokens_mean for lv in levels if lv.metrics.prompt_tokens_mean]
        prompt = int(np.median(seen)) if seen else DEFAULT_LEN
    output = workload.output_len
    if output is None:
        seen = [lv.metrics.output_tokens / lv.metrics.requests_ok for lv in levels]
        output = int(np.median(seen)) if seen else DEFAULT_LEN
    return int(prompt), int(output)


# -- what was measured ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelObs:
    """One configuration at one level, over its repeats."""

    concurrency: int
    tok_s: float
    sem: float
    rate: float | None  # per-request decode rate, tok/s
    tau: float | None  # decode tokens per verify step (1 without speculation)
    tokens: float | None  # output tokens per request
    ttft_s: float | None
    requests: int = 1  # requests completed over its repeats


@dataclass(frozen=True)
class ConfigObs:
    """A deployed configuration: what the server said at start-up and what its levels measured."""

    config: SpecConfig
    verify_tokens: int
    kv_tokens: int | None
    max_running: int | None
    levels: Mapping[int, LevelObs]
    # Verify steps that accepted exactly n drafts, over every measured level (None unless each
    # level carried one): the acceptance at each draft position, not only their sum.
    hist: tuple[int, ...] | None = None

    @property
    def k(self) -> int:
        return self.config.spec_steps

    def tau(self) -> tuple[float, float] | None:
        """Tokens per verify step, the mean over the levels (acceptance does not depend on the
        concurrency) weighted by their requests, and its standard error from their spread.

        Requests differ in how well they draft, so a level of four requests measures acceptance far
        less precisely than one of a hundred: weighting by requests keeps the small levels from
        setting the error of the whole."""
        vals = [(lv.tau, float(max(lv.requests, 1))) for lv in self.levels.values() if lv.tau is not None]
        if not vals:
            return None
        total = sum(w for _, w in vals)
        mean = sum(v * w for v, w in vals) / total
        n = len(vals)
        var = sum((w * (v - mean)) ** 2 for v, w in vals) / total**2 * n / (n - 1) if n > 1 else 0.0
        return mean, max(math.sqrt(var), TAU_REL_FLOOR * mean)


def verify_width(cfg: SpecConfig, resolved: int | None = None) -> int:
    """Tokens each request verifies per step: the server's resolved draft tokens, else the flag,
    else steps + 1 (a chain)."""
    if cfg.spec_steps == 0:
        return 1
    if resolved:
        return int(resolved)
    if cfg.spec_draft_tokens:
        return int(cfg.spec_draft_tokens)
    return cfg.spec_steps + 1


def running_batch(concurrency: int, requests: int, max_running: float | None, kv: float | None, need: int) -> float:
    """Requests decoding together at a level: the clients, capped by the server's limit and by how
    many prompts + outputs its KV pool holds."""
    b = float(min(concurrency, requests))
    if max_running is not None and math.isfinite(max_running):
        b = min(b, max_running)
    if kv is not None and need > 0 and math.isfinite(kv):
        b = min(b, math.floor(kv / need))
    return max(b, 0.0)


def queued(concurrency: int, requests: int, batch: float) -> bool:
    """Whether requests wait for a slot at this level (fewer run than the clients send)."""
    return batch < min(concurrency, requests)


def decode_rate(p: PointStats) -> float | None:
    """Per-request decode tok/s as the server's steps delivered it: the cell's decode tokens over
    their seconds (`LevelSamples.decode_totals`), else the mean of the requests' rates. Requests
    differ in how well their prompts draft, and the mean of their rates overweights the easy ones,
    by more the deeper the draft (the spread grows with depth): tokens per step (a ratio of sums)
    over that mean would read a step time short by a depth-dependent share and bend the step fit."""
    tokens = seconds = 0.0
    for lv in p.levels:
        if lv.samples is not None:
            t, s = lv.samples.decode_totals()
            tokens, seconds = tokens + t, seconds + s
    return tokens / seconds if seconds > 0 else p.per_request_mean


def observe(state: SweepState, workload: WorkloadSpec) -> list[ConfigObs]:
    """The measured configurations (successful deploy, at least one measured level)."""
    stats = analysis.aggregate(state.levels())
    by_cfg: dict[str, dict[int, PointStats]] = {}
    for (cid, c), p in stats.items():
        by_cfg.setdefault(cid, {})[c] = p
    out = []
    for cid, pts in by_cfg.items():
        dep = state.deploys.get(cid)
        cfg = state.configs[cid]
        if cfg.is_schedule:
            continue  # an adaptive server changes depth with the batch: not a point of these trends
        levels = {}
        hist = sum_histograms([lv.metrics.accept_hist for p in pts.values() for lv in p.levels])
        for c, p in pts.items():
            ok = sum(lv.metrics.requests_ok for lv in p.levels)
            toks = sum(lv.metrics.output_tokens for lv in p.levels)
            per_req = toks / ok if ok else None
            acc = p.accept_mean
            tau: float | None
            if cfg.spec_steps == 0:
                tau = 1.0
            elif acc is not None and per_req and per_req > 1:
                tau = acc * (per_req - 1.0) / per_req  # the first token comes from prefill
            else:
                tau = None
            ttft = p.metric_mean("ttft_ms_p50")
            levels[c] = LevelObs(
                concurrency=c,
                tok_s=p.mean,
                sem=p.sem,
                rate=decode_rate(p),
                tau=tau,
                tokens=per_req,
                ttft_s=None if ttft is None else ttft / 1000.0,
                requests=ok,
            )
        out.append(
            ConfigObs(
                config=cfg,
                verify_tokens=verify_width(cfg, dep.resolved_draft_tokens if dep else None),
                kv_tokens=dep.max_total_num_tokens if dep else None,
                max_running=dep.max_running_requests if dep else None,
                levels=levels,
                hist=None if hist is None or cfg.spec_steps == 0 else tuple(hist),
            )
        )
    out.sort(key=lambda o: o.config.order_key)
    return out
