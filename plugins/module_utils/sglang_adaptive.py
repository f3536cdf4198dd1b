# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""SGLang's adaptive speculative decoding config (``--speculative-adaptive-config FILE.json``).

One reading of SGLang's schema for everything in this project that writes or reads such a file:
the emulator (which validates it as the emulated release does and runs the policy) and the role
(which turns a ``spec_schedule`` into the JSON SGLang reads). Standard library only, Python 3.8
syntax; installed with the emulator as ``sglang_utils.sglang_adaptive``.

Two schemas exist (sgl-project/sglang ``python/sglang/srt/speculative/adaptive_spec_params.py``):

* **flat** (0.5.11, 0.5.12; ``load_adaptive_config``): one JSON object with any of
  ``candidate_steps`` (default ``[1, 3, 7]``), ``ema_alpha``, ``update_interval``,
  ``warmup_batches``, ``down_hysteresis``, ``up_hysteresis``. Other keys are ignored, so a
  per-batch-size file is silently read as the flat default there.
* **per-bs** (0.5.13+, PR #24055; ``_load_adaptive_config``): keys that are digit strings are
  batch-size lower bounds (``"1"``, ``"16"``, ...), each an object with ``candidate_steps`` (a
  non-empty list of ints >= 0; one element pins the bucket, 0 = no drafting) and optional tuning
  keys; non-digit top-level keys are defaults merged under every bucket. Without a file SGLang
  uses ``DEFAULT_ADAPTIVE_CONFIG``. The flat form has no digit key and is rejected.

The loaders below repeat SGLang's statements in SGLang's order, so a bad file fails here with the
same exception type and the same words as on a real server.
"""

from __future__ import annotations

import bisect
import copy
import json
from typing import Any

from . import sglang_releases as _releases

__all__ = [
    "DEFAULT_ADAPTIVE_CONFIG",
    "default_adaptive_config",
    "zero_steps_allowed",
    "FLAT_DEFAULT_CANDIDATE_STEPS",
    "read_config_file",
    "load_per_bs",
    "load_flat",
    "union_candidate_steps",
    "default_launch_steps",
    "schedule_config",
    "resolved_schedule",
    "launch_steps",
    "pad_to_graph_bs",
    "bucket_of",
    "unspeculated_bucket",
    "schedule_id",
    "schedule_label",
]

# adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG (used when no file is given), 0.5.20 to 0.5.23.
DEFAULT_ADAPTIVE_CONFIG: dict[str, dict[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}
# The earlier releases' tables (their wheels' adaptive_spec_params.py): 0.5.13 drafts in every bucket
# (it refuses 0 steps), 0.5.14 to 0.5.19 start the first bucket from [1, 3, 7].
_DEFAULTS_BEFORE = (
    (
        "0.5.14",
        {
            "1": {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
            "8": {"candidate_steps": [1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
            "32": {"candidate_steps": [1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
        },
    ),
    (
        "0.5.20",
        {
            "1": {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
            **{k: v for k, v in DEFAULT_ADAPTIVE_CONFIG.items() if k != "1"},
        },
    ),
)


def default_adaptive_config(version: object = None) -> dict[str, dict[str, Any]]:
    """SGLang's built-in per-batch-size table of one release (a copy; the newest for an unknown or
    unparseable version): what `--speculative-adaptive` without a config file runs."""
    key = _releases.release_key(version) if version is not None else ()
    for before, table in _DEFAULTS_BEFORE:
        if key and key < _releases.release_key(before):
            return copy.deepcopy(table)
    return copy.deepcopy(DEFAULT_ADAPTIVE_CONFIG)


# 0.5.11/0.5.12 AdaptiveSpeculativeParams: cfg.get("candidate_steps", [1, 3, 7]).
FLAT_DEFAULT_CANDIDATE_STEPS = [1, 3, 7]


def read_config_file(path: str) -> Any:
    """``with open(path) as f: json.load(f)``: FileNotFoundError / json.JSONDecodeError as SGLang's."""
    with open(path) as f:
        return json.load(f)


