"""Emulator profiles: the numbers that make the emulator one particular machine.

A profile is a YAML file (docs/reference/performance-model.md, "What a profile holds"). The emulator never
hard-codes a machine: another file is another machine, and the tuner must find its best depth
without knowing the numbers. Loading is strict: a missing or mistyped key fails at start-up with
the key's name, because a silently defaulted timing constant would make a sweep quietly wrong.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
DEFAULT_PROFILE_NAME = "seed-qwen35-122b-4x-rtxpro6000.yaml"
PROFILE_ENV = "SGLANG_EMULATOR_PROFILE"  # docs/architecture.md: the profile may come from the environment


class ProfileError(ValueError):
    """A profile file is missing, unreadable or inconsistent."""


@dataclass(frozen=True)
class Profile:
    """Every constant the emulator's timing, capacity and log lines depend on."""

    name: str
    path: str
    # identity
    served_model_name: str
    model_architecture: str
    draft_model_architecture: str
    model_type: str
    hybrid_mamba: bool
    sglang_version: str
    context_len: int
    # acceptance: temperature -> alpha (interpolated linearly, clamped at the ends)
    alpha: tuple[tuple[float, float], ...]
    # decode step times (ms)
    t_base_ms: float
    c_tok_ms: float
    t_spec_ms: float
    t_draft_ms: float
    c_verify_ms: float
    # prefill (ms) and per-request overhead outside the GPU (tokenise, HTTP)
    t_prefill_base_ms: float
    t_prefill_tok_ms: float
    t_request_overhead_ms: float
    # capacity
    kv_tokens_nospec: int
    kv_tokens_per_step: int
    kv_tokens_measured: Mapping[int, int]
    state_slots: float
    state_slots_per_step: float
    clip_max_new_tokens: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    cuda_graph_max_bs: int
    # start-up
    startup_s: float
    # memory figures for the log lines (per GPU, GB) and the --mem-fraction-static rule
    gpu_mem_gb: float
    weights_gb: float
    mem_fraction_static: float
    kv_bytes_per_token: int
    graph_mem_gb: float
    # text
    eos_min_tokens: int
    eos_max_tokens: int
    eos_token_id: int
    faults: tuple[str, ...] = field(default_factory=tuple)
    # acceptance by workload (workload.py): prompt content and top_p
    prompt_sensitivity: float = 8.0
    prompt_score_ref: float = 0.0
    prompt_min_tokens: int = 16
    top_p_exponent: float = 1.0
    alpha_max: float = 0.999
    # non-linear step time in depth (model.step_time_ms): q * k^2 and a per-depth table, ms
    t_draft_quad_ms: float = 0.0
    t_step_extra_ms: Mapping[int, float] = field(default_factory=dict)
    # noise (noise.py); all off by default
    noise_run_cv: float = 0.0
    noise_restart_cv: float = 0.0
    noise_seed: int | None = None
    noise_window_s: float = 0.0
    noise_idle_gap_s: float = 0.5
    # tensor parallelism the numbers were measured at (0: the server's own) and the cost of a
    # step's all-reduces crossing nodes (multinode.py, docs/emulator.md "Multi-node")
    tp_size: int = 0
    t_cross_node_ms: float = 1.5

    def alpha_at(self, temperature: float) -> float:
        """Acceptance per draft position at this sampling temperature (linear interpolation)."""
        temps = [t for t, _ in self.alpha]
        i = bisect.bisect_left(temps, temperature)
        if i <= 0:
            return self.alpha[0][1]
        if i >= len(self.alpha):
            return self.alpha[-1][1]
        (t0, a0), (t1, a1) = self.alpha[i - 1], self.alpha[i]
        if t1 == t0:
            return a1
        return a0 + (a1 - a0) * (temperature - t0) / (t1 - t0)


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "served_model_name": str,
    "model_architecture": str,
    "hybrid_mamba": bool,
    "context_len": int,
    "alpha": dict,
    "t_base_ms": (int, float),
    "c_tok_ms": (int, float),
    "t_spec_ms": (int, float),
    "t_draft_ms": (int, float),
    "c_verify_ms": (int, float),
    "t_prefill_base_ms": (int, float),
    "t_prefill_tok_ms": (int, float),
    "kv_tokens_nospec": int,
    "kv_tokens_per_step": int,
    "state_slots": (int, float),
    "state_slots_per_step": (int, float),
    "startup_s": (int, float),
}

