"""Adaptive configurations to try (pure): per-bucket candidate ladders for SGLang's per-batch-size
adaptive speculation, built from what the static sweep and SGLang's default adaptive config measured.

SGLang 0.5.13+ (`--speculative-adaptive-config FILE.json`, sgl-project/sglang PR #24055,
python/sglang/srt/speculative/adaptive_spec_params.py) routes the running batch to the bucket with
the largest lower bound at or below it and, in each bucket, moves along the bucket's
`candidate_steps` by an EMA of the drafts accepted per verify step (`AdaptiveStepSlot`): from
depth c it rises while the EMA is above `c - 0.5 + up_hysteresis`, drops to the previous
candidate p while the EMA is at or below `p - 0.5 + down_hysteresis` (0.5 for p = 0). Its own
default (`DEFAULT_ADAPTIVE_CONFIG`: `1: [1, 3, 5, 7]`, `8: [0, 1, 3]`, `32: [0, 1]`, `64: [0]`)
is one such ladder set, tuned for no machine in particular.

What a ladder costs: SGLang reserves KV for the widest candidate at every decode step, twice,
whichever bucket the batch is in (python/sglang/srt/mem_cache/allocation_sizing.py
`get_alloc_reserve_per_decode` = 2 x `get_alloc_len_per_decode`, which reads
`max_speculative_num_draft_tokens`: "adaptive algorithms may switch to a longer state after the
scheduler reserves KV", runtime_context.py), and builds a runtime state (draft backends, CUDA
graphs) per candidate. So the widest candidate is charged to every bucket (`kv_reserve_tokens`),
and a candidate is only offered where it can pay.

The ladders here are seeded by three measured things, never by a machine's constants:

* the per-level static winners, placed at the running batch the server reported, with bucket
  bounds on captured CUDA-graph batch sizes between levels (tuner/decide/schedule.py `boundary`);
* SGLang's default adaptive config's own measurement: where it beat the level's best static
  depth, the depth it ran there (read from its accept length against the static depths' accept
  lengths, `infer_depth`) becomes that bucket's target, even beyond the depths the static sweep
  started;
* the acceptance the static depths measured (accepted drafts per verify step at each depth): it
  says where SGLang's EMA rule would settle on a ladder (`settle`), and the hysteresis is set only
  where the defaults would settle elsewhere than the target (`centring_hysteresis`); its spread
  (the acceptance histograms) says how far the EMA swings, which spaces the rungs (`ema_swing`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..spec.configs import ladder_label
from .schedule import boundary

# AdaptiveStepSlot's defaults (0.5.23 adaptive_spec_params.py `cfg.get(...)`).
SLOT_UP_HYSTERESIS = 0.0
SLOT_DOWN_HYSTERESIS = -0.25
SLOT_EMA_ALPHA = 0.2
# Below this running batch one request's acceptance moves the bucket's EMA (SGLang averages the
# accepted drafts over the batch): a ladder can follow each request; above it the average is
# steady and a pinned depth does the same without extra runtime states. 8 is the second bucket
# bound of SGLang's own default config.
LADDER_BELOW_BATCH = 8
DEFAULT_BUDGET = 4  # deployments beyond the static sweep (`--schedule-budget`)


@dataclass(frozen=True)
class Bucket:
    """One batch-size bucket: lower bound, candidate depths, and hysteresis when it is not SGLang's default."""

    bound: int
    candidates: tuple[int, ...]
    up_hysteresis: float | None = None
    down_hysteresis: float | None = None

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {"candidate_steps": list(self.candidates)}
        if self.up_hysteresis is not None:
            out["up_hysteresis"] = round(self.up_hysteresis, 3)
        if self.down_hysteresis is not None:
            out["down_hysteresis"] = round(self.down_hysteresis, 3)
        return out