def load_per_bs(cfg: Any, version: object = None) -> tuple[Any, dict[int, dict[str, Any]]]:
    """0.5.23 ``_load_adaptive_config`` after the file is read (``cfg`` None -> the release's default;
    before 0.5.14 a 0-step candidate is refused with 0.5.13's words).

    Returns (the whole config, {bucket lower bound: its entry}). Raises what SGLang raises:
    ValueError with SGLang's words for bad candidate lists and for a file without bucket keys,
    AttributeError for a document that is not an object (``cfg.items()``) or an entry that is not
    one (``entry.get``).
    """
    if cfg is None:
        cfg = default_adaptive_config(version)
    zero = zero_steps_allowed(version)
    low = 0 if zero else 1
    bs_entries: dict[int, dict[str, Any]] = {}
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= low for s in steps):
            words = "non-negative" if zero else "positive"
            raise ValueError(f"BS {key}: candidate_steps must be a list of {words} ints, got {steps!r}")
        bs_entries[int(key)] = entry
    if not bs_entries:
        raise ValueError(
            "speculative_adaptive_config must contain at least one integer-string "
            'BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. '
            f"Got keys: {list(cfg.keys())}"
        )
    return cfg, bs_entries


def zero_steps_allowed(version: object = None) -> bool:
    """Whether a release loads a bucket that does not draft (0 steps): from 0.5.14 (an unknown or
    unparseable version: the newest behaviour)."""
    key = _releases.release_key(version) if version is not None else ()
    return not key or key >= _releases.release_key(_releases.ADAPTIVE_ZERO_STEPS_SINCE)


def load_flat(cfg: Any) -> dict[str, Any]:
    """0.5.11/0.5.12 ``load_adaptive_config`` after the file is read (``cfg`` None -> ``{}``)."""
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        raise ValueError(f"speculative_adaptive_config must be a JSON object, got {type(cfg).__name__}")
    return cfg


def union_candidate_steps(bs_entries: dict[int, dict[str, Any]]) -> list[int]:
    """0.5.23 ``resolve_candidate_steps_from_config``: every bucket's candidates, sorted; this union
    sizes SGLang's runtime buffers and picks the initial steps (its middle element)."""
    steps: set[int] = set()
    for entry in bs_entries.values():
        steps.update(entry["candidate_steps"])
    return sorted(steps)