_OPTIONAL_DEFAULTS: dict[str, Any] = {
    "sglang_version": "0.5.9",
    "draft_model_architecture": "",
    "model_type": "",
    "t_request_overhead_ms": 0.0,
    "kv_tokens_measured": {},
    "clip_max_new_tokens": 4096,
    "chunked_prefill_size": 8192,
    "max_prefill_tokens": 16384,
    "cuda_graph_max_bs": 256,
    "gpu_mem_gb": 95.0,
    "weights_gb": 30.0,
    "mem_fraction_static": 0.8,
    "kv_bytes_per_token": 12288,
    "graph_mem_gb": 0.8,
    "eos_min_tokens": 8,
    "eos_max_tokens": 1500,
    "eos_token_id": 248046,  # Qwen3.5's <|im_end|>: finish_reason.matched of a natural stop
    "faults": [],
    "prompt_sensitivity": 8.0,
    "prompt_score_ref": 0.0,
    "prompt_min_tokens": 16,
    "top_p_exponent": 1.0,
    "alpha_max": 0.999,
    "t_draft_quad_ms": 0.0,
    "t_step_extra_ms": {},
    "noise_run_cv": 0.0,
    "noise_restart_cv": 0.0,
    "noise_seed": None,
    "noise_window_s": 0.0,
    "noise_idle_gap_s": 0.5,
    "tp_size": 0,
    "t_cross_node_ms": 1.5,
}


def default_profile_path() -> Path:
    """The profile used when neither the flag nor the environment names one."""
    env = os.environ.get(PROFILE_ENV)
    if env:
        return Path(env)
    return PROFILE_DIR / DEFAULT_PROFILE_NAME


def resolve_profile_path(value: str | None) -> Path:
    """A bare name (with or without .yaml) is looked up among the shipped profiles."""
    if not value:
        return default_profile_path()
    p = Path(value)
    if p.exists():
        return p
    for cand in (PROFILE_DIR / value, PROFILE_DIR / f"{value}.yaml"):
        if cand.exists():
            return cand
    return p


