"""The scheduler in virtual time: what the emulator predicts for a benchmark, without waiting.

`closed_loop` replays the seed's benchmark procedure (docs/reference/seed-campaign.md: closed-loop concurrency
C, a fixed number of requests, fixed output length, ignore_eos) through the same `Scheduler` the
server runs, on a simulated clock: the calibration fit, its kept table and the speed benchmark's
"predicted" column all come from here.
"""

from __future__ import annotations

import heapq
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from sglang_utils import sglang_adaptive as adaptive_schema

from . import adaptive, model, multinode, tokens, workload
from .engine import EngineSpec, Scheduler
from .noise import Noise
from .profile import Profile
from .request import Request


@dataclass(frozen=True)
class SpecSetting:
    """A speculation setting as the server would resolve it (k = 0: off).

    `adaptive`: SGLang's per-batch-size adaptive config (the JSON document, or {} for SGLang's
    default) run as 0.5.23 runs it; `k` is then the initial steps, which size the pools (None: the
    middle of the candidates' union, as SGLang picks it); `graph_bs` is --cuda-graph-bs-decode.
    """

    k: int | None
    topk: int = 1
    verify_tokens: int | None = None  # default k + 1
    mrr_flag: int | None = None  # --max-running-requests, or 48 when spec is on and the flag is absent
    mem_fraction_static: float | None = None
    adaptive: dict[str, Any] | None = None
    graph_bs: tuple[int, ...] | None = None
    # the server's --tp-size and --nnodes (None: the profile's own TP size, where its numbers need no
    # rescaling): the emulator process applies them to the profile before it builds the scheduler
    # (__main__.py), and so does `server_profile` here, with the same function
    tp_size: int | None = None
    nnodes: int = 1


def server_profile(profile: Profile, s: SpecSetting) -> Profile:
    """The profile as a server of this setting's TP size and node count sees it: capacity and step
    cost by multinode.adjust_profile, the very function the live emulator applies (__main__.py),
    so a profile measured at another TP size predicts what that server serves."""
    return multinode.adjust_profile(profile, s.tp_size or profile.tp_size or 1, s.nnodes)


def engine_spec(profile: Profile, s: SpecSetting, decode_log_interval: int = 40) -> EngineSpec:
    """Resolve capacity for this setting as the server does at start-up (the profile as that server
    sees it: `server_profile`)."""
    profile = server_profile(profile, s)
    policy = None
    k = s.k or 0
    k_max = None
    if s.adaptive is not None:
        cfg, entries = adaptive_schema.load_per_bs(s.adaptive or None)
        union = adaptive_schema.union_candidate_steps(entries)
        k = adaptive_schema.default_launch_steps(entries) if s.k is None else s.k
        if k not in union:
            raise ValueError(f"--speculative-num-steps={k} is not in the adaptive config candidate_steps {union}.")
        policy = adaptive.PerBsPolicy(k, cfg, entries, list(s.graph_bs) if s.graph_bs else None)
        k_max = max(union)
    spec_on = k > 0 or policy is not None
    mrr_flag = s.mrr_flag
    if spec_on and mrr_flag is None:
        mrr_flag = 48  # SGLang 0.5.x default with speculation (docs/reference/sglang.md §2.4)
    cap = model.capacity(profile, k, mrr_flag, s.mem_fraction_static)
    if cap.max_total_num_tokens <= 0:
        raise ValueError(f"k={k}: KV pool is {cap.max_total_num_tokens} tokens; the server cannot start")
    if cap.max_running_requests < 1:
        # the server dies here (runner.py: SGLang's scheduler asserts a pool of at least one)
        raise ValueError(f"k={k}: max_running_request is zero; the server cannot start")
    # the decode graphs as the server captures them (runner.py): a given list as it is, its largest
    # size the max; else the profile's list cut at the profile's max batch size
    if s.graph_bs:
        listed: tuple[int, ...] | None = tuple(sorted(s.graph_bs))
        graph_max = max(s.graph_bs)
    else:
        listed = model.listed_up_to(profile.cuda_graph_bs, profile.cuda_graph_max_bs)
        graph_max = profile.cuda_graph_max_bs
    return EngineSpec(
        k=k,
        topk=s.topk,
        verify_tokens=(s.verify_tokens if s.verify_tokens is not None else k + 1) if spec_on else 1,
        max_running_requests=cap.max_running_requests,
        max_total_num_tokens=cap.max_total_num_tokens,
        chunked_prefill_size=profile.chunked_prefill_size,
        max_prefill_tokens=profile.max_prefill_tokens,
        decode_log_interval=decode_log_interval,
        context_len=profile.context_len,
        state_slot_cap=cap.state_slot_cap,
        hybrid=profile.hybrid_mamba,
        cuda_graph_bs=model.capture_sizes(listed, cap.max_running_requests),
        spec=spec_on,
        policy=policy,
        k_max=k_max,
        cuda_graph_max_bs=min(graph_max, cap.max_running_requests),
    )


@dataclass
class RequestRecord:
    submitted: float
    first_token: float
    finished: float
    output_tokens: int
    verify_ct: int