@dataclass(frozen=True)
class AdaptiveConfig:
    """A per-batch-size adaptive config: buckets in increasing order, the first at batch 1."""

    buckets: tuple[Bucket, ...]

    def __post_init__(self) -> None:
        bounds = [b.bound for b in self.buckets]
        if not bounds or bounds[0] != 1 or bounds != sorted(set(bounds)):
            raise ValueError(f"buckets need ascending, distinct bounds starting at 1, got {bounds}")
        for b in self.buckets:
            if not b.candidates or any(c < 0 for c in b.candidates) or list(b.candidates) != sorted(set(b.candidates)):
                raise ValueError(
                    f"bucket {b.bound}: candidates must be distinct steps >= 0 in order, got {b.candidates}"
                )
        if self.widest == 0:
            raise ValueError("an adaptive config must draft in some bucket")

    def to_sglang(self) -> dict[str, dict[str, Any]]:
        """SGLang's per-batch-size JSON (what the role's `spec_schedule` takes and writes)."""
        return {str(b.bound): b.entry() for b in self.buckets}

    def to_json_text(self) -> str:
        return json.dumps(self.to_sglang(), sort_keys=False)

    @property
    def widest(self) -> int:
        """The deepest candidate: what SGLang reserves KV and builds buffers for."""
        return max(c for b in self.buckets for c in b.candidates)

    @property
    def pinned(self) -> bool:
        """One candidate per bucket and default hysteresis: a plain per-batch-size schedule."""
        return all(
            len(b.candidates) == 1 and b.up_hysteresis is None and b.down_hysteresis is None for b in self.buckets
        )

    @property
    def label(self) -> str:
        """The ladder in words, as reports and progress lines name its configuration (one wording:
        tuner/spec/configs.py `ladder_label`, the hysteresis a bucket sets and no other)."""
        return ladder_label(self.to_sglang())

    @classmethod
    def from_sglang(cls, doc: Mapping[str, Any]) -> AdaptiveConfig:
        buckets = []
        for key in sorted((k for k in doc if str(k).isdigit()), key=int):
            e = doc[key]
            if isinstance(e, Mapping):
                cands = tuple(sorted({int(s) for s in e["candidate_steps"]}))
                up, down = e.get("up_hysteresis"), e.get("down_hysteresis")
                buckets.append(
                    Bucket(int(key), cands, None if up is None else float(up), None if down is None else float(down))
                )
            else:
                buckets.append(Bucket(int(key), (int(e),)))
        return cls(tuple(buckets))


def kv_reserve_tokens(widest: int, running: int) -> int:
    """KV tokens SGLang holds back per decode step for `running` requests when the widest candidate
    is `widest` steps (topk 1: draft tokens = steps + 1; reserved twice, allocation_sizing.py)."""
    return 2 * (max(widest, 0) + 1) * max(running, 0)


# -- acceptance ------------------------------------------------------------------------------


def accepted_drafts(measured: Mapping[int, float], max_depth: int) -> dict[int, float]:
    """Expected accepted drafts per verify step E(c) for c = 0..max_depth, from the static depths'
    measured accept lengths (tokens per verify step, so E = accept length - 1).

    E(c) - E(c-1) is the chance that the first c drafts are all accepted, which cannot grow with c;
    between measured depths it is interpolated, beyond the deepest it falls on by the last measured
    ratio (capped at 1): the trend the measurement shows, not a constant acceptance.
    """
    pts = {int(k): max(0.0, float(v) - 1.0) for k, v in measured.items() if k > 0 and v and v > 0}
    out = {0: 0.0}
    if not pts:
        return out
    depths = sorted(pts)
    # the per-position survival P_c = E(c) - E(c-1), from the measured points (monotone, non-increasing)
    surv: dict[int, float] = {}
    prev_d, prev_e = 0, 0.0
    for d in depths:
        e = max(pts[d], prev_e)
        per = (e - prev_e) / (d - prev_d) if d > prev_d else 0.0
        for c in range(prev_d + 1, d + 1):
            surv[c] = min(1.0, per)
        prev_d, prev_e = d, e
    last = depths[-1]
    ratio = 1.0
    if last >= 2 and surv.get(last - 1):
        ratio = min(1.0, surv[last] / surv[last - 1])
    for c in range(last + 1, max_depth + 1):
        surv[c] = surv[c - 1] * ratio
    for c in range(1, max_depth + 1):
        surv[c] = min(surv[c], surv.get(c - 1, 1.0))
        out[c] = out[c - 1] + surv[c]
    return out


