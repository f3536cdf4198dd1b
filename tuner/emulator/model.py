"""The performance model of docs/reference/performance-model.md, as pure functions.

Nothing here sleeps, draws, or touches I/O: the scheduler (engine.py), the calibration fit and the
tests all call the same formulas, so what is calibrated is what is served.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from .profile import Profile, StepTable


def tau(alpha: float, k: int) -> float:
    """Expected tokens per verify step of a chain of k drafts plus the bonus token.

    tau(k) = (1 - alpha^(k+1)) / (1 - alpha); tau(0) = 1 (docs/reference/performance-model.md, "Tokens per verify step").
    """
    if k <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def accept_pmf(alpha: float, k: int) -> list[float]:
    """P(a tokens emitted in one verify step), a = 1..k+1: the truncated geometric whose mean is tau.

    The first draft that fails ends the chain; the target's own token always comes out, so
    P(a=j) = alpha^(j-1) (1-alpha) for j <= k and P(a=k+1) = alpha^k.
    """
    if k <= 0:
        return [1.0]
    p = [alpha ** (j - 1) * (1.0 - alpha) for j in range(1, k + 1)]
    p.append(alpha**k)
    return p


def draw_accepted(u: float, alpha: float, k: int) -> int:
    """Inverse-CDF draw from accept_pmf for a uniform u in [0, 1): one call per request per step.

    P(a > j) = alpha^j, so a = 1 + floor(log(1-u) / log(alpha)), capped at k+1.
    """
    if k <= 0:
        return 1
    if alpha <= 0.0:
        return 1
    if alpha >= 1.0:
        return k + 1
    x = 1.0 - u
    if x <= 0.0:
        return k + 1
    a = 1 + int(math.log(x) / math.log(alpha))
    return a if a <= k + 1 else k + 1


def effective_alpha(alpha: float, topk: int) -> float:
    """Per-level acceptance when topk candidates are drafted per position.

    The model document covers chains (topk 1). For topk > 1 the emulator assumes independent
    candidates: a level is accepted when any of the topk candidates matches, 1 - (1-alpha)^topk.
    """
    if topk <= 1:
        return alpha
    return 1.0 - (1.0 - alpha) ** topk


def tau_by_position(alphas: list[float] | tuple[float, ...], k: int) -> float:
    """Tokens per verify step of a chain whose draft j is accepted with probability a_j given 1..j-1
    were: tau(k) = 1 + sum_{j<=k} prod_{i<=j} a_i (positions past the list keep its last value)."""
    total, surv = 1.0, 1.0
    for j in range(k):
        surv *= alphas[min(j, len(alphas) - 1)]
        total += surv
    return total


def padded_batch(batch: int, graph_bs: tuple[int, ...] | list[int] | None, graph_max_bs: int | None = None) -> int:
    """The batch a decode step costs: the smallest captured CUDA-graph size >= batch.

    SGLang replays the graph of that size with padding (cuda_graph_runner.py `replay_prepare`,
    bisect on `capture_bs`); a batch above the largest captured size, or above the server's
    cuda-graph max bs, runs without a graph at its own size.
    """
    if not graph_bs or batch <= 0 or (graph_max_bs is not None and batch > graph_max_bs):
        return batch
    i = bisect.bisect_left(graph_bs, batch)
    return graph_bs[i] if i < len(graph_bs) else batch


def listed_up_to(listed: tuple[int, ...] | None, max_bs: int) -> tuple[int, ...] | None:
    """A profile's CUDA-graph list as the server captures it: SGLang's generated list, which the
    profile's stands for, stops at the max batch size (server_args.py
    `_generate_cuda_graph_batch_sizes`: `bs <= self.cuda_graph_max_bs`), so a batch past it runs
    without a graph, not padded to a larger listed size. The server (runner.py) and the
    virtual-time simulator (simulate.py) both cut it here."""
    if not listed:
        return None
    return tuple(b for b in listed if b <= max_bs) or None


def capture_sizes(listed: tuple[int, ...] | None, pool: int) -> tuple[int, ...] | None:
    """The decode batch sizes SGLang captures from a list, given a request pool of `pool`.

    Graphs are captured only up to the request pool; a list that goes past it gains the pool's own
    size, so the batches between the last listed size below the pool and the pool replay that
    graph, not one of a size that never runs (sgl-project/sglang
    python/sglang/srt/model_executor/cuda_graph_runner.py `get_batch_sizes_to_capture`).
    """
    if not listed or pool < 1:
        return None
    sizes = set(listed) | ({pool} if max(listed) > pool else set())
    return tuple(sorted(b for b in sizes if b <= pool))


def _interp(xs: tuple[int, ...], x: float) -> tuple[int, int, float]:
    """Indices (lo, hi) and weight of x between xs[lo] and xs[hi]; held at the edges."""
    if x <= xs[0]:
        return 0, 0, 0.0
    if x >= xs[-1]:
        n = len(xs) - 1
        return n, n, 0.0
    hi = bisect.bisect_left(xs, x)
    lo = hi - 1
    return lo, hi, (x - xs[lo]) / (xs[hi] - xs[lo])


def table_ms(t: StepTable, batch: float, tokens: float) -> float:
    """T(B, q) of a `step_time_ms` table: bilinear between rows and columns, the edge value past them."""
    b0, b1, wb = _interp(t.batch, batch)
    q0, q1, wq = _interp(t.tokens, tokens)
    ms = t.ms
    top = ms[b0][q0] + (ms[b0][q1] - ms[b0][q0]) * wq
    bottom = ms[b1][q0] + (ms[b1][q1] - ms[b1][q0]) * wq
    return top + (bottom - top) * wb


def draft_step_ms(p: Profile, batch: float) -> float:
    """One draft step at this batch: the table's draft_ms interpolated over its rows, else t_draft_ms."""
    t = p.step_table
    if t is None or t.draft_ms is None:
        return p.t_draft_ms
    b0, b1, w = _interp(t.batch, batch)
    return t.draft_ms[b0] + (t.draft_ms[b1] - t.draft_ms[b0]) * w