def load_profile(path: str | os.PathLike[str] | None = None) -> Profile:
    """Read and validate a profile file; raises ProfileError naming the bad key."""
    p = resolve_profile_path(str(path) if path is not None else None)
    try:
        raw = yaml.safe_load(Path(p).read_text(encoding="utf-8"))
    except OSError as e:
        raise ProfileError(f"cannot read emulator profile {p}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise ProfileError(f"emulator profile {p} is not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ProfileError(f"emulator profile {p} must be a mapping")
    return profile_from_mapping(raw, name=raw.get("name") or Path(p).stem, path=str(p))


def profile_from_mapping(raw: Mapping[str, Any], *, name: str = "inline", path: str = "") -> Profile:
    """Validate a mapping (from YAML or built in code, e.g. by the calibration fit)."""
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise ProfileError(f"emulator profile {name}: missing key(s): {', '.join(missing)}")
    unknown = [str(k) for k in raw if k not in _REQUIRED and k not in _OPTIONAL_DEFAULTS and k != "name"]
    if unknown:
        raise ProfileError(f"emulator profile {name}: unknown key(s): {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for key, typ in _REQUIRED.items():
        v = raw[key]
        if isinstance(v, bool) and typ is not bool:
            raise ProfileError(f"emulator profile {name}: {key} must be a number, not a boolean")
        if not isinstance(v, typ):
            raise ProfileError(f"emulator profile {name}: {key} has the wrong type ({type(v).__name__})")
        values[key] = v
    for key, default in _OPTIONAL_DEFAULTS.items():
        values[key] = raw.get(key, default)

    alpha_map = values.pop("alpha")
    try:
        alpha = tuple(sorted((float(t), float(a)) for t, a in alpha_map.items()))
    except (TypeError, ValueError) as e:
        raise ProfileError(f"emulator profile {name}: alpha must map temperature -> probability") from e
    if not alpha:
        raise ProfileError(f"emulator profile {name}: alpha is empty")
    for t, a in alpha:
        if not 0.0 <= a < 1.0:
            raise ProfileError(f"emulator profile {name}: alpha[{t}]={a} must be in [0, 1)")
    measured = values.pop("kv_tokens_measured") or {}
    try:
        measured_map = {int(k): int(v) for k, v in dict(measured).items()}
    except (TypeError, ValueError) as e:
        raise ProfileError(f"emulator profile {name}: kv_tokens_measured must map steps -> tokens") from e
    faults = tuple(str(f) for f in (values.pop("faults") or []))
    extra = values.pop("t_step_extra_ms") or {}
    try:
        extra_map = {int(k): float(v) for k, v in dict(extra).items()}
    except (TypeError, ValueError) as e:
        raise ProfileError(f"emulator profile {name}: t_step_extra_ms must map steps -> milliseconds") from e
    if any(k < 0 for k in extra_map):
        raise ProfileError(f"emulator profile {name}: t_step_extra_ms keys must be steps >= 0")
    seed = values["noise_seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ProfileError(f"emulator profile {name}: noise_seed must be a whole number or absent")
    for key in ("noise_run_cv", "noise_restart_cv", "noise_window_s", "noise_idle_gap_s", "prompt_sensitivity"):
        v = values[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ProfileError(f"emulator profile {name}: {key} must be a number >= 0")
    if not 0.0 < float(values["alpha_max"]) < 1.0:
        raise ProfileError(f"emulator profile {name}: alpha_max must be in (0, 1)")
    if float(values["top_p_exponent"]) < 0:
        raise ProfileError(f"emulator profile {name}: top_p_exponent must be >= 0")
    for key in ("t_base_ms", "t_spec_ms", "c_verify_ms", "c_tok_ms", "startup_s"):
        if float(values[key]) < 0:
            raise ProfileError(f"emulator profile {name}: {key} must not be negative")
    if float(values["t_cross_node_ms"]) < 0 or int(values["tp_size"]) < 0:
        raise ProfileError(f"emulator profile {name}: t_cross_node_ms and tp_size must not be negative")
    if values["eos_min_tokens"] < 1 or values["eos_max_tokens"] < values["eos_min_tokens"]:
        raise ProfileError(f"emulator profile {name}: need 1 <= eos_min_tokens <= eos_max_tokens")

    floats = (
        "t_base_ms",
        "c_tok_ms",
        "t_spec_ms",
        "t_draft_ms",
        "c_verify_ms",
        "t_prefill_base_ms",
        "t_prefill_tok_ms",
        "t_request_overhead_ms",
        "state_slots",
        "state_slots_per_step",
        "startup_s",
        "gpu_mem_gb",
        "weights_gb",
        "mem_fraction_static",
        "graph_mem_gb",
        "prompt_sensitivity",
        "prompt_score_ref",
        "top_p_exponent",
        "alpha_max",
        "t_draft_quad_ms",
        "noise_run_cv",
        "noise_restart_cv",
        "noise_window_s",
        "noise_idle_gap_s",
        "t_cross_node_ms",
    )
    for key in floats:
        values[key] = float(values[key])
    ints = (
        "context_len",
        "kv_tokens_nospec",
        "kv_tokens_per_step",
        "clip_max_new_tokens",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "cuda_graph_max_bs",
        "kv_bytes_per_token",
        "eos_min_tokens",
        "eos_max_tokens",
        "eos_token_id",
        "prompt_min_tokens",
        "tp_size",
    )
    for key in ints:
        values[key] = int(values[key])
    values["sglang_version"] = str(values["sglang_version"])
    values["draft_model_architecture"] = str(values["draft_model_architecture"] or f"{values['model_architecture']}MTP")
    values["model_type"] = str(values["model_type"] or "unknown")
    return Profile(
        name=str(name),
        path=path,
        alpha=alpha,
        kv_tokens_measured=measured_map,
        faults=faults,
        t_step_extra_ms=extra_map,
        **values,
    )
