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

from .faults import FaultError, parse_faults
from .profile_values import (
    STEP_TABLE_KEYS,
    TABLE_KEYS_AT_TOP,
    ProfileError,
    StepTable,
    YamlLoader,
    by_steps,
    check_number,
    increasing_ints,
    is_number,
    number_at_least_0,
    parse_step_table,
    refuse_unknown,
    table_keys_at_top,
    temperature_key,
)

__all__ = [
    "DEFAULT_PROFILE_NAME",
    "PROFILE_DIR",
    "Profile",
    "ProfileError",
    "StepTable",
    "load_profile",
    "profile_from_mapping",
]

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
DEFAULT_PROFILE_NAME = "seed-qwen35-122b-4x-rtxpro6000.yaml"
PROFILE_ENV = "SGLANG_EMULATOR_PROFILE"  # docs/architecture.md: the profile may come from the environment


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
    # realism (docs/emulator.md "Acceptance that falls with draft position" ... "CUDA-graph batch padding"); absent = off
    # temperature -> conditional acceptance per draft position, merged with `alpha` (see below)
    alpha_by_position: tuple[tuple[float, tuple[float, ...]], ...] | None = None
    alpha_spread: float = 0.0  # sd of the per-request logit offset fixed by the prompt
    step_table: StepTable | None = None  # `step_time_ms`: one target forward, B x q, measured
    spec_overhead_ms: float = 0.0  # per speculative step beyond the target forward and the drafts
    cuda_graph_bs: tuple[int, ...] | None = None  # captured decode batch sizes: a batch pads up to one

    def alphas_at(self, temperature: float, positions: int) -> list[float]:
        """Conditional acceptance of draft positions 1..`positions` at this temperature.

        With `alpha_by_position`, interpolated position by position between the two nearest
        temperatures (clamped at the ends); a list shorter than `positions` repeats its last value.
        Without it every position has alpha_at(temperature).
        """
        if self.alpha_by_position is None:
            return [self.alpha_at(temperature)] * positions
        table = self.alpha_by_position
        temps = [t for t, _ in table]
        i = bisect.bisect_left(temps, temperature)

        def row(j: int) -> list[float]:
            vals = table[j][1]
            return [vals[min(n, len(vals) - 1)] for n in range(positions)]

        if i <= 0:
            return row(0)
        if i >= len(table):
            return row(len(table) - 1)
        t0, t1 = temps[i - 1], temps[i]
        r0, r1 = row(i - 1), row(i)
        if t1 == t0:
            return r1
        w = (temperature - t0) / (t1 - t0)
        return [a + (b - a) * w for a, b in zip(r0, r1, strict=True)]

    # tensor parallelism the numbers were measured at (0: the server's own) and the cost of a
    # step's all-reduces crossing nodes (multinode.py, docs/emulator.md "Multi-node")
    tp_size: int = 0
    t_cross_node_ms: float = 1.5
    # Not a profile key: what this server's node count adds to every step (t_cross_node_ms x
    # ceil(log2(nnodes)), set by multinode.adjust_profile; model.step_time_ms adds it to either
    # form of the step cost, the linear terms or a `step_time_ms` table).
    cross_node_step_ms: float = 0.0

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
    "alpha_by_position": None,
    "alpha_spread": 0.0,
    "step_time_ms": None,
    "spec_overhead_ms": 0.0,
    "cuda_graph_bs": None,
    "tp_size": 0,
    "t_cross_node_ms": 1.5,
}
_TOP_KEYS = (*_REQUIRED, *_OPTIONAL_DEFAULTS, "name")
# Replaced by `step_time_ms` where a profile has it (docs/emulator.md "Step time measured on a GPU").
_TABLE_REPLACES = ("t_base_ms", "c_tok_ms", "t_spec_ms", "c_verify_ms")


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
        raw = yaml.load(Path(p).read_text(encoding="utf-8"), Loader=YamlLoader)
    except OSError as e:
        raise ProfileError(f"cannot read emulator profile {p}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise ProfileError(f"emulator profile {p} is not valid YAML: {e}") from e
    except UnicodeDecodeError as e:
        raise ProfileError(
            f"emulator profile {p} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})"
        ) from e
    except ProfileError as e:
        raise ProfileError(f"emulator profile {p}: {e}") from e
    except RecursionError as e:  # nesting hundreds of levels deep: YAML's composer recurses per level
        raise ProfileError(f"emulator profile {p} nests too deeply to read") from e
    if not isinstance(raw, dict):
        raise ProfileError(f"emulator profile {p} must be a mapping")
    name = raw.get("name", Path(p).stem)
    if not isinstance(name, str) or not name.strip():
        raise ProfileError(
            f"emulator profile {p}: name must be text (the profile's name in logs and /server_info), got {name!r}"
        )
    return profile_from_mapping(raw, name=name, path=str(p))


def profile_from_mapping(raw: Mapping[str, Any], *, name: str = "inline", path: str = "") -> Profile:
    """Validate a mapping (from YAML or built in code, e.g. by the calibration fit)."""
    # first: a misspelled key is the cause of whatever it leaves missing (refuse_unknown)
    in_table = {k: "step_time_ms" for k in STEP_TABLE_KEYS if k not in TABLE_KEYS_AT_TOP}
    refuse_unknown(name, "", raw, [*_TOP_KEYS, *TABLE_KEYS_AT_TOP], in_table)
    raw = table_keys_at_top(name, raw)
    required = dict(_REQUIRED)
    if raw.get("alpha_by_position") is not None and "alpha" not in raw:
        # acceptance given only by position: `alpha` (one value per temperature, for what reads a
        # single acceptance) is each temperature's first position
        required.pop("alpha")
        rows = _alpha_by_position(name, raw["alpha_by_position"], ())
        raw = {**raw, "alpha": {t: vals[0] for t, vals in rows or ()}}
    # checked first: a malformed table is named, not the linear keys it would have replaced
    step_table = parse_step_table(name, raw.get("step_time_ms"), dict.fromkeys(_TOP_KEYS, "the profile's top level"))
    if step_table is not None:
        for key in _TABLE_REPLACES:
            if key not in raw:
                required.pop(key)
        if step_table.draft_ms is not None and "t_draft_ms" not in raw:
            required.pop("t_draft_ms")
    missing = [k for k in required if k not in raw]
    if missing:
        raise ProfileError(f"emulator profile {name}: missing key(s): {', '.join(missing)}")
    values: dict[str, Any] = {}
    for key in _REQUIRED:
        if key not in required and key not in raw:
            raw = {**raw, key: 0.0}
    for key, typ in _REQUIRED.items():
        v = raw[key]
        if isinstance(v, bool) and typ is not bool:
            raise ProfileError(f"emulator profile {name}: {key} must be a number, not a boolean")
        if typ is int and isinstance(v, float):
            # a count written as a float (YAML 1.2 reads 1.2e6 so; JSON tools write 32768.0)
            check_number(name, key, v, "int", None)
            v = int(v)
        if not isinstance(v, typ):
            raise ProfileError(f"emulator profile {name}: {key} has the wrong type ({type(v).__name__})")
        values[key] = v
    for key, default in _OPTIONAL_DEFAULTS.items():
        values[key] = raw.get(key, default)
    for key, (kind, low) in _NUMBERS.items():
        check_number(name, key, values[key], kind, low)

    alpha_map = values.pop("alpha")
    if not isinstance(alpha_map, Mapping):
        raise ProfileError(f"emulator profile {name}: alpha must map temperature -> probability")
    alpha_by_t: dict[float, float] = {}
    for t_raw, a in alpha_map.items():
        t = temperature_key(name, "alpha", t_raw)
        if t in alpha_by_t:
            raise ProfileError(f"emulator profile {name}: alpha gives temperature {t} twice")
        if not is_number(a) or not 0.0 < a < 1.0:
            raise ProfileError(f"emulator profile {name}: alpha[{t}]={a!r}; an acceptance must be in (0, 1)")
        alpha_by_t[t] = float(a)
    alpha = tuple(sorted(alpha_by_t.items()))
    if not alpha:
        raise ProfileError(f"emulator profile {name}: alpha is empty")
    measured_map = {
        k: int(v) for k, v in by_steps(name, "kv_tokens_measured", values.pop("kv_tokens_measured"), "int").items()
    }
    faults_raw = values.pop("faults")
    faults_raw = [] if faults_raw is None else faults_raw  # false, "" or {} are no list: named below
    if not isinstance(faults_raw, list) or not all(isinstance(f, str) for f in faults_raw):
        raise ProfileError(f"emulator profile {name}: faults must be a list of fault names, got {faults_raw!r}")
    try:
        parse_faults(faults_raw)  # a bad entry is named here, with the profile and the key
    except FaultError as e:
        raise ProfileError(f"emulator profile {name}: faults: {e}") from e
    faults = tuple(faults_raw)
    extra_map = by_steps(name, "t_step_extra_ms", values.pop("t_step_extra_ms"), "float")
    seed = values["noise_seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ProfileError(f"emulator profile {name}: noise_seed must be a whole number or absent")
    for key in ("noise_run_cv", "noise_restart_cv"):
        if float(values[key]) > 10.0:
            # a coefficient of variation: past 10 the draws are noise of nothing (and past 1e154 NaN)
            raise ProfileError(f"emulator profile {name}: {key} must be at most 10, got {values[key]!r}")
    if not 0.0 < float(values["alpha_max"]) < 1.0:
        raise ProfileError(f"emulator profile {name}: alpha_max must be in (0, 1)")
    if not 0.0 < float(values["mem_fraction_static"]) <= 1.0:
        raise ProfileError(f"emulator profile {name}: mem_fraction_static must be in (0, 1]")
    if values["chunked_prefill_size"] == 0:
        raise ProfileError(f"emulator profile {name}: chunked_prefill_size must be -1 (off) or >= 1")
    if values["eos_min_tokens"] < 1 or values["eos_max_tokens"] < values["eos_min_tokens"]:
        raise ProfileError(f"emulator profile {name}: need 1 <= eos_min_tokens <= eos_max_tokens")
    by_position = _alpha_by_position(name, values.pop("alpha_by_position"), alpha)
    spread = number_at_least_0(name, "alpha_spread", values.pop("alpha_spread"))
    values.pop("step_time_ms")
    # with a table or without one (the linear form adds it to t_spec_ms): a profile may use any
    # subset of the realism keys
    overhead = number_at_least_0(name, "spec_overhead_ms", values.pop("spec_overhead_ms"))
    graph_bs = values.pop("cuda_graph_bs")
    if graph_bs is not None:
        graph_bs = increasing_ints(name, "cuda_graph_bs", graph_bs)
        if "cuda_graph_max_bs" not in raw:
            # the list describes the machine's captured sizes: without a max of its own it is the
            # list's largest (as SGLang's `cuda_graph_max_bs = max(cuda_graph_bs)` for a given list),
            # not the 256 default that would drop a 512-long H100/H200 list's upper sizes
            values["cuda_graph_max_bs"] = max(graph_bs)

    for key, (kind, _low) in _NUMBERS.items():  # checked above: now the types the Profile holds
        values[key] = float(values[key]) if kind == "float" else int(values[key])
    for key in ("sglang_version", "draft_model_architecture", "model_type"):
        # served as text (/server_info, the log's lines): a list or a mapping was served as its repr
        if values[key] is not None and not isinstance(values[key], str):
            raise ProfileError(f"emulator profile {name}: {key} must be text, got {values[key]!r}")
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
        alpha_by_position=by_position,
        alpha_spread=spread,
        step_table=step_table,
        spec_overhead_ms=overhead,
        cuda_graph_bs=graph_bs,
        **values,
    )


# Every scalar number a profile holds: its kind and the least value that means something on a real
# machine (None: any finite value). Checked before anything reads them, so a typo, a NaN or a sign
# slip fails the start naming the key instead of turning into a traceback or a 0 ms step later.
_NUMBERS: dict[str, tuple[str, float | None]] = {
    **{
        k: ("float", 0.0)
        for k in (
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
            "graph_mem_gb",
            "prompt_sensitivity",
            "top_p_exponent",
            "t_draft_quad_ms",
            "noise_run_cv",
            "noise_restart_cv",
            "noise_window_s",
            "noise_idle_gap_s",
            "t_cross_node_ms",
        )
    },
    "prompt_score_ref": ("float", None),
    "alpha_max": ("float", None),  # (0, 1): checked below
    "mem_fraction_static": ("float", None),  # (0, 1]: checked below
    **{k: ("int", 0) for k in ("kv_tokens_nospec", "kv_tokens_per_step", "cuda_graph_max_bs", "kv_bytes_per_token")},
    **{k: ("int", 1) for k in ("context_len", "clip_max_new_tokens", "max_prefill_tokens", "prompt_min_tokens")},
    "eos_min_tokens": ("int", None),  # 1 <= min <= max: checked below
    "eos_max_tokens": ("int", None),
    "eos_token_id": ("int", 0),
    "tp_size": ("int", 0),  # 0: not set (the flag's value)
    "chunked_prefill_size": ("int", -1),  # -1 or >= 1: checked below
}


def _alpha_by_position(
    name: str, v: Any, alpha: tuple[tuple[float, float], ...]
) -> tuple[tuple[float, tuple[float, ...]], ...] | None:
    """temperature -> [a_1, a_2, ...], each in (0, 1); merged with `alpha` (a temperature given here
    replaces alpha's for it; alpha's other temperatures become constant rows), sorted by temperature.
    A plain list (no temperatures) is that list at every temperature: it replaces `alpha` whole."""
    if v is None:
        return None
    key = "alpha_by_position"
    every_temperature = isinstance(v, list)
    if every_temperature:
        v = {0.0: v}
    if not isinstance(v, Mapping) or not v:
        raise ProfileError(f"emulator profile {name}: {key} must map temperature -> list of acceptances")
    rows: dict[float, tuple[float, ...]] = {}
    for t_key, vals in v.items():
        t = temperature_key(name, key, t_key)
        if not isinstance(vals, list) or not vals:
            raise ProfileError(f"emulator profile {name}: {key}[{t}] must be a non-empty list of acceptances")
        for j, a in enumerate(vals, 1):
            if not is_number(a) or not 0.0 < a < 1.0:
                raise ProfileError(
                    f"emulator profile {name}: {key}[{t}] position {j} is {a!r}; an acceptance must be in (0, 1)"
                )
        if t in rows:
            raise ProfileError(f"emulator profile {name}: {key} gives temperature {t} twice")
        rows[t] = tuple(float(a) for a in vals)
    if every_temperature:
        return tuple(rows.items())
    for t, a in alpha:
        rows.setdefault(t, (a,))
    return tuple(sorted(rows.items()))