@dataclass
class LevelResult:
    """One concurrency level, with the seed's metric definitions.

    aggregate_tok_s: total output tokens / wall time of the level.
    per_request_tok_s: mean over requests of (output_tokens - 1) / (e2e - ttft), i.e. the decode
    rate, excluding queue wait and time to first token (docs/reference/seed-campaign.md; see the calibration
    notes for why the seed's column must be this).
    """

    concurrency: int
    requests: int
    wall_s: float
    output_tokens: int
    aggregate_tok_s: float
    per_request_tok_s: float
    ttft_s_p50: float
    accept_length: float
    max_running_requests: int
    max_total_num_tokens: int
    end: float = 0.0  # virtual time the level's last request finished (continue the next level here)
    records: list[RequestRecord] = field(default_factory=list, repr=False)


def closed_loop(
    profile: Profile,
    setting: SpecSetting,
    *,
    concurrency: int,
    n_requests: int,
    input_len: int,
    output_len: int,
    temperature: float = 0.0,
    seed: int = 0,
    client_gap_s: float = 0.0,
    keep_records: bool = False,
    alpha: float | None = None,
    noise: Noise | None = None,
    start: float = 0.0,
    scheduler: Scheduler | None = None,
) -> LevelResult:
    """C clients, each sending its next request when the last one ends, until n_requests are done.

    `alpha` overrides the profile's alpha at `temperature` (e.g. workload.request_alpha for a
    prompt kind); `scheduler` continues an earlier level on the same server (its adaptive state,
    noise and counters), starting at virtual time `start`.
    """
    profile = server_profile(profile, setting)
    sched = scheduler or Scheduler(profile, engine_spec(profile, setting), random.Random(seed), noise=noise)
    spec = sched.spec
    # a profile with acceptance by position or per-prompt spread: each request its own acceptance,
    # as the server gives it (workload.request_acceptance; request i stands for a distinct prompt)
    per_request = alpha is None and (profile.alpha_by_position is not None or bool(profile.alpha_spread))
    if alpha is None:
        alpha = profile.alpha_at(temperature)
    alpha = model.effective_alpha(alpha, setting.topk)
    t = start
    submits: list[tuple[float, int]] = []  # (time, seq)
    seq = 0
    sent = 0
    for _ in range(min(concurrency, n_requests)):
        heapq.heappush(submits, (start, seq))
        seq += 1
    records: list[RequestRecord] = []
    finished: list[Request] = []

    def on_done(r: Request) -> None:
        if r.finished:
            finished.append(r)

    batch = None
    batch_end = 0.0
    while len(records) < n_requests:
        while submits and submits[0][0] <= t + 1e-12:
            heapq.heappop(submits)
            if per_request:
                acc = workload.request_acceptance(
                    profile,
                    temperature,
                    topk=setting.topk,
                    positions=max(1, sched.k_max),
                    prompt_h=tokens.ids_hash([seed, sent]),
                )
                if isinstance(acc, tuple):
                    req = Request(f"r{sent}", input_len, output_len, alpha=acc[0], notify=on_done, acceptance=acc)
                else:
                    req = Request(f"r{sent}", input_len, output_len, alpha=acc, notify=on_done)
            else:
                req = Request(f"r{sent}", input_len, output_len, alpha=alpha, notify=on_done)
            sched.submit(req, t)
            sent += 1
        if batch is None:
            batch = sched.next_batch(t)
            if batch is not None:
                batch_end = t + batch.duration
        candidates = []
        if batch is not None:
            candidates.append(batch_end)
        if submits:
            candidates.append(submits[0][0])
        if batch is None:
            nxt = sched.next_event_time()
            if nxt is not None and nxt > t:
                candidates.append(nxt)
        if not candidates:
            raise RuntimeError("simulation stalled: nothing to run and nothing to wait for")
        t = min(candidates)
        if batch is not None and t >= batch_end - 1e-12:
            t = batch_end
            sched.finish_batch(batch, t)
            batch = None
            for r in finished:
                records.append(RequestRecord(r.arrival, r.first_token_at, r.finished_at, r.generated, r.verify_ct))
                if sent + len(submits) < n_requests:
                    heapq.heappush(submits, (t + client_gap_s, seq))
                    seq += 1
            finished.clear()
    end = max(r.finished for r in records)
    wall = end - start
    out_tokens = sum(r.output_tokens for r in records)
    rates = [
        (r.output_tokens - 1) / (r.finished - r.first_token)
        for r in records
        if r.output_tokens > 1 and r.finished > r.first_token
    ]
    verify = sum(r.verify_ct for r in records)
    decoded = sum(r.output_tokens - 1 for r in records)
    return LevelResult(
        concurrency=concurrency,
        requests=len(records),
        wall_s=wall,
        output_tokens=out_tokens,
        aggregate_tok_s=out_tokens / wall if wall > 0 else 0.0,
        per_request_tok_s=statistics.fmean(rates) if rates else 0.0,
        ttft_s_p50=statistics.median(r.first_token - r.submitted for r in records),
        accept_length=(decoded / verify) if verify else 1.0,
        max_running_requests=spec.max_running_requests,
        max_total_num_tokens=spec.max_total_num_tokens,
        end=end,
        records=records if keep_records else [],
    )


def seed_procedure(
    profile: Profile,
    setting: SpecSetting,
    *,
    levels: tuple[int, ...] = (1, 4, 16, 32, 64),
    input_len: int = 1000,
    output_len: int = 1000,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict[int, LevelResult]:
    """The seed's benchmark: each level with max(4, 2*C) requests (docs/reference/seed-campaign.md)."""
    return {
        c: closed_loop(
            profile,
            setting,
            concurrency=c,
            n_requests=max(4, 2 * c),
            input_len=input_len,
            output_len=output_len,
            temperature=temperature,
            seed=seed + c,
        )
        for c in levels
    }
