"""The batch scheduler: an SGLang-like loop that decides what the emulated GPU does next.

The core (`Scheduler`) never reads a clock and never sleeps: callers pass the time in and run a
batch for `batch.duration` seconds, on whatever clock they keep. `RealtimeDriver` (realtime.py) runs it on
the asyncio loop's clock for the HTTP server; `simulate.py` runs the very same code in virtual time for
predictions and the calibration fit, so both follow one model.

One iteration, as SGLang's event loop does it (docs/reference/sglang.md §1.4; docs/reference/performance-model.md):
admit waiting requests (FIFO) while running < max_running_requests, the KV pool has room for
input + max output and the prefill budgets last (prefill.py: --max-prefill-tokens, and
--chunked-prefill-size, which cuts a long input into chunks, one prefill batch each, back to back);
if any were admitted, run one prefill batch (a request's last chunk yields its first token);
otherwise run one decode/verify step of all running requests, in which each request accepts a
random number of tokens (truncated geometric, mean tau(k)) that go out as one chunk.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from . import adaptive, logs, model
from .noise import Noise
from .prefill import PrefillBudget
from .profile import Profile
from .request import Request

PREFILL = 0
DECODE = 1


@dataclass
class Batch:
    kind: int
    reqs: list[Request]
    duration: float  # seconds
    new_tokens: int = 0  # prefill: input tokens in the batch
    chunks: list[int] | None = None  # prefill: each request's tokens in it (all its input or a chunk)
    # prefill: what SGLang's PrefillStats records when it forms the batch, for the line logged at its end
    running: int = 0  # requests running then (`#running-req`)
    pending: int = 0  # 0.5.11+ `#pending-token`
    # `#queue-req` and the num_queue_reqs gauge of the stats logged at the batch's end: the requests
    # in the scheduler's queue once this batch was formed (Scheduler.queued; decode: only for the step
    # that closes a decode-log window)
    queue: int = 0

    def streamed_output(self) -> bool:
        """Whether the batch, once finished, sent the detokenizer anything: a decode batch always; a
        prefill batch only if a request in it finished its prefill, since a chunk before the last
        streams nothing (scheduler_output_processor_mixin.py `process_batch_result_prefill` passes a
        request still `is_chunked` to `stream_output` as its `skip_stream_req`). /health waits for such an output (http_server.py
        `health_generate`), so a long chunked prefill holds it until its last chunk."""
        return self.kind != PREFILL or any(r.prefilled >= r.input_tokens for r in self.reqs)


@dataclass
class EngineSpec:
    """What the scheduler needs from the resolved server arguments."""

    k: int  # speculative steps; 0 = no speculation (the initial steps under adaptive speculation)
    topk: int
    verify_tokens: int  # num_draft_tokens (k + 1 for a chain)
    max_running_requests: int
    max_total_num_tokens: int
    chunked_prefill_size: int
    decode_log_interval: int
    context_len: int
    max_prefill_tokens: int = 16384  # ServerArgs.max_prefill_tokens's default (0.5.9 server_args.py:330)
    prefill_input_cap_chunked: bool = True  # versions.SGLangVersion.prefill_input_cap_chunked
    prefill_line: str = "pending-graph-throughput"  # versions.SGLangVersion.prefill_line
    state_slot_cap: int = 0
    hybrid: bool = False
    spec: bool | None = None  # speculation on (default: k > 0); adaptive buckets may run 0 steps
    policy: adaptive.Policy | None = None  # None for a static depth
    k_max: int | None = None  # the widest depth this server may run (adaptive: the widest candidate)
    accept_rate: str = "drafts-only"  # versions.SGLangVersion.accept_rate
    input_throughput: str = "this-batch"  # versions.SGLangVersion.input_throughput
    cuda_graph_max_bs: int = 0  # decode batches up to this size replay a CUDA graph (0 = graphs off)
    # captured decode batch sizes: a step costs the smallest one >= its batch (None: no padding)
    cuda_graph_bs: tuple[int, ...] | None = None
    # with --disable-cuda-graph-padding, the captured sizes: only a batch of one of them replays a graph
    cuda_graph_exact: tuple[int, ...] | None = None

    def replays_graph(self, bs: int) -> bool:
        """Whether a decode batch of `bs` runs as a CUDA graph: SGLang's `can_run` (cuda_graph_runner.py)
        takes a batch up to the largest captured size with padding, only a captured size without."""
        if not 0 < bs <= self.cuda_graph_max_bs:
            return False
        if self.cuda_graph_exact is not None:
            return bs in self.cuda_graph_exact
        return self.cuda_graph_bs is None or bs <= self.cuda_graph_bs[-1]

    @property
    def speculative(self) -> bool:
        return self.k > 0 if self.spec is None else self.spec


def _reason(r: Request) -> str:
    """OpenAI/SGLang finish reason: "stop" when the model's own EOS came before max tokens."""
    if r.stop_at is not None and r.stop_at < r.max_new_tokens and r.generated >= r.stop_at:
        return "stop"
    return "length"


