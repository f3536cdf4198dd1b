"""Per-batch-size speculation schedules: built from the per-level winners, written in SGLang's and
vLLM's own formats, and routed the way SGLang routes them (pure).

SGLang (`--speculative-adaptive --speculative-adaptive-config FILE.json`, sgl-project/sglang PR
#24055, python/sglang/srt/speculative/adaptive_spec_params.py) keys a schedule by batch-size lower
bounds ("1", "16", ...), each with its `candidate_steps`; a one-element list pins that bucket, 0
means no drafting. At each decode step it takes the bucket with the largest key at or below the
running batch size (`_find_closest_bs`), after padding that size up to the nearest captured
CUDA-graph batch size (`_pad_to_cuda_graph_bs`) when it was told a padding list: in 0.5.23 that
list is `--cuda-graph-bs-decode` as given (EAGLEWorkerV2.init_cuda_graphs passes
`get_exec().graph.cuda_graph_bs_decode`), so with default flags the batch size is routed unpadded. vLLM's equivalent is `num_speculative_tokens_per_batch_size`, a
list of `[bs_lo, bs_hi, K]` ranges starting at 1, sorted and non-overlapping
(vllm-project/vllm vllm/v1/spec_decode/dynamic/utils.py `validate_and_normalize_dynamic_sd_schedule`).

The tuner builds a schedule from what it measured: at each concurrency level the static depth
that won, placed at the batch size the server actually ran there (the running-request count, not
the client's concurrency: admission caps it), with bucket boundaries on captured CUDA-graph batch
sizes between the levels (SGLang captures graphs at those sizes anyway). Whether the schedule beats the best static depth is for the measurement
of the schedule itself to say (a schedule sizes its buffers for its widest candidate, which can
cost KV capacity at high load).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sglang_utils.sglang_adaptive import schedule_config


def sglang_spec_cuda_graph_bs(max_bs: int) -> list[int]:
    """SGLang's default captured batch sizes with speculative decoding on, up to `max_bs`
    (python/sglang/srt/server_args.py `_generate_cuda_graph_batch_sizes` in 0.5.9;
    arg_groups/cuda_graph_hook.py `generate_decode_cuda_graph_batch_sizes` in 0.5.23, which also
    appends `max_bs` itself). Used only when the server does not say its list."""
    sizes = (
        list(range(1, 9))
        + list(range(10, 33, 2))
        + list(range(40, 65, 4))
        + list(range(72, 257, 8))
        + list(range(272, max_bs + 1, 16))
    )
    sizes = [b for b in sizes if b <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def pad_to_graph_bs(batch: int, graph_bs: Sequence[int] | None) -> int:
    """The captured batch size a running batch is padded to (itself when none is larger)."""
    if not graph_bs:
        return batch
    ordered = sorted(graph_bs)
    i = bisect.bisect_left(ordered, batch)
    return ordered[i] if i < len(ordered) else batch


@dataclass(frozen=True)
class Schedule:
    """Batch-size lower bound -> steps (one pinned candidate per bucket); bucket 1 always exists."""

    buckets: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        keys = [b for b, _ in self.buckets]
        if not keys or keys[0] != 1 or keys != sorted(set(keys)):
            raise ValueError(f"a schedule needs ascending, distinct bucket keys starting at 1, got {keys}")
        if any(s < 0 for _, s in self.buckets):
            raise ValueError("steps must be >= 0")

    @classmethod
    def from_mapping(cls, m: Mapping[int | str, int]) -> Schedule:
        return cls(tuple(sorted((int(k), int(v)) for k, v in m.items())))

    @property
    def steps(self) -> list[int]:
        return sorted({s for _, s in self.buckets})

    @property
    def widest(self) -> int:
        """The deepest candidate: what SGLang sizes its buffers for."""
        return max(self.steps)

    def route(self, batch: int, graph_bs: Sequence[int] | None = None) -> int:
        """Steps SGLang uses for a running batch of this size: pad, then the floor bucket."""
        padded = pad_to_graph_bs(batch, graph_bs)
        keys = [b for b, _ in self.buckets]
        return self.buckets[max(0, bisect.bisect_right(keys, padded) - 1)][1]

    def to_sglang(self) -> dict[str, dict[str, list[int]]]:
        """SGLang's `--speculative-adaptive-config` JSON: each bucket pinned to one candidate (the
        conversion the role's filter makes from `spec_schedule`, plugins/module_utils/sglang_adaptive.py)."""
        return schedule_config(dict(self.buckets))

    def to_vllm(self, max_batch: int) -> list[list[int]]:
        """vLLM's `num_speculative_tokens_per_batch_size`: [bs_lo, bs_hi, K] ranges from 1 to
        `max_batch` (vLLM's own max batch size, e.g. max_num_seqs)."""
        out = []
        for i, (lo, s) in enumerate(self.buckets):
            hi = self.buckets[i + 1][0] - 1 if i + 1 < len(self.buckets) else max(max_batch, lo)
            out.append([lo, hi, s])
        return out

    @property
    def label(self) -> str:
        return ", ".join(f"B>={b}: k={s}" for b, s in self.buckets)

    @property
    def config_id(self) -> str:
        return "sched-" + "-".join(f"{b}k{s}" for b, s in self.buckets)