def step_time_ms(
    p: Profile,
    batch: int,
    k: int,
    verify_tokens: int | None = None,
    *,
    spec: bool | None = None,
    graph_bs: tuple[int, ...] | list[int] | None = None,
    graph_max_bs: int | None = None,
    kv_tokens: int | None = None,
    topk: int = 1,
) -> float:
    """Duration of one decode step (no speculation) or draft+verify step for `batch` running requests.

    t(B,0) = t_base + c_tok*B without speculation; with it,
    t(B,k) = t_spec + k*t_draft + c_verify*B*n (docs/reference/performance-model.md, "Time of one decode step"), n the
    verify width (num_draft_tokens, k+1 for a chain), plus the profile's optional spec_overhead_ms
    and non-linear terms
    t_draft_quad*k^2 + t_step_extra[k] (0 unless the profile sets them). `spec` says whether the
    server speculates (default: k > 0): under adaptive speculation a bucket at 0 steps still runs
    the verify and draft-extend passes with one token per request (0.5.23 eagle_worker_v2.py
    forward_batch_generation, `_build_trivial_verify_input`), so it is the spec formula at k = 0.

    `graph_bs` pads the batch to a captured CUDA-graph size first (padded_batch). A profile with a
    `step_time_ms` table uses it instead of the linear terms (table_ms); `kv_tokens`, the KV held
    by the running requests, adds kv_read_ns_per_token for each token beyond the table's context.
    A server over several nodes adds its cross-node all-reduce cost (`cross_node_step_ms`) to
    either form.
    """
    if spec is None:
        spec = k > 0
    running = batch
    batch = padded_batch(batch, graph_bs, graph_max_bs)
    table = p.step_table
    if table is not None:
        # docs/emulator.md "Step time measured on a GPU": t(B,0) = T(B,1);
        # t(B,k) = T(B, n) + k * D(B) + spec_overhead, plus each running request's KV read
        # beyond the context the table was measured at
        extra = 0.0
        if table.kv_read_ns_per_token is not None and kv_tokens is not None:
            extra = table.kv_read_ns_per_token * (kv_tokens - running * table.context_tokens) * 1e-6
            # a shorter context takes off at most the read the cell holds: past the table's last row
            # the cell is held at that row's time, which holds that row's batch of reads (the profile's
            # check keeps each row's read below its time: profile_values.parse_step_table)
            held = min(running, table.batch[-1]) * table.context_tokens
            extra = max(extra, -table.kv_read_ns_per_token * held * 1e-6)
        extra += p.cross_node_step_ms
        if not spec:
            return max(table_ms(table, batch, 1) + extra, 0.0)
        k = max(k, 0)
        n = verify_tokens if verify_tokens is not None else k + 1
        # a tree's draft steps run on batch x topk rows (SGLang's spec_utils.py `select_top_k_tokens`
        # feeds every branch's token to the next draft forward)
        t = table_ms(table, batch, n) + k * draft_step_ms(p, batch * max(topk, 1)) + p.spec_overhead_ms + extra
        if p.t_draft_quad_ms:
            t += p.t_draft_quad_ms * k * k
        if p.t_step_extra_ms:
            t += p.t_step_extra_ms.get(k, 0.0)
        return max(t, 0.0)
    if not spec:
        return p.t_base_ms + p.c_tok_ms * batch + p.cross_node_step_ms
    k = max(k, 0)
    n = verify_tokens if verify_tokens is not None else k + 1
    t = p.t_spec_ms + p.spec_overhead_ms + k * p.t_draft_ms + p.c_verify_ms * batch * n + p.cross_node_step_ms
    if p.t_draft_quad_ms:
        t += p.t_draft_quad_ms * k * k
    if p.t_step_extra_ms:
        t += p.t_step_extra_ms.get(k, 0.0)
    return t