def default_launch_steps(bs_entries: dict[int, dict[str, Any]]) -> int:
    """The steps SGLang starts an adaptive config at when --speculative-num-steps is not given: the
    middle of its candidates' union (0.5.23 speculative_hook.py ``_init_adaptive_speculative_params``;
    3 for the default config's [0, 1, 3, 5, 7]). The one reading for the tuner's configuration,
    the emulator's resolution and its simulation."""
    union = union_candidate_steps(bs_entries)
    return union[len(union) // 2]


def schedule_config(schedule: dict[Any, Any]) -> dict[str, dict[str, list[int]]]:
    """A per-batch-size schedule {lower bound: steps} as SGLang's per-bs JSON, one pinned candidate
    per bucket: ``{"1": 4, "16": 3}`` -> ``{"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}``.
    Keys are written as SGLang reads them (decimal strings), in increasing order."""
    out: dict[str, dict[str, list[int]]] = {}
    for key in sorted(schedule, key=lambda k: int(str(k))):
        out[str(int(str(key)))] = {"candidate_steps": [int(schedule[key])]}
    return out


def resolved_schedule(
    cfg: Any, form: str | None, version: object = None, launch_steps: object = None
) -> dict[str, Any] | None:
    """The schedule a server runs, as SGLang's JSON, from its config document (``None``: no file).

    ``form`` is the release's (``sglang_releases.adaptive_config_form``). Per-bs (0.5.13+): each
    bucket as its slot reads it (``AdaptiveSpeculativeParams.__init__``: ``{**cfg, **entry}``, the
    top-level defaults merged under it, less the other buckets), buckets in increasing order, the
    default config when there is no file. Flat (0.5.11/0.5.12): the one object with its
    ``candidate_steps`` filled in, the launch depth ``launch_steps`` (--speculative-num-steps)
    among them where the release adds it (0.5.12: ``sglang_releases.adaptive_flat_adds_launch_steps``).
    ``None`` when the document is not one the release accepts.
    """
    if form == "flat":
        try:
            flat = dict(load_flat(cfg))
        except ValueError:
            return None
        steps = flat.get("candidate_steps", FLAT_DEFAULT_CANDIDATE_STEPS)
        if isinstance(steps, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
            # the policy runs `sorted(set(candidates))` (0.5.11/0.5.12 AdaptiveSpeculativeParams)
            runs = set(steps)
            if (
                isinstance(launch_steps, int)
                and not isinstance(launch_steps, bool)
                and _releases.adaptive_flat_adds_launch_steps(version)
            ):
                runs.add(launch_steps)
            steps = sorted(runs)
        flat["candidate_steps"] = list(steps) if isinstance(steps, list) else steps
        return flat
    if form != "per-bs":
        return None
    try:
        whole, entries = load_per_bs(cfg, version)
    except (ValueError, AttributeError, TypeError):
        return None
    defaults = {k: v for k, v in whole.items() if not str(k).isdigit()}
    return {str(bs): {**defaults, **entries[bs]} for bs in sorted(entries)}


# -- a per-batch-size schedule's identity: one rule each, for the role, the tuner and the emulator --


def launch_steps(config: dict[str, dict[str, Any]]) -> int:
    """The --speculative-num-steps a per-batch-size schedule (SGLang's JSON) is launched with.

    SGLang 0.5.23 sizes the KV pool and the hybrid state slots for the launch depth
    (mem_cache/kv_cache_configurator.py uses get_spec().speculative_num_draft_tokens = launch
    steps + 1) and requires it to be one of the schedule's candidates
    (arg_groups/speculative_hook.py _init_adaptive_speculative_params); every bucket then starts at
    it when it is one of its own candidates, else at its middle candidate (AdaptiveStepSlot). The
    capacity matters at high load, so the launch depth is the highest bucket's starting depth (its
    middle candidate; its only one when pinned). When that is 0 (no drafting at high load) the
    smallest positive step of the schedule is used instead: the launch depth is the worker's base
    runtime state, built at start-up as a drafting state (EAGLEWorkerV2.__init__ builds its draft
    backends and CUDA graphs for speculative_num_steps), and SGLang's own default config never
    launches at 0 (the middle of [0, 1, 3, 5, 7] is 3); the smallest drafting depth is the one that
    costs the least capacity. The role launches with it (sglang_spec.schedule_settings) and the
    tuner records it as the configuration's spec_steps.
    """
    top = config[max(config, key=int)]["candidate_steps"]
    start = int(top[len(top) // 2])
    if start > 0:
        return start
    positive = sorted({s for entry in config.values() for s in entry["candidate_steps"] if s > 0})
    return positive[0] if positive else 0


def pad_to_graph_bs(batch: int, graph_bs: Any) -> int:
    """The captured CUDA-graph batch size a running batch is padded to, itself when none is larger
    or no list is known (0.5.23 adaptive_spec_params.py ``_pad_to_cuda_graph_bs``)."""
    if not graph_bs:
        return batch
    ordered = sorted(graph_bs)
    i = bisect.bisect_left(ordered, batch)
    return int(ordered[i]) if i < len(ordered) else batch


def bucket_of(bounds: Any, batch: int, graph_bs: Any = None) -> int:
    """The bucket (lower bound) SGLang routes a running batch to: pad it, then the largest lower
    bound not above it, the first bucket below them all (``_find_closest_bs``)."""
    ordered = sorted(int(b) for b in bounds)
    i = bisect.bisect_right(ordered, pad_to_graph_bs(batch, graph_bs)) - 1
    return ordered[max(0, i)]


def unspeculated_bucket(config: dict[str, Any], batch: int, graph_bs: Any = None) -> int | None:
    """The bucket (lower bound) SGLang routes a running `batch` to (`bucket_of`) when its only
    candidate is 0 steps, else None: a server running that batch there does not speculate at all,
    so its acceptance length is 1.0 by design (the correctness gate's floor does not apply)."""
    bounds = [int(b) for b in config if str(b).isdigit()]
    if not bounds:
        return None
    bucket = bucket_of(bounds, batch, graph_bs)
    steps = config[str(bucket)].get("candidate_steps") or []
    return bucket if steps and all(int(c) == 0 for c in steps) else None


def schedule_id(buckets: Any) -> str:
    """A schedule's file-name-safe id, from ((lower bound, steps), ...): ``sched-1k4-16k3``."""
    return "sched-" + "-".join(f"{b}k{k}" for b, k in buckets)


def schedule_label(buckets: Any) -> str:
    """A schedule in words, from ((lower bound, steps), ...): ``B>=1: k=4, B>=16: k=3``."""
    return ", ".join(f"B>={b}: k={k}" for b, k in buckets)
