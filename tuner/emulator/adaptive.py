"""SGLang's adaptive speculation policy, as the emulated release runs it.

A port of the decision logic in sgl-project/sglang `python/sglang/srt/speculative/adaptive_spec_params.py`
(the numbers, the order of the tests and the log lines; no GPU state), so that an emulated server
switches depth at the same moments a real one would for the same accepted-draft counts:

* `FlatPolicy`, 0.5.11 / 0.5.12 `AdaptiveSpeculativeParams`: one EMA over every verify step;
  `update()` after each step, a decision every `update_interval` steps once `warmup_batches` have
  passed; `_recompute_params` steps down while the EMA is at or below `prev - 0.5 + down_hysteresis`,
  then up while it is above `current - 0.5 + up_hysteresis`.
* `PerBsPolicy`, 0.5.13+ (PR #24055) `AdaptiveSpeculativeParams` + `AdaptiveStepSlot`: one slot per
  batch-size bucket, each with its own EMA, warm-up and candidates. Before a decode step the running
  batch size is padded up to the captured CUDA-graph batch list (`_pad_to_cuda_graph_bs`; only when
  the list was handed over, see `graph_bs`) and routed to the bucket with the largest lower bound
  not above it (`_find_closest_bs`); the worker then runs that bucket's current steps
  (eagle_worker_v2.py `activate_step_by_batch`). After verify the same bucket's slot is updated
  (`on_verify_complete`). A slot at 0 steps (no drafting) keeps counting batches but not the EMA,
  and its next decision probes the smallest positive candidate (`_recompute_params`, "Probe the
  smallest positive step after a zero-step nospec interval"); a slot that moved down does not move
  up in the same decision; `ceiling_coeff` caps a step that is not a step up.

The controller's switch lines come from eagle_worker_v2.py (`apply_runtime_state`), the update lines
from adaptive_spec_params.py (`_apply_target_steps`); both log on rank 0 only (`log_info_on_rank0`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sglang_utils import sglang_adaptive as schema

Log = Callable[[str], None]


def _quiet(_line: str) -> None:
    pass


class _Slot:
    """0.5.23 AdaptiveStepSlot: the EMA, warm-up and hysteresis of one bucket."""

    def __init__(self, initial_steps: int, cfg: dict[str, Any], log: Log) -> None:
        candidates = sorted(set(cfg["candidate_steps"]))
        assert len(candidates) >= 1, "candidate_steps must have at least 1 value"
        self.candidate_steps = candidates
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        self.ceiling_coeff = cfg.get("ceiling_coeff", 0)
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0
        self._log = log

    def update(self, correct_per_req: list[int]) -> bool:
        if not correct_per_req:
            return False
        if self.current_steps > 0:
            batch_avg = sum(correct_per_req) / len(correct_per_req)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        old_idx = idx
        if old == 0:
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        while idx > 0:
            prev = self.candidate_steps[idx - 1]
            drop = 0.5 if prev == 0 else prev - 0.5
            drop += self.down_hysteresis
            if self.ema_accept_len <= drop:
                idx -= 1
            else:
                break
        if not idx < old_idx:
            while idx < len(self.candidate_steps) - 1:
                if self.ema_accept_len > self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                    idx += 1
                else:
                    break
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if target > ceiling and target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        return self._apply(old, target)

    def _apply(self, old: int, target: int) -> bool:
        if target != old:
            self.current_steps = target
            self._log(
                f"Adaptive spec params updated: steps {old} -> {target} (ema_accept_len={self.ema_accept_len:.2f})"
            )
            return True
        return False


class PerBsPolicy:
    """0.5.13+ routing of batch sizes to per-bucket slots (AdaptiveSpeculativeParams)."""

    kind = "per-bs"

    def __init__(
        self,
        initial_steps: int,
        cfg: Any,
        bs_entries: dict[int, dict[str, Any]],
        graph_bs: list[int] | None,
        log: Log = _quiet,
    ) -> None:
        self.bs_list = sorted(bs_entries)
        self.slots = {bs: _Slot(initial_steps, {**cfg, **entry}, log) for bs, entry in sorted(bs_entries.items())}
        self.graph_bs = sorted(graph_bs) if graph_bs else None
        first = self.slots[self.bs_list[0]]
        log(
            f"AdaptiveSpeculativeParams initialized: steps={first.current_steps}, "
            f"candidate_steps={first.candidate_steps}"
        )

    @property
    def candidate_steps(self) -> list[int]:
        return sorted({s for slot in self.slots.values() for s in slot.candidate_steps})

    def pad(self, batch_size: int) -> int:
        return int(schema.pad_to_graph_bs(batch_size, self.graph_bs))

    def bucket(self, batch_size: int) -> int:
        return int(schema.bucket_of(self.bs_list, batch_size, self.graph_bs))

    def steps_for_batch(self, batch_size: int) -> int:
        return self.slots[self.bucket(batch_size)].current_steps

    def on_verify_complete(self, correct_per_req: list[int], batch_size: int) -> int | None:
        slot = self.slots[self.bucket(batch_size)]
        if slot.update(correct_per_req):
            return slot.current_steps
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "graph_bs": self.graph_bs,
            "buckets": {
                str(bs): {
                    "candidate_steps": s.candidate_steps,
                    "steps": s.current_steps,
                    "ema_accept_len": round(s.ema_accept_len, 4),
                    "batches": s._batch_count,
                }
                for bs, s in self.slots.items()
            },
        }


class FlatPolicy:
    """0.5.11 / 0.5.12 AdaptiveSpeculativeParams: one EMA for all batch sizes."""

    kind = "flat"

    def __init__(self, initial_steps: int, cfg: dict[str, Any], initial_rule: str, log: Log = _quiet) -> None:
        candidates = set(cfg.get("candidate_steps", schema.FLAT_DEFAULT_CANDIDATE_STEPS))
        if initial_rule == "add":
            # 0.5.12: "Ensure the worker's initial speculative_num_steps is itself a candidate."
            if initial_steps not in candidates:
                log(
                    f"Adding initial speculative_num_steps={initial_steps} to candidate_steps={sorted(candidates)} "
                    "so the pre-built runtime state is reused."
                )
                candidates.add(initial_steps)
        self.candidate_steps: list[int] = sorted(candidates)
        assert len(self.candidate_steps) >= 2, "candidate_steps must have at least 2 distinct values"
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        if initial_rule == "add":
            self.current_steps = initial_steps
        else:
            # 0.5.11: the candidate nearest the static steps, the deeper one on a tie.
            self.current_steps = min(self.candidate_steps, key=lambda s: (abs(s - initial_steps), -s))
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0
        self._log = log
        log(
            f"AdaptiveSpeculativeParams initialized: steps={self.current_steps}, candidate_steps={self.candidate_steps}"
        )

    def steps_for_batch(self, batch_size: int) -> int:
        return self.current_steps

    def on_verify_complete(self, correct_per_req: list[int], batch_size: int) -> int | None:
        if not correct_per_req:
            return None
        batch_avg = sum(correct_per_req) / len(correct_per_req)
        self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return None
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return None
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        while idx > 0:
            if self.ema_accept_len <= self.candidate_steps[idx - 1] - 0.5 + self.down_hysteresis:
                idx -= 1
            else:
                break
        while idx < len(self.candidate_steps) - 1:
            if self.ema_accept_len > self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                idx += 1
            else:
                break
        target = self.candidate_steps[idx]
        if target != old:
            self.current_steps = target
            self._log(
                f"Adaptive spec params updated: steps {old} -> {target} (ema_accept_len={self.ema_accept_len:.2f})"
            )
            return target
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "candidate_steps": self.candidate_steps,
            "steps": self.current_steps,
            "ema_accept_len": round(self.ema_accept_len, 4),
            "batches": self._batch_count,
        }


Policy = PerBsPolicy | FlatPolicy


def switch_line(old_steps: int, new_steps: int) -> str:
    """eagle_worker(_v2).py apply_runtime_state's line (topk 1: draft tokens = steps + 1)."""
    return (
        "Switch adaptive runtime state: "
        f"steps {old_steps} -> {new_steps}, draft_tokens {old_steps + 1} -> {new_steps + 1}"
    )


def built_state_line(steps: int, elapsed_s: float, mem_gb: float) -> str:
    """eagle_worker(_v2).py build_adaptive_runtime_state's line, one per extra candidate."""
    return f"Built adaptive runtime state steps={steps}: elapsed={elapsed_s:.2f}s, mem={mem_gb:.2f}GB"