def prefill_time_ms(p: Profile, tokens: int, chunk: int | None = None) -> float:
    """One prefill batch: a fixed cost per chunk plus a cost per input token (docs/reference/performance-model.md, "Prefill").

    `chunk` is the server's chunked prefill size (`--chunked-prefill-size`, which SGLang's scheduler
    cuts a long input by; -1 = off, one forward), else the profile's default for it."""
    size = p.chunked_prefill_size if chunk is None else chunk
    chunks = max(1, math.ceil(tokens / size)) if size > 0 else 1
    return chunks * p.t_prefill_base_ms + tokens * p.t_prefill_tok_ms


def per_request_rate(p: Profile, batch: int, k: int, alpha: float, verify_tokens: int | None = None) -> float:
    """Tokens/s of one request while `batch` requests decode together: 1000 * tau / t(B,k)."""
    return 1000.0 * tau(alpha, k) / step_time_ms(p, batch, k, verify_tokens)


def mem_fraction_token_delta(p: Profile, mem_fraction_static: float | None) -> int:
    """KV tokens gained (or lost) by running at another --mem-fraction-static than the profile's.

    The profile's token counts were read at p.mem_fraction_static; each extra fraction of a GPU's
    memory becomes KV cells of kv_bytes_per_token (per rank), as SGLang's profile_max_num_token
    sizes the pool from what the static fraction leaves after the weights (docs/reference/sglang.md §1.2).
    """
    if mem_fraction_static is None or p.kv_bytes_per_token <= 0:
        return 0
    delta_gb = (mem_fraction_static - p.mem_fraction_static) * p.gpu_mem_gb
    return int(delta_gb * (1 << 30) / p.kv_bytes_per_token)


def max_total_num_tokens(p: Profile, k: int, mem_fraction_static: float | None = None) -> int:
    """KV pool tokens at depth k: kv_nospec - k * kv_per_step, or the measured value for this k.

    Measured counts (the seed's journal) take precedence over the straight line through them, so an
    emulated host prints what the real one printed. A result <= 0 means SGLang cannot allocate the
    pool and fails at start-up (docs/reference/performance-model.md, "Admission and KV capacity").
    """
    if k in p.kv_tokens_measured:
        base = p.kv_tokens_measured[k]
    else:
        base = p.kv_tokens_nospec - max(k, 0) * p.kv_tokens_per_step
    return base + mem_fraction_token_delta(p, mem_fraction_static)


def state_slot_cap(p: Profile, k: int) -> int:
    """Requests the hybrid model's per-request state pool holds at depth k: floor(slots - k*per_step).

    A tiny epsilon keeps values such as 30.6 - 4*4.4 = 13.0 (13.000000000000002 or 12.99999...) on
    the intended side of floor().
    """
    return max(0, math.floor(p.state_slots - max(k, 0) * p.state_slots_per_step + 1e-9))


def max_running_requests(p: Profile, k: int, flag: int | None, kv_tokens: int) -> int:
    """min(flag if given, state-slot cap, max_total_num_tokens // 2) (docs/reference/performance-model.md).

    `flag` is the already-resolved server argument: with speculation on and no
    --max-running-requests, resolve.py has set it to 48 as SGLang 0.5.x does (docs/reference/sglang.md §2.4).
    """
    caps = [state_slot_cap(p, k), max(kv_tokens, 0) // 2]
    if flag is not None:
        caps.append(flag)
    return max(0, min(caps))


@dataclass(frozen=True)
class Capacity:
    """What the capacity log line and /server_info report."""

    max_total_num_tokens: int
    max_running_requests: int
    state_slot_cap: int


def capacity(p: Profile, k: int, mrr_flag: int | None, mem_fraction_static: float | None) -> Capacity:
    kv = max_total_num_tokens(p, k, mem_fraction_static)
    return Capacity(kv, max_running_requests(p, k, mrr_flag, kv), state_slot_cap(p, k))