def infer_depth(accept_length: float | None, drafts: Mapping[int, float]) -> float | None:
    """The depth whose expected tokens per step (1 + E(c)) matches a measured accept length,
    interpolated between depths: what an adaptive server ran at a level, read from its own count."""
    if accept_length is None or accept_length <= 0 or len(drafts) < 2:
        return None
    target = accept_length - 1.0
    depths = sorted(drafts)
    for a, b in zip(depths, depths[1:], strict=False):
        ea, eb = drafts[a], drafts[b]
        if ea <= target <= eb:
            return a + (b - a) * ((target - ea) / (eb - ea) if eb > ea else 0.0)
    return float(depths[-1]) if target > drafts[depths[-1]] else 0.0


def settle(
    candidates: Sequence[int],
    drafts: Mapping[int, float],
    up: float = SLOT_UP_HYSTERESIS,
    down: float = SLOT_DOWN_HYSTERESIS,
    start: int | None = None,
    rounds: int = 32,
) -> int:
    """Where SGLang's EMA rule settles on a ladder when every verify step accepts the expected
    E(current depth) drafts (AdaptiveStepSlot._recompute_params, deterministic). A 0 step probes the
    next candidate; the slot starts at `start` when it is a candidate, else at the middle one."""
    cands = sorted(set(candidates))
    cur = start if start in cands else cands[len(cands) // 2]
    seen: list[int] = []
    for _ in range(rounds):
        idx = cands.index(cur)
        if cur == 0:
            nxt = cands[min(idx + 1, len(cands) - 1)]
        else:
            ema = drafts.get(cur, 0.0)
            i, old = idx, idx
            while i > 0:
                p = cands[i - 1]
                if ema <= (0.5 if p == 0 else p - 0.5) + down:
                    i -= 1
                else:
                    break
            if i == old:
                while i < len(cands) - 1 and ema > cands[i] - 0.5 + up:
                    i += 1
            nxt = cands[i]
        if nxt == cur:
            return cur
        if nxt in seen:  # it oscillates: the deeper of the two it alternates between is where it spends time first
            return max(cur, nxt)
        seen.append(cur)
        cur = nxt
    return cur


def centring_hysteresis(
    candidates: Sequence[int], target: int, drafts: Mapping[int, float]
) -> tuple[float | None, float | None]:
    """The (up, down) hysteresis that makes the ladder settle at `target` for a request of average
    acceptance; (None, None) where SGLang's defaults already do (hysteresis only where it changes
    the outcome). At the target c, staying needs E(c) <= c - 0.5 + up (no rise) and
    E(c) > p - 0.5 + down (no drop to the previous p); each is put half-way into its window, so
    requests easier or harder than average still move."""
    cands = sorted(set(candidates))
    if target not in cands or target == 0:
        return None, None
    if settle(cands, drafts, start=target) == target:
        return None, None
    e = drafts.get(target, 0.0)
    i = cands.index(target)
    up: float | None = None
    down: float | None = None
    if i + 1 < len(cands) and e > target - 0.5 + SLOT_UP_HYSTERESIS:
        # rises past the target: raise the bar to just above E(target), below what the next needs
        nxt = cands[i + 1]
        hi = drafts.get(nxt, e) - nxt + 0.5  # above this the next one would not rise either
        lo = e - target + 0.5
        up = lo + max(0.05, (hi - lo) / 2 if hi > lo else 0.05)
    if i > 0:
        p = cands[i - 1]
        floor = 0.5 if p == 0 else p - 0.5
        if e <= floor + SLOT_DOWN_HYSTERESIS:
            # drops below the target: lower the bar under E(target)
            down = e - floor - 0.25
    if up is None and down is None:
        return None, None
    got = settle(
        cands,
        drafts,
        SLOT_UP_HYSTERESIS if up is None else up,
        SLOT_DOWN_HYSTERESIS if down is None else down,
        start=target,
    )
    return (up, down) if got == target else (None, None)


# -- the evidence and the candidates ---------------------------------------------------------


@dataclass(frozen=True)
class LevelEvidence:
    """One concurrency level, as measured."""

    concurrency: int
    batch: float  # the running batch the server reported with the level's best static chain
    winner: int  # the level's best static chain depth (0: no speculation)
    tied: tuple[int, ...] = ()  # chain depths tied within noise with the winner
    default_depth: float | None = None  # the depth SGLang's default ran there (from its accept length)
    default_wins: bool = False  # the default beat the level's best static depth beyond noise


@dataclass
class Candidate:
    config: AdaptiveConfig
    why: str
    launch: int | None = None  # --speculative-num-steps to start with (`launch_depth`)


@dataclass
class Evidence:
    levels: list[LevelEvidence]
    drafts: dict[int, float]  # E(c), accepted drafts per verify step by depth
    max_depth: int  # the deepest candidate the server can start (see `depth_bound`)
    sizes: list[int] = field(default_factory=list)  # captured CUDA-graph batch sizes (bucket bounds)
    default_widest: int = 7
    deepest_static: int = 0  # the deepest static chain depth measured
    pools: dict[int, int] = field(default_factory=dict)  # static depth -> max_total_num_tokens it started with
    # static depth -> max_running_requests it started with (a hybrid model's state slots shrink with depth)
    running_caps: dict[int, int] = field(default_factory=dict)
    tokens_per_request: int = 0  # prompt + output tokens of one request of the workload
    swing: dict[int, float] = field(default_factory=dict)  # depth -> the EMA's swing at batch 1 (`ema_swing`)


def depth_bound(
    started: Sequence[int], kv_failed: Sequence[int], adaptive_widest_started: Sequence[int], limit: int
) -> int:
    """The deepest candidate to offer: two steps past the deepest depth any deployment started with
    (static, or an adaptive config's widest candidate), below any depth that failed for lack of KV
    memory, within the role's `sglang_server_spec_max_steps`."""
    known = max([0, *started, *adaptive_widest_started])
    bound = known + 2
    if kv_failed:
        bound = min(bound, min(kv_failed) - 1)
    return max(1, min(bound, limit))


def _targets(ev: Evidence) -> list[tuple[float, int, str]]:
    """Per level (by running batch): the depth its bucket should run, and `open` when that depth is
    only a lower bound (the default ran at its own ceiling there, so deeper was never tried)."""
    out = []
    for lv in sorted(ev.levels, key=lambda x: x.batch):
        t, tag = lv.winner, ""
        if lv.default_wins and lv.default_depth is not None and round(lv.default_depth) > lv.winner:
            t = min(ev.max_depth, int(round(lv.default_depth)))
            if lv.default_depth >= ev.default_widest - 0.5:
                tag = "open"
        elif lv.winner > 0 and lv.winner == ev.deepest_static and lv.batch < LADDER_BELOW_BATCH:
            tag = "open"  # the deepest static depth won: deeper was not measured
        out.append((lv.batch, t, tag))
    return out


def _group(points: Sequence[tuple[float, int, str]], sizes: Sequence[int]) -> list[tuple[int, int, float]]:
    """(bound, target depth, the smallest running batch in it): levels with equal targets merge,
    bounds on CUDA-graph sizes between neighbours with different targets."""
    groups: list[tuple[int, int, float]] = []
    for i, (batch, t, _) in enumerate(points):
        if not groups:
            groups.append((1, t, batch))
        elif groups[-1][1] != t:
            lo, hi = max(1, round(points[i - 1][0])), max(1, round(batch))
            if hi <= lo:
                continue  # the same running batch as the level before: one bucket, the first level's target
            groups.append((boundary(lo, hi, sizes), t, batch))
    return groups


def ema_swing(hist: Sequence[int] | None, alpha: float = SLOT_EMA_ALPHA) -> float | None:
    """How far SGLang's EMA of accepted drafts swings at batch 1 (its standard deviation), from a
    measured acceptance histogram (verify steps that accepted 0, 1, 2, ... drafts): the per-step
    spread, requests' differences included, times sqrt(alpha / (2 - alpha)) (an EMA of weight alpha)."""
    if not hist or sum(hist) <= 1:
        return None
    n = float(sum(hist))
    mean = sum(j * h for j, h in enumerate(hist)) / n
    var = max(0.0, sum(j * j * h for j, h in enumerate(hist)) / n - mean * mean)
    return math.sqrt(var) * math.sqrt(alpha / (2.0 - alpha))


def _ladder(target: int, max_depth: int, swing: float | None = None) -> tuple[int, ...]:
    """A small-batch ladder centred on the target: one rung below and one above, so a request
    easier or harder than average moves off the centre. The rungs are two steps apart where the
    measured acceptance spread swings the EMA across more than a rung's thresholds (2 x swing >= 1.5
    drafts) and for deep targets, one step apart otherwise."""
    step = 2 if target >= 4 or (swing is not None and 2.0 * swing >= 1.5) else 1
    rungs = {target, max(1, target - step), min(max_depth, target + step)}
    return tuple(sorted(r for r in rungs if r >= 0))


def centred_ladders(ev: Evidence) -> Candidate | None:
    """Each bucket centred on its target: a ladder at small batch (below LADDER_BELOW_BATCH), with
    hysteresis where SGLang's defaults would settle off the target; pinned at larger batch."""
    groups = _group(_targets(ev), ev.sizes)
    if not groups:
        return None
    buckets = []
    tags = {t: tag for _, t, tag in _targets(ev) if tag}
    for bound, t, batch in groups:
        if t > 0 and batch < LADDER_BELOW_BATCH:
            cands = _ladder(t, ev.max_depth, ev.swing.get(t))
            # an open-ended target lets SGLang's rule climb as acceptance allows; a measured one is centred
            up, down = (None, None) if tags.get(t) == "open" else centring_hysteresis(cands, t, ev.drafts)
            buckets.append(Bucket(bound, cands, up, down))
        else:
            buckets.append(Bucket(bound, (t,)))
    cfg = _merge(buckets)
    if cfg is None:
        return None
    return Candidate(
        cfg, "ladders centred on each level's best depth (the static winners; the default's depth where it won)"
    )


def reshaped_default(ev: Evidence) -> Candidate | None:
    """SGLang's default ladders where they won, with the bounds moved to where this machine's
    winners change, the deep end extended past the default's widest when it ran at its top, and
    the static winner pinned at the levels where the static depth beat the default."""
    pts = sorted(ev.levels, key=lambda x: x.batch)
    if not pts:
        return None
    lo_rungs = [1, 3, 5, 7]
    top = lo_rungs[-1]
    low = pts[0]
    if low.default_depth is not None and low.default_depth >= top - 0.5 and ev.max_depth > top:
        lo_rungs = [*lo_rungs[1:], min(ev.max_depth, top + 2)]  # it ran at its ceiling: one rung deeper
    lo_rungs = [r for r in lo_rungs if r <= ev.max_depth] or [1]
    points: list[tuple[float, int, str]] = []
    shape: dict[int, tuple[int, ...]] = {}
    for lv in pts:
        if lv.default_wins or lv.default_depth is None:
            key = -1 if lv.batch < LADDER_BELOW_BATCH else -2  # the default's own shape
        else:
            key = lv.winner
        points.append((lv.batch, key, ""))
    groups = _group(points, ev.sizes)
    buckets = []
    for bound, key, _ in groups:
        if key == -1:
            cands = tuple(lo_rungs)
        elif key == -2:
            cands = (0, 1, 3)
        else:
            cands = (key,)
        shape[bound] = cands
        buckets.append(Bucket(bound, cands))
    cfg = _merge(buckets)
    if cfg is None:
        return None
    return Candidate(
        cfg,
        "SGLang's default ladders, bounds where this machine's winners change, static winners pinned where they beat it",
    )


def pinned_schedule(ev: Evidence) -> Candidate | None:
    """One depth per bucket: each level's static winner (the phase's first schedule)."""
    pts = [(lv.batch, lv.winner, "") for lv in sorted(ev.levels, key=lambda x: x.batch)]
    cfg = _merge([Bucket(b, (t,)) for b, t, _ in _group(pts, ev.sizes)])
    if cfg is None:
        return None
    return Candidate(cfg, "each level's static winner pinned at the batch the server ran it")


def _merge(buckets: list[Bucket]) -> AdaptiveConfig | None:
    out: list[Bucket] = []
    for b in buckets:
        if (
            out
            and out[-1].candidates == b.candidates
            and out[-1].up_hysteresis == b.up_hysteresis
            and out[-1].down_hysteresis == b.down_hysteresis
        ):
            continue
        out.append(b)
    if not out or all(c == 0 for b in out for c in b.candidates):
        return None
    if len(out) == 1 and len(out[0].candidates) == 1:
        return None  # one pinned depth everywhere: that is a static depth
    return AdaptiveConfig(tuple(out))


def pool_at(ev: Evidence, depth: int) -> float | None:
    """The KV pool a server launched at `depth` gets: measured where a static depth started there,
    else the least-squares line through the measured pools (SGLang 0.5.23 sizes the pool for the
    launch depth: plugins/module_utils/sglang_adaptive.py `launch_steps`, docs/emulator.md "Memory:
    what a deep candidate costs"). None with fewer than two measured depths."""
    return _on_line(ev.pools, depth)


def running_cap_at(ev: Evidence, depth: int) -> float | None:
    """The running-request limit a server launched at `depth` gets, read the same way as its pool:
    measured at a static depth, else on the line through the measured ones (a hybrid model's
    state slots are sized for the launch depth too, and shrink with it)."""
    return _on_line(ev.running_caps, depth)


def _on_line(measured: Mapping[int, int], depth: int) -> float | None:
    if depth in measured:
        return float(measured[depth])
    pts = sorted(measured.items())
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(k for k, _ in pts) / n
    my = sum(v for _, v in pts) / n
    sxx = sum((k - mx) ** 2 for k, _ in pts)
    slope = sum((k - mx) * (v - my) for k, v in pts) / sxx if sxx else 0.0
    return my + slope * (depth - mx)


def launch_depth(cfg: AdaptiveConfig, ev: Evidence, role_rule: Any) -> int:
    """The depth to launch a ladder config at (SGLang 0.5.23 sizes the KV pool and a hybrid model's
    state slots for it, and requires a candidate): the role's rule (the high-load bucket's middle
    candidate, else the smallest positive step) where a server there starts (its pool, measured or
    on the line through the measured ones, holds a request), its pool holds the high-load batch
    (`kv_shortfall`) and its running-request limit admits it (`running_shortfall`); else the
    deepest candidate that does all three; else, of those whose pool holds, the rule or the
    deepest; else the deepest that starts at all. SGLang's own default does the same: it launches
    at 3 and reaches 7 as a candidate."""
    rule = int(role_rule(cfg.to_sglang()))
    need = max(ev.tokens_per_request, 1)

    def startable(d: int) -> bool:
        pool = pool_at(ev, d)
        return pool is None or pool >= need

    positive = sorted({c for b in cfg.buckets for c in b.candidates if c > 0}, reverse=True)
    order = [rule, *(d for d in positive if d != rule)]
    holds = [d for d in order if startable(d) and kv_shortfall(cfg, ev, d) is None]
    admits = [d for d in holds if running_shortfall(ev, d) is None]
    if admits:
        return admits[0]
    if holds:
        return holds[0]
    return next((d for d in order if startable(d)), positive[-1])


def _high_load_batch(ev: Evidence) -> float:
    return max((lv.batch for lv in ev.levels), default=0.0)


def kv_shortfall(cfg: AdaptiveConfig, ev: Evidence, launch: int) -> str | None:
    """Why the widest candidate's KV reserve, charged at every bucket, would cost the high-load
    levels running requests: the pool the launch depth gets (`ev.pools`, measured static pools),
    less 2 x (widest + 1) tokens per running request, must still hold the running batch the level's
    static winner reached with `ev.tokens_per_request` tokens each. None when it does (or when the
    pools are not known)."""
    est = pool_at(ev, launch)
    if est is None or not ev.tokens_per_request:
        return None
    pool = max(0, int(est))
    per_req = ev.tokens_per_request + 2 * (cfg.widest + 1)
    holds = pool // per_req
    need = _high_load_batch(ev)
    if holds < need:
        return (
            f"its KV pool at launch depth {launch} ({pool} tokens, measured or on the line through the measured pools) holds {holds} requests of {ev.tokens_per_request} "
            f"tokens plus the widest candidate's reserve ({2 * (cfg.widest + 1)} tokens each), below the running "
            f"batch of {need:g} the static winners reached"
        )
    return None


def running_shortfall(ev: Evidence, launch: int) -> str | None:
    """Why a server launched at `launch` would admit fewer requests than the high-load levels' static
    winners ran at once: its running-request limit (`ev.running_caps`, measured at the static depths,
    on the line through them elsewhere; a hybrid model's state slots are sized for the launch depth).
    Used to choose among launch depths, not to set a config aside: every speculative server admits
    fewer than a no-speculation winner may have run, and what that costs is measured."""
    cap = running_cap_at(ev, launch)
    need = _high_load_batch(ev)
    if cap is not None and math.floor(cap + 1e-9) < need:
        return (
            f"a server launched at depth {launch} runs at most {max(0, math.floor(cap + 1e-9))} requests "
            f"(max_running_requests, measured or on the line through the static depths'), below the running "
            f"batch of {need:g} the static winners reached"
        )
    return None


def generate(
    ev: Evidence, room: int, exclude: Sequence[str] = (), launch_steps: Any = None
) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """Up to `room` distinct adaptive configs to deploy, best bet first (the centred ladders, the
    reshaped default, the pinned schedule), none equal to one in `exclude` (SGLang JSON texts);
    and the ones set aside for their KV cost (`kv_shortfall`, with `launch_steps(config JSON)` the
    role's launch depth)."""
    out: list[Candidate] = []
    dropped: list[tuple[Candidate, str]] = []
    seen = set(exclude)
    for make in (centred_ladders, reshaped_default, pinned_schedule):
        if len(out) >= room:
            break
        try:
            c = make(ev)
        except ValueError:  # evidence that yields no valid config (say, no bucket drafts): nothing to try
            c = None
        if c is None:
            continue
        text = c.config.to_json_text()
        if text in seen:
            continue
        seen.add(text)
        if launch_steps is not None:
            c.launch = launch_depth(c.config, ev, launch_steps)
            why = kv_shortfall(c.config, ev, c.launch)
            if why:
                dropped.append((c, why))
                continue
        out.append(c)
    return out, dropped
