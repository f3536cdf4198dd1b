"""The capacity-skip rule, once for the grid (tuner/run/planner.py) and the model-guided search
(tuner/decide/search/decide.py): a configuration deeper than one of its series that failed to start
for lack of KV memory is not deployed, because deeper speculation needs more of it."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..data.records import SweepState
from ..spec.configs import SpecConfig

# Start-up failures that deeper speculation can only make worse: every extra step takes more KV
# memory (docs/reference/performance-model.md "Admission and KV capacity"; the failure strings of
# docs/reference/sglang.md §5.3).
_CAPACITY_PATTERNS = (
    r"not enough memory",
    r"kv (cache )?pool",
    r"mem[-_]fraction[-_]static",
    r"out of memory",
    r"outofmemory",
    r"cannot be allocated",
    r"kv[- ]oom",
    r"max_total_num_tokens\S* (is )?(<=|0|negative)",
    # the scheduler's `assert self.max_running_requests > 0, "max_running_request is zero"`
    # (0.5.9 managers/tp_worker.py): the pool holds no request at all, a KV pool of a few tokens
    # or a hybrid model's state pool with no slot left for the deeper draft's buffers
    r"max_running_request is zero",
    # its sibling (`assert max_req_len > 0`, managers/tp_worker.py 0.4.10-0.5.23) and cuBLAS failing
    # to allocate its workspace: the log parser reads both as a memory failure too
    r"memory pool size is too small",
    r"cublas_status_alloc_failed",
)


def is_capacity_failure(reason: str | None) -> bool:
    """A deploy failure that says the KV pool (memory) was too small."""
    text = (reason or "").lower()
    return any(re.search(p, text) for p in _CAPACITY_PATTERNS)


def kv_failures(state: SweepState, member: Callable[[SpecConfig], bool]) -> list[tuple[int, str]]:
    """(depth, reason) of each configuration `member` admits that failed to start for lack of KV
    memory, shallowest first: the one reading of such failures for the capacity skip below and the
    schedule phase's deepest candidate (tuner/decide/adaptive_phase.py, over the static chains)."""
    out = []
    for cid, dep in state.failed.items():
        other = state.configs.get(cid)
        if other is None or other.is_schedule or other.spec_steps <= 0 or not member(other):
            continue
        # the reason (the gate's fatal line), not the detail: its log tail holds SGLang's launch
        # line (`server_args=ServerArgs(... mem_fraction_static=0.87 ...)`) for any start that failed
        # early, so a gate timeout or an NCCL error read as lack of KV memory and skipped the depths above
        if is_capacity_failure(dep.reason):
            out.append((other.spec_steps, dep.reason or ""))
    return sorted(out)


def capacity_skip(cfg: SpecConfig, state: SweepState) -> str | None:
    """Why `cfg` is skipped for capacity: the shallowest depth of its series below it that failed
    to start for lack of KV memory, in words; None when there is none."""
    below = [(s, r) for s, r in kv_failures(state, lambda o: o.series == cfg.series) if s < cfg.spec_steps]
    if not below:
        return None
    steps, reason = below[0]
    return (
        f"spec_steps {steps} could not start for lack of KV memory ({reason[:160]}); "
        "deeper speculation needs more of it"
    )