@dataclass(frozen=True)
class LevelWinner:
    """What one concurrency level says: its winner's depth, at the batch size the server ran."""

    concurrency: int
    running_batch: float  # typical running-request count during the level (server's own gauge)
    steps: int
    score: float = 1.0  # how strongly the level prefers it (for conflicts in one bucket)


def boundary(lo_batch: int, hi_batch: int, sizes: Sequence[int] | None) -> int:
    """A bucket key between two levels' batch sizes: the size in `sizes` (captured CUDA-graph
    batch sizes) nearest to their geometric mean, kept in (lo_batch, hi_batch] so that both levels
    route to their own winner. Unmeasured batch sizes in between get whichever side is nearer on a
    log scale, since decode cost grows with batch size roughly proportionally in the memory-bound
    regime."""
    target = math.sqrt(lo_batch * hi_batch)
    candidates = [b for b in (sizes or range(lo_batch + 1, hi_batch + 1)) if lo_batch < b <= hi_batch]
    if not candidates:
        return hi_batch
    return min(candidates, key=lambda b: (abs(math.log(b) - math.log(target)), b))


def build_schedule(
    winners: Sequence[LevelWinner], *, padding: Sequence[int] | None = None, sizes: Sequence[int] | None = None
) -> Schedule:
    """The schedule that gives every measured level its winner.

    `padding` is the list the server pads running batches to before routing (None: unpadded, the
    default); `sizes` are the preferred bucket keys (captured CUDA-graph sizes). Levels whose
    routed batch sizes are equal share a bucket; if their winners differ, the one with the larger
    `score` takes it. Adjacent buckets with the same steps merge.
    """
    if not winners:
        raise ValueError("no level to build a schedule from")
    by_batch: dict[int, LevelWinner] = {}
    for w in winners:
        p = pad_to_graph_bs(max(1, round(w.running_batch)), padding)
        cur = by_batch.get(p)
        if cur is None or w.score > cur.score:
            by_batch[p] = w
    points = sorted(by_batch.items())
    buckets: list[tuple[int, int]] = [(1, points[0][1].steps)]
    for (p_lo, w_lo), (p_hi, w_hi) in zip(points, points[1:], strict=False):
        if w_hi.steps != w_lo.steps:
            buckets.append((boundary(p_lo, p_hi, padding or sizes), w_hi.steps))
    merged: list[tuple[int, int]] = []
    for b, st in buckets:
        if merged and merged[-1][1] == st:
            continue
        merged.append((b, st))
    return Schedule(tuple(merged))