class Scheduler:
    """Admission, prefill and decode/verify steps, and the counters SGLang reports."""

    def __init__(
        self,
        profile: Profile,
        spec: EngineSpec,
        rng: random.Random,
        log: Callable[[str], None] | None = None,
        noise: Noise | None = None,
        stats_since: float | None = None,
    ) -> None:
        """`stats_since`: when SGLang's scheduler started its prefill-stats clock
        (`last_prefill_stats_tic`, versions.SGLangVersion.stats_clock), on the caller's clock; the
        first `Prefill batch` line's `input throughput` divides by the time since then (None: that
        line logs 0.00, for callers without a start-up, such as simulate.py)."""
        self.p = profile
        self.spec = spec
        self.speculative = spec.speculative
        self.k = spec.k  # the depth in use now (changes under adaptive speculation)
        self.k_max = max(spec.k, spec.k_max or 0)
        self.policy = spec.policy
        self.rng = rng
        self.log = log
        self.noise = noise
        # accept-collapse=N (faults.py): once N requests were served every draft is rejected
        self.collapse_after: int | None = None
        # the requests the server served, for that count: this scheduler's, or all DP replicas' (dp.py)
        self.served: Callable[[], int] = lambda: self.num_requests_total
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.kv_reserved = 0
        self.kv_live = 0  # tokens actually held (inputs + outputs so far), for "token usage"
        self.chunked: Request | None = None  # the request cut in the last prefill batch (SGLang's chunked_req)
        # counters (/metrics; docs/reference/sglang.md §3.1, §3.2)
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        # the same two counters split by streamed (1) / not streamed (0) requests
        self.prompt_tokens_by_stream = [0, 0]
        self.generation_tokens_by_stream = [0, 0]
        self.num_requests_total = 0
        self.num_requests_by_stream = [0, 0]
        self.spec_verify_calls_total = 0
        self.cuda_graph_passes = {"decode_cuda_graph": 0, "decode_none": 0}
        self.realtime_tokens = {"prefill_compute": 0, "decode": 0}
        self.steps_histogram: dict[int, int] = {}  # depth -> decode steps run at it
        self.step_switches = 0
        self.spec_total_accepted = 0  # folded in at each decode-log interval, like SGLang
        self.spec_total_forward = 0
        self.last_spec_accept_length = 0.0
        self.last_spec_accept_rate = 0.0
        self.last_gen_throughput = 0.0
        self.forward_ct_decode = 0
        self.last_output_time = -1.0
        self.busy_time = 0.0
        # The scheduler's gauges as /metrics serves them: set when SGLang logs its stats (each
        # prefill batch and every decode_log_interval decode steps), not live.
        self.gauges: dict[str, float] = {
            "num_running_reqs": 0,
            "num_queue_reqs": 0,
            "num_used_tokens": 0,
            "token_usage": 0.0,
            "mamba_usage": 0.0,
            "gen_throughput": 0.0,
            "spec_accept_length": 0.0,
            "spec_accept_rate": 0.0,
            "spec_num_steps": float(self.k),
            "spec_num_draft_tokens": float(spec.verify_tokens if self.speculative else 0),
        }
        # current decode-log window
        self._win_passes = 0
        self._win_accepted = 0
        self._win_tokens = 0
        self._win_start = None  # type: float | None
        self._last_prefill_tokens = 0
        self._prefill_log_t = stats_since

    # ---- requests in ----------------------------------------------------------------------------
    def submit(self, req: Request, now: float) -> None:
        req.arrival = now
        req.ready_at = now + self.p.t_request_overhead_ms / 1000.0
        clip = min(req.max_new_tokens, self.p.clip_max_new_tokens)
        req.kv_need = req.input_tokens + clip
        self.waiting.append(req)

    def abort(self, req: Request) -> None:
        """Client went away: a queued request leaves the queue now, a running one at the step's end."""
        if req.finished:
            return
        req.aborted = True
        if req.admitted_at < 0:
            try:
                self.waiting.remove(req)
            except ValueError:
                return
            self._finish_aborted(req, req.arrival)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def idle(self) -> bool:
        return not self.running and not self.waiting and self.chunked is None

    def next_event_time(self) -> float | None:
        """When a waiting request becomes admissible (its pre-admission overhead has passed); None
        while no request can be admitted at all (a pool of no requests: the driver must not spin)."""
        if self.spec.max_running_requests < 1:
            return None
        for r in self.waiting:
            if not r.aborted:
                return r.ready_at
        return None

    # ---- choose the next batch -----------------------------------------------------------------
    def next_batch(self, now: float) -> Batch | None:
        waiting = self.waiting
        running = self.running
        spec = self.spec
        if self.chunked is not None or (waiting and len(running) < spec.max_running_requests):
            budget = PrefillBudget.start(
                spec.max_prefill_tokens, spec.chunked_prefill_size, spec.prefill_input_cap_chunked
            )
            new: list[Request] = []
            chunks: list[int] = []
            cut = self.chunked
            self.chunked = None
            if cut is not None:
                if cut.aborted:
                    self._release(cut, now, "abort")
                else:
                    # SGLang runs the next chunk first, whatever else waits (scheduler.py add_chunked_req)
                    n = budget.continue_chunked(cut.input_tokens - cut.prefilled)
                    new.append(cut)
                    chunks.append(n)
                    if cut.prefilled + n < cut.input_tokens:
                        self.chunked = cut
            while waiting and budget.is_open():
                r = waiting[0]
                if r.aborted:
                    waiting.popleft()
                    self._finish_aborted(r, now)
                    continue
                if r.ready_at > now + 1e-9:
                    break
                if len(running) + len(new) >= spec.max_running_requests:
                    break
                if self.kv_reserved + r.kv_need > spec.max_total_num_tokens:
                    if not running and not new:
                        # can never fit: SGLang would reject it; emulate by truncating the reservation
                        r.kv_need = max(0, spec.max_total_num_tokens - self.kv_reserved)
                    else:
                        break
                take = budget.admit(r.input_tokens, bool(new))
                if take is None:
                    break
                waiting.popleft()
                new.append(r)
                chunks.append(take)
                self.kv_reserved += r.kv_need
                r.admitted_at = now
                if take < r.input_tokens:
                    self.chunked = r
            if new:
                tokens = sum(chunks)
                ms = model.prefill_time_ms(self.p, tokens, self.spec.chunked_prefill_size)
                pending = self._pending_tokens(chunks)
                batch = Batch(PREFILL, new, self._noisy(ms, now) / 1000.0, tokens, chunks, len(running), pending)
                batch.queue = self.queued(now)
                return batch
        if running:
            if self.policy is not None:
                self._activate(self.policy.steps_for_batch(len(running)))
            k = self.k
            verify = (k + 1 if self.policy is not None else spec.verify_tokens) if self.speculative else None
            table = self.p.step_table
            kv = None
            if table is not None and table.kv_read_ns_per_token is not None:
                kv = sum(r.input_tokens + r.generated for r in running)
            ms = model.step_time_ms(
                self.p,
                len(running),
                k,
                verify,
                spec=self.speculative,
                graph_bs=spec.cuda_graph_bs,
                graph_max_bs=spec.cuda_graph_max_bs,
                kv_tokens=kv,
                topk=spec.topk,
            )
            batch = Batch(DECODE, running, self._noisy(ms, now) / 1000.0)
            if (self.forward_ct_decode + 1) % max(1, spec.decode_log_interval) == 0:
                batch.queue = self.queued(now)  # this step closes a decode-log window (_close_window)
            return batch
        return None

    def queued(self, now: float) -> int:
        """`len(self.waiting_queue)` as SGLang's stats read it: in process_batch_result, after the
        forward, before the loop's next recv_requests (event_loop_normal: recv, form, run, process
        the result), so the queue as the batch's formation left it: a request that arrived during
        the forward is not in it yet, nor one still in the tokenizer (`ready_at`, the waiting
        requests' tail: each is submitted with the same overhead). 0.5.9
        managers/scheduler_metrics_mixin.py log_prefill_stats / log_decode_stats, 0.5.11/0.5.12
        observability/scheduler_metrics_mixin.py report_prefill_stats / report_decode_stats, 0.5.23
        scheduler_components/metrics_reporter.py: `#queue-req: {len(self.waiting_queue)}` and
        `num_queue_reqs` in the same call."""
        waiting = self.waiting
        n = len(waiting)
        while n and waiting[n - 1].ready_at > now + 1e-9:
            n -= 1
        return n

    def _noisy(self, ms: float, start: float) -> float:
        return ms * self.noise.factor(start) if self.noise is not None else ms

    def _activate(self, steps: int) -> None:
        """Run `steps` from now on (adaptive speculation): SGLang's runtime-state switch."""
        if steps == self.k:
            return
        if self.log is not None:
            self.log(adaptive.switch_line(self.k, steps))
        self.k = steps
        self.step_switches += 1

    # ---- apply a batch's effects at its end time -------------------------------------------------
    def finish_batch(self, batch: Batch, t: float) -> None:
        self.busy_time += batch.duration
        self.last_output_time = t
        if self.noise is not None:
            self.noise.ended(t)
        if batch.kind == PREFILL:
            self._finish_prefill(batch, t)
        else:
            self._finish_decode(batch, t)

    def _finish_prefill(self, batch: Batch, t: float) -> None:
        running = self.running
        computed = 0
        chunks = batch.chunks or [r.input_tokens for r in batch.reqs]
        for r, n in zip(batch.reqs, chunks, strict=True):
            computed += n
            r.prefilled += n
            self.kv_live += n
            if r.prefilled < r.input_tokens:
                continue  # a chunk before the last: no token yet (an abort ends it at the next batch)
            if not r.internal:
                self.prompt_tokens_total += r.input_tokens
                self.prompt_tokens_by_stream[r.stream] += r.input_tokens
            if r.aborted:
                self._release(r, t, "abort")
                continue
            r.first_token_at = t
            r.generated = 1
            self.kv_live += 1
            if not r.internal:
                self.generation_tokens_total += 1
                self.generation_tokens_by_stream[r.stream] += 1
            if self.speculative:
                r.hist = [0] * (self.k_max + 1)
            if r.limit <= 1:
                self._release(r, t, _reason(r))
            else:
                running.append(r)
            if r.notify is not None:
                r.notify(r)
        self.realtime_tokens["prefill_compute"] += computed
        self._log_prefill(batch, t)

    def _finish_decode(self, batch: Batch, t: float) -> None:
        k = self.k
        reqs = batch.reqs
        bs = len(reqs)
        ended: list[Request] | None = None
        emitted = emitted_stream = 0
        self.steps_histogram[k] = self.steps_histogram.get(k, 0) + 1
        graph = self.spec.replays_graph(bs)
        self.cuda_graph_passes["decode_cuda_graph" if graph else "decode_none"] += 1
        if self.speculative:
            rnd = self.rng.random
            log = math.log
            # a tree of N draft tokens (the root among them) accepts at most N tokens a pass,
            # whatever its depth: a path of N - 1 drafts and the target's bonus token
            kp1 = min(k + 1, self.draft_tokens_now)
            accepted = 0
            correct: list[int] | None = [] if self.policy is not None else None
            collapsed = self.collapse_after is not None and self.served() >= self.collapse_after
            for r in reqs:
                if r.aborted:
                    if ended is None:
                        ended = []
                    ended.append(r)
                    continue
                if k and not collapsed:
                    surv = r.survival
                    if surv is None:
                        x = 1.0 - rnd()  # in (0, 1]
                        a = 1 + int(log(x) * r.ila)
                        if a > kp1:
                            a = kp1
                    else:
                        # P(a > j) = surv[j-1]: one uniform, inverse CDF over the positions
                        u = rnd()
                        a = 1
                        while a < kp1 and u < surv[a - 1]:
                            a += 1
                else:
                    # a bucket at 0 steps verifies the target's own token only; a collapsed
                    # drafter (accept-collapse) proposes drafts the target rejects, all of them
                    a = 1
                left = r.limit - r.generated
                # the step that finishes a request counts the tokens up to its last one only
                # (SGLang's verify cuts the accepted path at the finishing token and recounts the
                # accept length: eagle_info.py `accept_index[i, j + 1 :] = -1`)
                n = a if a < left else left
                accepted += n
                if correct is not None:
                    correct.append(n - 1)
                r.verify_ct += 1
                r.accepted_drafts += n - 1
                r.hist[n - 1] += 1
                r.generated += n
                emitted += n
                if r.stream:
                    emitted_stream += n
                if n == left:
                    if ended is None:
                        ended = []
                    ended.append(r)
                elif r.notify is not None:
                    r.notify(r)
            self._win_passes += bs
            self._win_accepted += accepted
            self.spec_verify_calls_total += bs
            if correct is not None and self.policy is not None:
                # SGLang feeds the per-request correct-draft counts to the bucket of this batch
                # size after verify (batch_result_processor.py on_verify_complete_cpu).
                new_steps = self.policy.on_verify_complete(correct, bs)
                if new_steps is not None:
                    self._activate(new_steps)
        else:
            for r in reqs:
                if r.aborted:
                    if ended is None:
                        ended = []
                    ended.append(r)
                    continue
                r.generated += 1
                emitted += 1
                if r.stream:
                    emitted_stream += 1
                if r.generated >= r.limit:
                    if ended is None:
                        ended = []
                    ended.append(r)
                elif r.notify is not None:
                    r.notify(r)
        self.kv_live += emitted
        self.generation_tokens_total += emitted
        self.generation_tokens_by_stream[1] += emitted_stream
        self.generation_tokens_by_stream[0] += emitted - emitted_stream
        self.realtime_tokens["decode"] += emitted
        self._win_tokens += emitted
        if ended:
            for r in ended:
                self._release(r, t, "abort" if r.aborted else _reason(r))
                if r.notify is not None and not r.aborted:
                    r.notify(r)
            self.running = [r for r in reqs if not r.finished]
        self.forward_ct_decode += 1
        if self._win_start is None:
            self._win_start = t - batch.duration
        if self.forward_ct_decode % max(1, self.spec.decode_log_interval) == 0:
            self._close_window(t, bs, graph, batch.queue)

    def _release(self, r: Request, t: float, reason: str) -> None:
        r.finished = True
        r.finish_reason = reason
        r.finished_at = t
        self.kv_reserved -= r.kv_need
        self.kv_live -= r.prefilled + r.generated
        if not r.internal and reason != "abort":
            self.num_requests_total += 1
            self.num_requests_by_stream[r.stream] += 1

    def _finish_aborted(self, r: Request, t: float) -> None:
        r.finished = True
        r.finish_reason = "abort"
        r.finished_at = t

    # ---- the periodic decode log line and the counters behind /server_info ---------------------
    @property
    def draft_tokens_now(self) -> int:
        """speculative_num_draft_tokens in force (k + 1 under adaptive speculation)."""
        if not self.speculative:
            return 0
        return self.k + 1 if self.policy is not None else self.spec.verify_tokens

    def _close_window(self, t: float, batch_size: int, graph: bool, queue: int) -> None:
        """SGLang's decode stats every --decode-log-interval steps: the `Decode batch` line (its
        `#running-req` is the size of the batch that closes the window, its `#queue-req` the queue
        that batch's formation left, `queued`) and the gauges."""
        start = self._win_start if self._win_start is not None else t
        elapsed = max(t - start, 1e-9)
        self.last_gen_throughput = self._win_tokens / elapsed
        accept_len = accept_rate = None
        if self.speculative and self._win_passes:
            accept_len = self._win_accepted / self._win_passes
            draft_tokens = self.draft_tokens_now
            if self.spec.accept_rate == "with-bonus":
                # 0.5.9/0.5.10: (accepted drafts + bonus) / (passes * num_draft_tokens)
                denom = self._win_passes * draft_tokens
                accept_rate = self._win_accepted / denom if denom > 0 else 0.0
            else:
                # 0.5.11+: correct drafts / (passes * (num_draft_tokens - 1))
                denom = self._win_passes * (draft_tokens - 1)
                accept_rate = (self._win_accepted - self._win_passes) / denom if denom > 0 else 0.0
            self.last_spec_accept_length = accept_len
            self.last_spec_accept_rate = accept_rate
            # lifetime totals are folded in only here (docs/reference/sglang.md §3.1)
            self.spec_total_accepted += self._win_accepted
            self.spec_total_forward += self._win_passes
        tokens, usage, mamba_usage = self._usage()
        self.gauges.update(
            num_running_reqs=batch_size,
            num_queue_reqs=queue,
            num_used_tokens=tokens,
            token_usage=usage,
            mamba_usage=mamba_usage,
            gen_throughput=self.last_gen_throughput,
            spec_accept_length=accept_len or 0.0,
            spec_accept_rate=accept_rate or 0.0,
            spec_num_steps=self.k if self.speculative else 0,
            spec_num_draft_tokens=self.draft_tokens_now,
        )
        if self.log is not None:
            self.log(
                logs.decode_batch_line(
                    running=batch_size,
                    tokens=tokens,
                    token_usage=usage,
                    gen_throughput=self.last_gen_throughput,
                    queue=queue,
                    accept_len=accept_len,
                    accept_rate=accept_rate,
                    hybrid=self.spec.hybrid,
                    mamba_num=batch_size,
                    mamba_usage=mamba_usage,
                    cuda_graph=graph,
                )
            )
        self._win_passes = self._win_accepted = self._win_tokens = 0
        self._win_start = t

    def _usage(self) -> tuple[int, float, float]:
        total = max(1, self.spec.max_total_num_tokens)
        tokens = max(0, self.kv_live)
        mamba_usage = len(self.running) / self.spec.state_slot_cap if self.spec.state_slot_cap else 0.0
        return tokens, tokens / total, mamba_usage

    def _pending_tokens(self, chunks: list[int]) -> int:
        """0.5.11+ `#pending-token`: the waiting requests' tokens and what the chunked request has
        left after this batch's chunk (scheduler_metrics_mixin.py `_get_num_pending_tokens`). A cut
        request is the batch's last: its cut spends the chunk budget, so nothing joins after it."""
        pending = sum(r.input_tokens for r in self.waiting)
        cut = self.chunked
        if cut is not None:
            pending += cut.input_tokens - cut.prefilled - chunks[-1]
        return pending

    def _log_prefill(self, batch: Batch, now: float) -> None:
        """SGLang's prefill stats for each prefill batch, the `Prefill batch` line and the gauges, at
        the batch's end: every release modelled logs them from `process_batch_result_prefill`
        (scheduler_output_processor_mixin.py; 0.5.23 scheduler_components/batch_result_processor.py),
        after the forward and after its first tokens are streamed, from the PrefillStats recorded
        when the batch was formed ("Record prefill stats for logging after forward",
        scheduler.py `get_new_batch_prefill`), the pool as it is then and the queue as the batch's
        formation left it (`queued`). So the `input throughput` gap runs from the previous prefill's
        end to this one's, and the first one's from the start of the stats clock (`stats_since`):
        `gap_latency = now - self.last_prefill_stats_tic`, the tic set when the metrics were
        initialised (0.5.11/0.5.12 observability/scheduler_metrics_mixin.py init_metrics and
        report_prefill_stats, 0.5.23 scheduler_components/metrics_reporter.py _init_metrics),
        not 0 (0.5.9/0.5.10's first line is 0.00 all the same: it counts the prefill before, none)."""
        tokens = batch.new_tokens
        previous, self._last_prefill_tokens = self._last_prefill_tokens, tokens
        if self._prefill_log_t is None:
            thr = 0.0
        else:
            # 0.5.9/0.5.10 count the prefill logged before this one, 0.5.11+ this one (versions.py)
            counted = tokens if self.spec.input_throughput == "this-batch" else previous
            thr = counted / max(now - self._prefill_log_t, 1e-9)
        self._prefill_log_t = now
        live, usage, mamba_usage = self._usage()
        self.gauges.update(
            num_running_reqs=batch.running,
            num_queue_reqs=batch.queue,
            num_used_tokens=live,
            token_usage=usage,
            mamba_usage=mamba_usage,
        )
        if self.log is not None:
            self.log(
                logs.prefill_batch_line(
                    new_seq=len(batch.reqs),
                    new_token=tokens,
                    token_usage=usage,
                    running=batch.running,
                    queue=batch.queue,
                    input_throughput=thr,
                    hybrid=self.spec.hybrid,
                    mamba_usage=mamba_usage,
                    pending=batch.pending,
                    style=self.spec.prefill_line,
                )
            )

    def avg_spec_accept_length(self) -> float | None:
        """Lifetime accept length, or None before the first folded window (as SGLang omits it)."""
        if not self.speculative or not self.spec_total_forward:
            return None
        return self.spec_total_accepted / self.spec_total_forward

    def reset_spec_counters(self) -> None:
        """What /flush_cache does to the speculative counters when idle (docs/reference/sglang.md §3)."""
        self.spec_total_accepted = self.spec_total_forward = 0
        self._win_passes = self._win_accepted = self._win_tokens = 0
        self.last_spec_accept_length = self.last_spec_accept_rate = 0.0
