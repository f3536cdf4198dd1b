"""The one mapping from sglang_server role variables to `launch_server` flags.

Everything the unit template needs to decide lives here as pure functions, so that the mapping
is unit-tested without Ansible (tests/roles/test_sglang_flags_filter.py) and the template stays a
layout. The role calls these through the filters at the bottom of the file:

- ``sglang_spec``: validates and normalises the play-level speculative-decoding variables.
  ``-e spec_steps=3`` arrives as a string, so every number is parsed strictly here.
- ``sglang_schedule``: validates the play-level ``spec_schedule`` (adaptive speculation) and turns
  it into SGLang's per-batch-size JSON and the launch depth.
- ``sglang_node``: multi-node tensor parallelism (``--nnodes``/``--node-rank``/
  ``--dist-init-addr``) derived from an inventory group.
- ``sglang_server_errors``: every other input check of the server's flags and secrets, with
  messages that name the variable.
- ``sglang_server_host_errors``: every path-forming, name and version variable (unit name, user
  and group, directories and files on the host, the pinned version, unit-file directives), so
  that nothing is written to a host before all of them are known to be safe.
- ``sglang_flags``: the ordered flag list, one ``[flag, value...]`` entry per line of ExecStart.
- ``sglang_secret_config``: the lines of SGLang's ``--config`` YAML file that carries the API keys.
- ``systemd_exec_quote`` / ``systemd_env_assign``: quoting for ExecStart and EnvironmentFile.

Only the standard library is used; Ansible is not imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import posixpath
import re
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any


def _module_utils(name: str) -> ModuleType:
    """A file of plugins/module_utils (contracts shared with the emulator, standard library only).

    Found as the collection's module_utils when Ansible loads this filter, as the installed
    ``sglang_utils`` package in the tuner's environment, else by path beside this file.
    """
    for qualified in (f"ansible_collections.sglang_tune.serving.plugins.module_utils.{name}", f"sglang_utils.{name}"):
        try:
            return importlib.import_module(qualified)
        except ImportError:
            continue
    key = f"_sglang_tune_module_utils_{name}"
    if key in sys.modules:
        return sys.modules[key]
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", f"{name}.py")
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


# The emulator's fault table (one copy, shared with tuner/emulator/faults.py) and the SGLang
# releases it models (shared with tuner/emulator/versions.py).
_faults = _module_utils("emulator_faults")
_releases = _module_utils("sglang_releases")
# Which SGLang flags carry secrets (one definition, shared with the launcher and the parsers).
_secrets = _module_utils("sglang_secrets")

# Builtin --speculative-algorithm values over 0.5.9 .. 0.5.23, from the table the emulator plays
# them by (plugins/module_utils/sglang_releases.py SPEC_ALGORITHMS_SINCE).
SPEC_ALGORITHMS = _releases.SPEC_ALGORITHMS
# EAGLE3 and STANDALONE drafts are separate models; NEXTN/EAGLE on MTP checkpoints reuse the
# target's own MTP layers (docs/reference/sglang.md §2.5).
SPEC_NEED_DRAFT_MODEL = ("EAGLE3", "STANDALONE")

# docs/architecture.md "Emulator": the faults the emulator understands. The table lives in
# plugins/module_utils/emulator_faults.py, which the emulator reads too; checking here fails a bad
# entry before the host is touched.
EMULATOR_FAULTS = _faults.FAULT_NAMES

# The ExecStart module per engine: the only line of the unit that differs between engines.
ENGINE_MODULES = {"sglang": "sglang.launch_server", "emulator": "tuner.emulator"}

# Role settings that map 1:1 onto a launch_server flag, in ExecStart order.
# kind: "str" (omitted when empty), "int"/"float" (omitted when None or ""), "bool" (bare flag).
FLAG_TABLE: tuple[tuple[str, str, str], ...] = (
    ("model_path", "--model-path", "str"),
    ("served_model_name", "--served-model-name", "str"),
    ("host", "--host", "str"),
    ("port", "--port", "int"),
    ("tp_size", "--tp-size", "int"),
    ("mem_fraction_static", "--mem-fraction-static", "float"),
    ("max_running_requests", "--max-running-requests", "int"),
    ("context_length", "--context-length", "int"),
    ("chunked_prefill_size", "--chunked-prefill-size", "int"),
    ("trust_remote_code", "--trust-remote-code", "bool"),
    ("enable_metrics", "--enable-metrics", "bool"),
    ("decode_log_interval", "--decode-log-interval", "int"),
    ("log_level", "--log-level", "str"),
    ("watchdog_timeout", "--watchdog-timeout", "float"),
    ("skip_server_warmup", "--skip-server-warmup", "bool"),
)

# Numeric settings: (kind, minimum, maximum, exclusive-minimum). None = unbounded.
NUMERIC_LIMITS: dict[str, tuple[str, float | None, float | None, bool]] = {
    "port": ("int", 1, 65535, False),
    "tp_size": ("int", 1, 4096, False),
    "mem_fraction_static": ("float", 0.0, 1.0, True),
    "max_running_requests": ("int", 1, None, False),
    "context_length": ("int", 1, None, False),
    # -1 turns chunked prefill off in SGLang (server_args.py --chunked-prefill-size help).
    "chunked_prefill_size": ("int", -1, None, False),
    "decode_log_interval": ("int", 1, None, False),
    "watchdog_timeout": ("float", 0.0, None, True),
    "emulator_startup_s": ("float", 0.0, None, False),
    "dist_init_port": ("int", 1, 65535, False),
}

# The API keys reach the server in SGLang's own `--config FILE.yaml` (its keys become flags,
# sglang/srt/server_args_config_parser.py ConfigArgumentMerger, 0.5.9; sglang/srt/utils/ in 0.5.23),
# never on the command line, which every local user reads in /proc/PID/cmdline. Role variable ->
# the file's key (= the flag without dashes).
SECRET_SETTINGS: dict[str, str] = {"api_key": "api-key", "admin_api_key": "admin-api-key"}
# A key travels as `Authorization: Bearer <key>` (SGLang 0.5.23 compares it with
# secrets.compare_digest, which refuses non-ASCII text) and reaches argparse as the value of
# --api-key, where a leading '-' would read as a flag; the launcher masks it wherever it appears in
# the log, which a very short key would turn into noise.
API_KEY_MIN = 8
API_KEY_MAX = 4096

# Flags a user may not pass through sglang_server_extra_flags, with the variable that owns them.
MANAGED_FLAGS: dict[str, str] = {row[1]: f"sglang_server_{row[0]}" for row in FLAG_TABLE}
MANAGED_FLAGS.update(
    {
        "--api-key": "sglang_server_api_key",
        "--admin-api-key": "sglang_server_admin_api_key",
        "--config": "sglang_server_api_key (the role passes its own --config file, and SGLang takes only one)",
        "--speculative-algorithm": "spec_algorithm",
        "--speculative-algo": "spec_algorithm",
        "--speculative-num-steps": "spec_steps",
        "--speculative-eagle-topk": "spec_topk",
        "--speculative-num-draft-tokens": "spec_draft_tokens",
        "--speculative-draft-model-path": "sglang_server_spec_draft_model_path",
        "--speculative-draft-model": "sglang_server_spec_draft_model_path",
        "--speculative-adaptive": "spec_schedule",
        "--speculative-adaptive-config": "spec_schedule",
        "--nnodes": "sglang_server_multinode_group",
        "--node-rank": "sglang_server_multinode_group",
        "--dist-init-addr": "sglang_server_multinode_group",
        "--emulator-profile": "sglang_server_emulator_profile",
        "--emulator-startup-s": "sglang_server_emulator_startup_s",
        "--emulator-fault": "sglang_server_emulator_faults",
        "--emulator-sglang-version": "sglang_server_sglang_version",
        "--tensor-parallel-size": "sglang_server_tp_size",
        "--tp": "sglang_server_tp_size",
    }
)

# SGLang flags whose value is a secret but that the role has no variable for (0.5.23's
# --ssl-keyfile-password; --watermark-config may hold the watermark keys inline): passed as extra
# flags they would sit in the process's command line for every local user to read.
SECRET_FLAGS_UNSUPPORTED = tuple(flag for flag in _secrets.SECRET_FLAGS if flag not in MANAGED_FLAGS)

_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_FLAG_RE = re.compile(r"^(--)?[a-z0-9][a-z0-9-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _is_unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def parse_whole_number(value: Any) -> int | None:
    """Strict integer parsing: ints and decimal-integer strings only.

    Why strict: `-e spec_steps=1.5` must not become 1, and YAML/JSON booleans are not numbers.
    Returns None when the value is not a whole number.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        return int(value.strip())
    return None


def parse_number(value: Any) -> float | None:
    """Strict real-number parsing for fractions and seconds (no booleans, no nan/inf)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str) and _FLOAT_RE.match(value.strip()):
        out = float(value.strip())
    else:
        return None
    return out if math.isfinite(out) else None


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


def parse_bool(value: Any) -> bool | None:
    """Booleans as YAML and `-e name=false` (a string) spell them; None when it is neither."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return None


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _range_text(lo: float | None, hi: float | None, exclusive_lo: bool, kind: str) -> str:
    noun = "a whole number" if kind == "int" else "a number"
    if lo is not None and hi is not None:
        if exclusive_lo:
            return f"{noun} above {lo:g} and at most {hi:g}"
        return f"{noun} from {lo:g} to {hi:g}"
    if lo is not None:
        return f"{noun} above {lo:g}" if exclusive_lo else f"{noun} of at least {lo:g}"
    return noun


def check_number(
    name: str, value: Any, kind: str, lo: float | None, hi: float | None, exclusive_lo: bool = False, hint: str = ""
) -> tuple[float | int | None, str | None]:
    """Parse one numeric setting; return (value, None) or (None, message naming the variable)."""
    parsed: float | int | None = parse_whole_number(value) if kind == "int" else parse_number(value)
    ok = parsed is not None
    if parsed is not None and lo is not None:
        ok = parsed > lo if exclusive_lo else parsed >= lo
    if parsed is not None and hi is not None:
        ok = ok and parsed <= hi
    if ok:
        return parsed, None
    msg = f"{name} must be {_range_text(lo, hi, exclusive_lo, kind)}{hint}; got {_fmt(value)}"
    return None, msg


# --------------------------------------------------------------------------------------------
# Speculative decoding
# --------------------------------------------------------------------------------------------


def spec_settings(
    steps: Any,
    topk: Any = None,
    draft_tokens: Any = None,
    algorithm: Any = None,
    max_steps: Any = 16,
    max_topk: Any = 16,
    draft_model_path: Any = "",
) -> dict[str, Any]:
    """Validate and normalise spec_steps/spec_topk/spec_draft_tokens/spec_algorithm.

    Returns {"errors": [...], "enabled": bool, "algorithm", "num_steps", "eagle_topk",
    "num_draft_tokens", "draft_model_path"}; the numbers are ints when there are no errors.
    SGLang would silently rewrite draft tokens to steps + 1 when topk is 1 (docs/reference/sglang.md
    §2.3) and crashes later on draft > steps*topk + 1 (issue #5160), so both are rejected here.
    """
    errors: list[str] = []
    max_steps_i = parse_whole_number(max_steps)
    max_topk_i = parse_whole_number(max_topk)
    if max_steps_i is None or max_steps_i < 1:
        errors.append(f"sglang_server_spec_max_steps must be a whole number of at least 1; got {_fmt(max_steps)}")
        max_steps_i = 1
    if max_topk_i is None or max_topk_i < 1:
        errors.append(f"sglang_server_spec_max_topk must be a whole number of at least 1; got {_fmt(max_topk)}")
        max_topk_i = 1

    out: dict[str, Any] = {
        "errors": errors,
        "enabled": False,
        "algorithm": None,
        "num_steps": 0,
        "eagle_topk": None,
        "num_draft_tokens": None,
        "draft_model_path": None,
    }

    n_steps, err = check_number(
        "spec_steps",
        0 if steps is None else steps,
        "int",
        0,
        max_steps_i,
        hint=" (0 turns speculative decoding off; the maximum is sglang_server_spec_max_steps)",
    )
    if err:
        errors.append(err)

    topk_given = not _is_unset(topk)
    n_topk, err = check_number(
        "spec_topk",
        topk if topk_given else 1,
        "int",
        1,
        max_topk_i,
        hint=" (the maximum is sglang_server_spec_max_topk)",
    )
    if err:
        errors.append(err)

    algo = None
    if _is_unset(algorithm):
        algo = "NEXTN"
    elif isinstance(algorithm, str) and algorithm.strip().upper() in SPEC_ALGORITHMS:
        algo = algorithm.strip().upper()
    else:
        errors.append(
            f"spec_algorithm must be one of {', '.join(SPEC_ALGORITHMS)} "
            f"(SGLang's builtin algorithms); got {_fmt(algorithm)}"
        )

    draft_given = not _is_unset(draft_tokens)
    n_draft = None
    if draft_given:
        n_draft = parse_whole_number(draft_tokens)
        if n_draft is None:
            errors.append(f"spec_draft_tokens must be a whole number; got {_fmt(draft_tokens)}")

    if n_steps is None or n_topk is None or (draft_given and n_draft is None):
        return out

    if n_steps == 0:
        if draft_given:
            errors.append(
                f"spec_draft_tokens={n_draft} contradicts spec_steps=0 (speculative decoding off): "
                "leave spec_draft_tokens unset"
            )
        if n_topk != 1:
            errors.append(
                f"spec_topk={n_topk} contradicts spec_steps=0 (speculative decoding off): leave spec_topk unset or 1"
            )
        return out

    if n_topk == 1:
        if draft_given and n_draft != n_steps + 1:
            errors.append(
                f"spec_draft_tokens={n_draft} contradicts spec_steps={n_steps} with spec_topk=1: SGLang forces "
                f"draft tokens to spec_steps + 1 = {n_steps + 1} when topk is 1; leave spec_draft_tokens unset "
                f"or set it to {n_steps + 1}"
            )
        n_draft = int(n_steps) + 1
    else:
        upper = n_steps * n_topk + 1
        if not draft_given:
            errors.append(
                f"spec_draft_tokens is required when spec_topk={n_topk} > 1: "
                f"a whole number from 2 to spec_steps * spec_topk + 1 = {upper}"
            )
        elif n_draft is None or not 2 <= n_draft <= upper:
            errors.append(
                f"spec_draft_tokens must be a whole number from 2 to spec_steps * spec_topk + 1 = {upper} "
                f"with spec_steps={n_steps} and spec_topk={n_topk}; got {n_draft}"
            )

    draft_model = "" if _is_unset(draft_model_path) else str(draft_model_path)
    if algo in SPEC_NEED_DRAFT_MODEL and not draft_model:
        errors.append(f"spec_algorithm={algo} needs a draft model: set sglang_server_spec_draft_model_path")

    out.update(
        enabled=True,
        algorithm=algo,
        num_steps=n_steps,
        eagle_topk=n_topk,
        num_draft_tokens=n_draft,
        draft_model_path=draft_model or None,
    )
    return out


# --------------------------------------------------------------------------------------------
# Adaptive speculation: spec_schedule
# --------------------------------------------------------------------------------------------

_adaptive = _module_utils("sglang_adaptive")

# --speculative-algorithm values with which SGLang keeps --speculative-adaptive on: 0.5.23
# speculative/adaptive_spec_params.py adaptive_unsupported_reason ("only EAGLE/EAGLE3 are
# supported"), checked after NEXTN became EAGLE (arg_groups/speculative_hook.py
# _resolve_speculative_algorithm_alias, called before _maybe_disable_adaptive). Any other algorithm
# makes SGLang drop the schedule with a warning and run static, which the role refuses up front.
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
# The per-bucket tuning keys SGLang reads (AdaptiveStepSlot.__init__ cfg.get(...)); others are typos.
ADAPTIVE_ENTRY_KEYS = (
    "candidate_steps",
    "ema_alpha",
    "update_interval",
    "warmup_batches",
    "down_hysteresis",
    "up_hysteresis",
    "ceiling_coeff",
)
# What SGLang does with each tuning key (0.5.23 AdaptiveStepSlot): ema_alpha weighs each verify
# step into the EMA ((1 - a) * ema + a * avg: outside (0, 1] it diverges or never moves);
# update_interval is a modulus (`% self.update_interval`: 0 divides by zero on the first decision);
# warmup_batches counts batches before the first decision; the hysteresis values are added to the
# thresholds (any real number, a string or a boolean is a type error or a silent 0/1 at run time);
# ceiling_coeff > 0 caps a step by the EMA, 0 turns the cap off. Checked here so the server never
# starts with a value it would fail on mid-run.
ADAPTIVE_ENTRY_BOUNDS: dict[str, tuple[Any, str]] = {
    "ema_alpha": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "update_interval": (lambda v: v >= 1, "of at least 1"),
    "warmup_batches": (lambda v: v >= 0, "of at least 0"),
    "down_hysteresis": (lambda v: True, "(steps of accepted drafts)"),
    "up_hysteresis": (lambda v: True, "(steps of accepted drafts)"),
    "ceiling_coeff": (lambda v: v >= 0, "of at least 0 (0 turns the ceiling off)"),
}
# spec_schedule values meaning "no schedule: static speculation" (besides unset and "").
SCHEDULE_OFF = ("none", "null")
# spec_schedule=default: SGLang's DEFAULT_ADAPTIVE_CONFIG (--speculative-adaptive without a file).
SCHEDULE_DEFAULT = "default"


def _schedule_off() -> dict[str, Any]:
    return {
        "errors": [],
        "enabled": False,
        "mode": None,
        "config": None,
        "text": "",
        "num_steps": None,
        "algorithm": None,
    }


def _parse_schedule_document(schedule: Any, errors: list[str]) -> Any:
    """The mapping a spec_schedule stands for ("default" and "off" handled by the caller)."""
    if isinstance(schedule, str):
        try:
            return json.loads(schedule)
        except ValueError as e:
            errors.append(
                "spec_schedule must be a JSON object such as '{\"1\": 4, \"16\": 3}', 'default' or 'none'; "
                f"it is not valid JSON ({e})"
            )
            return None
    return schedule


def _schedule_entry(key: str, value: Any, max_steps: int, errors: list[str]) -> dict[str, Any] | None:
    """One bucket as SGLang's JSON entry: a bare number pins it, a mapping is SGLang's own entry."""
    rng = f"0 to {max_steps} (sglang_server_spec_max_steps; 0 means no drafting)"
    if not isinstance(value, dict):
        steps = parse_whole_number(value)
        if steps is None or not 0 <= steps <= max_steps:
            errors.append(f"spec_schedule: bucket {key!r} must have steps from {rng}; got {_fmt(value)}")
            return None
        return {"candidate_steps": [steps]}
    unknown = sorted(str(k) for k in value if k not in ADAPTIVE_ENTRY_KEYS)
    if unknown:
        errors.append(
            f"spec_schedule: bucket {key!r} has unknown keys {', '.join(unknown)} "
            f"(SGLang reads {', '.join(ADAPTIVE_ENTRY_KEYS)})"
        )
        return None
    raw = value.get("candidate_steps")
    if not isinstance(raw, list) or not raw:
        errors.append(
            f"spec_schedule: bucket {key!r} needs candidate_steps, a non-empty list of steps from {rng}; got {_fmt(raw)}"
        )
        return None
    steps_list = [parse_whole_number(s) for s in raw]
    if any(s is None or not 0 <= s <= max_steps for s in steps_list):
        errors.append(f"spec_schedule: bucket {key!r} candidate_steps must be steps from {rng}; got {raw!r}")
        return None
    entry: dict[str, Any] = {"candidate_steps": sorted({int(s) for s in steps_list if s is not None})}
    for name in ADAPTIVE_ENTRY_KEYS[1:]:
        if name not in value:
            continue
        kind = "int" if name in ("update_interval", "warmup_batches") else "float"
        parsed: float | int | None = parse_whole_number(value[name]) if kind == "int" else parse_number(value[name])
        low, why = ADAPTIVE_ENTRY_BOUNDS[name]
        if parsed is None or not low(parsed):
            errors.append(
                f"spec_schedule: bucket {key!r} {name} must be {'a whole number' if kind == 'int' else 'a number'}"
                f" {why}; got {_fmt(value[name])}"
            )
            return None
        entry[name] = parsed
    return entry


def schedule_launch_steps(config: dict[str, dict[str, Any]]) -> int:
    """The --speculative-num-steps to launch a per-batch-size schedule with.

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
    costs the least capacity.
    """
    top = config[max(config, key=int)]["candidate_steps"]
    start = int(top[len(top) // 2])
    if start > 0:
        return start
    positive = sorted({s for entry in config.values() for s in entry["candidate_steps"] if s > 0})
    return positive[0] if positive else 0


def schedule_settings(
    schedule: Any,
    steps: Any = None,
    topk: Any = None,
    draft_tokens: Any = None,
    algorithm: Any = None,
    sglang_version: Any = None,
    max_steps: Any = 16,
) -> dict[str, Any]:
    """Validate and normalise the play-level spec_schedule (every error names it).

    Accepted: ``{"1": 4, "16": 3}`` (batch-size lower bound -> steps), SGLang's own per-batch-size
    JSON (``{"1": {"candidate_steps": [4]}, ...}``), either as a JSON string (``-e
    spec_schedule='...'``), or ``default`` (SGLang's DEFAULT_ADAPTIVE_CONFIG). Unset, "", none and
    null mean no schedule. Returns {"errors", "enabled", "mode" ("schedule" | "default" | None),
    "config" (SGLang's JSON as a dict, buckets in increasing order), "text" (the file's content),
    "num_steps" (the --speculative-num-steps to pass, None to let SGLang choose), "algorithm"}.
    ``steps``/``topk``/``draft_tokens``/``algorithm`` are the raw spec_* variables (None when unset).
    """
    out = _schedule_off()
    errors: list[str] = out["errors"]
    if _is_unset(schedule) or (isinstance(schedule, str) and schedule.strip().lower() in SCHEDULE_OFF):
        return out
    max_steps_i = parse_whole_number(max_steps)
    if max_steps_i is None or max_steps_i < 1:
        max_steps_i = 1  # spec_settings reports the bad limit

    mode = "default" if isinstance(schedule, str) and schedule.strip().lower() == SCHEDULE_DEFAULT else "schedule"
    config: dict[str, dict[str, Any]] | None = None
    if mode == "schedule":
        doc = _parse_schedule_document(schedule, errors)
        if doc is not None and not isinstance(doc, dict):
            errors.append(
                'spec_schedule must be a mapping from batch-size lower bound to steps such as {"1": 4, "16": 3}, '
                f"SGLang's JSON, 'default' or 'none'; got {_fmt(doc)}"
            )
        elif isinstance(doc, dict):
            config = {}
            seen: dict[int, Any] = {}
            for key, value in doc.items():
                bound = parse_whole_number(key)
                if bound is None or bound < 1:
                    errors.append(
                        f"spec_schedule: keys are batch-size lower bounds, whole numbers of at least 1; got {_fmt(key)}"
                    )
                    continue
                if bound in seen:
                    errors.append(f"spec_schedule: bucket {bound} is given twice ({_fmt(seen[bound])} and {_fmt(key)})")
                    continue
                seen[bound] = key
                entry = _schedule_entry(str(key), value, max_steps_i, errors)
                if entry is not None:
                    config[str(bound)] = entry
            if 1 not in seen:
                errors.append(
                    'spec_schedule must have bucket "1" (batch sizes from 1 up): SGLang routes a batch to the '
                    f"largest bucket at or below its size; got buckets {', '.join(sorted(map(str, seen), key=int))}"
                )
            if not errors and all(s == 0 for e in config.values() for s in e["candidate_steps"]):
                errors.append("spec_schedule drafts in no bucket (all steps 0): use spec_steps=0 for no speculation")
            config = {k: config[k] for k in sorted(config, key=int)} if not errors else None

    # What the SGLang release has (plugins/module_utils/sglang_releases.py).
    form = _releases.adaptive_config_form(sglang_version)
    if mode == "default" and form is None:
        errors.append(
            f"spec_schedule=default needs SGLang {_releases.ADAPTIVE_SINCE} or later (--speculative-adaptive); "
            f"sglang_server_sglang_version is {_fmt(sglang_version)}"
        )
    elif mode == "schedule" and form != "per-bs":
        errors.append(
            f"spec_schedule needs SGLang {_releases.ADAPTIVE_PER_BS_SINCE} or later (the per-batch-size "
            "--speculative-adaptive-config, sgl-project/sglang PR #24055); "
            f"sglang_server_sglang_version is {_fmt(sglang_version)}"
        )

    algo = "NEXTN" if _is_unset(algorithm) else str(algorithm).strip().upper()
    if algo not in ADAPTIVE_ALGORITHMS:
        errors.append(
            f"spec_schedule needs spec_algorithm {', '.join(ADAPTIVE_ALGORITHMS)} (SGLang runs adaptive speculation "
            f"for EAGLE/EAGLE3 only, NEXTN being EAGLE); got spec_algorithm={_fmt(algorithm)}"
        )
    if not _is_unset(topk) and parse_whole_number(topk) != 1:
        errors.append(
            f"spec_schedule needs spec_topk 1 (SGLang's adaptive speculation supports topk=1 only); got spec_topk={_fmt(topk)}"
        )

    num_steps: int | None = None
    if config is not None:
        num_steps = schedule_launch_steps(config)
    elif mode == "default" and form is not None:
        num_steps = None  # SGLang picks it (0.5.23: the middle of the default's candidates)
    if not _is_unset(steps):
        given = parse_whole_number(steps)
        candidates = (
            sorted({s for e in config.values() for s in e["candidate_steps"]})
            if config is not None
            else sorted({s for e in _adaptive.DEFAULT_ADAPTIVE_CONFIG.values() for s in e["candidate_steps"]})
            if form == "per-bs"
            else None
        )
        if given is None or given == 0 or (candidates is not None and given not in candidates):
            errors.append(
                f"spec_steps={_fmt(steps)} with spec_schedule: the launch depth must be one of the schedule's "
                f"positive steps {[c for c in (candidates or []) if c > 0] or ''} (SGLang requires a candidate); "
                "leave spec_steps unset to launch at the high-load bucket's depth"
            )
        else:
            num_steps = given
    if not _is_unset(draft_tokens) and (num_steps is None or parse_whole_number(draft_tokens) != num_steps + 1):
        errors.append(
            f"spec_draft_tokens={_fmt(draft_tokens)} contradicts spec_schedule: SGLang sets draft tokens to the "
            "steps + 1 under adaptive speculation; leave spec_draft_tokens unset"
        )
    if errors:
        return out
    text = json.dumps(config) + "\n" if config is not None else ""
    out.update(enabled=True, mode=mode, config=config, text=text, num_steps=num_steps, algorithm=algo)
    return out


# --------------------------------------------------------------------------------------------
# Multi-node tensor parallelism
# --------------------------------------------------------------------------------------------


def node_settings(
    hostname: str,
    group: Any = "",
    members: Iterable[str] | None = None,
    head_address: Any = "",
    dist_init_port: Any = 50000,
    dist_init_addr: Any = "",
) -> dict[str, Any]:
    """Derive --nnodes/--node-rank/--dist-init-addr from an inventory group.

    The group's order is the node order: its first host is rank 0 (the head, which serves HTTP);
    the others run schedulers only and answer /health from SGLang's dummy health server
    (sglang 0.5.9 entrypoints/engine.py:1040-1054). `head_address` is the address the other nodes
    reach the head at (the play passes the head's sglang_server_dist_init_host or ansible_host).
    """
    errors: list[str] = []
    out: dict[str, Any] = {"errors": errors, "nnodes": 1, "node_rank": 0, "dist_init_addr": None, "is_head": True}
    if _is_unset(group):
        return out
    members = list(members or [])
    if not members:
        errors.append(f"sglang_server_multinode_group={_fmt(group)} is not an inventory group with hosts")
        return out
    if hostname not in members:
        errors.append(f"sglang_server_multinode_group={_fmt(group)} does not contain this host ({hostname})")
        return out
    if len(members) == 1:
        return out
    addr = None if _is_unset(dist_init_addr) else str(dist_init_addr).strip()
    if addr is None:
        port, err = check_number("sglang_server_dist_init_port", dist_init_port, "int", 1, 65535)
        if err:
            errors.append(err)
        if _is_unset(head_address):
            errors.append(
                "the head of sglang_server_multinode_group has no address: set "
                "sglang_server_dist_init_host (or ansible_host) on it, or sglang_server_dist_init_addr"
            )
        elif port is not None:
            host = str(head_address).strip()
            addr = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    elif not re.match(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$", addr):
        errors.append(f"sglang_server_dist_init_addr must be HOST:PORT; got {_fmt(dist_init_addr)}")
    rank = members.index(hostname)
    out.update(nnodes=len(members), node_rank=rank, dist_init_addr=addr, is_head=rank == 0)
    return out


# --------------------------------------------------------------------------------------------
# Everything else
# --------------------------------------------------------------------------------------------


def normalise_flag(name: str) -> str:
    name = name.strip()
    return name if name.startswith("--") else f"--{name}"


def api_key_error(name: str, key: Any) -> str | None:
    """Why `key` cannot be an API key (a message naming `name`, never quoting the key), or None.

    Empty means no key. A key is one word of printable ASCII (see API_KEY_MIN above for why), so
    that it works over HTTP, survives SGLang's `--config` merge as one argparse value, and is
    masked in the log without masking ordinary text.
    """
    if key is None or key == "":
        return None
    if not isinstance(key, str):
        return f"{name} must be a string (from Ansible Vault or SGLANG_API_KEY)"
    if any(c in key for c in "\n\r"):
        return f"{name} must be one line: it has a line break (keys are sent as `Authorization: Bearer <key>`)"
    if any(not (0x21 <= ord(c) <= 0x7E) for c in key):
        return (
            f"{name} must be printable ASCII without blanks or control characters "
            "(keys are sent as `Authorization: Bearer <key>`)"
        )
    if key.startswith("-"):
        return (
            f"{name} must not start with '-': SGLang turns its --config file into command-line arguments, "
            "where argparse would read the key as a flag"
        )
    if not API_KEY_MIN <= len(key) <= API_KEY_MAX:
        return f"{name} must have {API_KEY_MIN} to {API_KEY_MAX} characters; it has {len(key)}"
    return None


def engine_module(engine: Any) -> str:
    """The Python module ExecStart runs for `engine` ('' for an unknown engine, which server_errors reports)."""
    return ENGINE_MODULES.get(str(engine), "")


def secret_config(settings: dict[str, Any]) -> list[str]:
    """The lines of SGLang's `--config` YAML file that carries the keys, one `flag: "value"` each.

    Values are JSON strings, which YAML reads as double-quoted scalars, so SGLang's
    yaml.safe_load and the launcher's sglang_secrets.parse_secret_config read the same text; a
    key like `true` or `0x1F` stays a string (a plain YAML scalar would turn it into a bool or an
    int, and SGLang would pass `--api-key true` / `31`). Empty when no key is set.
    """
    lines = []
    for key, flag in SECRET_SETTINGS.items():
        value = settings.get(key)
        if value:
            lines.append(f"{flag}: {json.dumps(str(value))}")
    return lines


def server_errors(settings: dict[str, Any]) -> list[str]:
    """Check the role's settings (keys are the variable names without `sglang_server_`).

    Every message starts with the variable's full name and says what is allowed, because the
    play stops on them before touching a host.
    """
    errors: list[str] = []
    engine = settings.get("engine")
    if engine not in ENGINE_MODULES:
        errors.append(f"sglang_server_engine must be one of {', '.join(ENGINE_MODULES)}; got {_fmt(engine)}")

    for key, (kind, lo, hi, excl) in NUMERIC_LIMITS.items():
        if key not in settings or _is_unset(settings[key]):
            continue
        err = check_number(f"sglang_server_{key}", settings[key], kind, lo, hi, excl)[1]
        if err:
            errors.append(err)
    if _is_unset(settings.get("port")):
        errors.append("sglang_server_port must be a whole number from 1 to 65535; got nothing")
    if _is_unset(settings.get("tp_size")):
        errors.append("sglang_server_tp_size must be a whole number of at least 1; got nothing")

    model = settings.get("model_path")
    if _is_unset(model):
        errors.append("sglang_server_model_path must be set: the directory holding the model weights")
    elif not str(model).startswith("/"):
        errors.append(f"sglang_server_model_path must be an absolute path on the host; got {_fmt(model)}")
    if _is_unset(settings.get("host")):
        errors.append("sglang_server_host must be the address to listen on (0.0.0.0 for every interface)")

    for key in ("trust_remote_code", "enable_metrics", "skip_server_warmup"):
        if key in settings and parse_bool(settings[key]) is None:
            errors.append(f"sglang_server_{key} must be true or false; got {_fmt(settings[key])}")

    for key in SECRET_SETTINGS:
        err = api_key_error(f"sglang_server_{key}", settings.get(key))
        if err:
            errors.append(err)

    extra = settings.get("extra_flags") or {}
    if not isinstance(extra, dict):
        errors.append(f"sglang_server_extra_flags must be a mapping of flag name to value; got {type(extra).__name__}")
        extra = {}
    for name, value in extra.items():
        if not isinstance(name, str) or not _FLAG_RE.fullmatch(name.strip()):
            errors.append(f"sglang_server_extra_flags: {_fmt(name)} is not a flag name like 'attention-backend'")
            continue
        flag = normalise_flag(name)
        if flag in MANAGED_FLAGS:
            errors.append(f"sglang_server_extra_flags must not set {flag}: use {MANAGED_FLAGS[flag]}")
        elif flag in SECRET_FLAGS_UNSUPPORTED:
            errors.append(
                f"sglang_server_extra_flags must not set {flag}: its value is a secret, and extra flags are "
                "on the server's command line, which every local user can read in /proc"
            )
        if isinstance(value, dict):
            errors.append(
                f"sglang_server_extra_flags: the value of {flag} must be a string, number, true/false or a list"
            )

    env = settings.get("environment") or {}
    if not isinstance(env, dict):
        errors.append("sglang_server_environment must be a mapping of variable name to value")
        env = {}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            errors.append(f"sglang_server_environment: {_fmt(name)} is not an environment variable name")
        if isinstance(value, (dict, list)) or (isinstance(value, str) and any(c in value for c in "\n\r\0")):
            errors.append(f"sglang_server_environment: the value of {name} must be one line of text")

    faults = settings.get("emulator_faults") or []
    profile = settings.get("emulator_profile")
    if engine == "emulator" and not _is_unset(profile):
        # A controller-side file (copied to the host); the only check here that reads the disk.
        path = os.path.abspath(os.path.expanduser(str(profile)))
        if not os.path.isfile(path):
            errors.append(f"sglang_server_emulator_profile must name a file on the controller; {path} does not exist")
    startup = settings.get("emulator_startup_s")
    if engine != "emulator":
        if faults:
            errors.append("sglang_server_emulator_faults only applies to sglang_server_engine=emulator")
        if not _is_unset(profile):
            errors.append("sglang_server_emulator_profile only applies to sglang_server_engine=emulator")
        if not _is_unset(startup):
            errors.append("sglang_server_emulator_startup_s only applies to sglang_server_engine=emulator")
    if not isinstance(faults, list):
        errors.append("sglang_server_emulator_faults must be a list like ['kv-oom', 'slow-startup=10']")
        faults = []
    for fault in faults:
        try:
            _faults.parse_fault(fault)
        except _faults.FaultSpecError as e:
            errors.append(f"sglang_server_emulator_faults: {e}")
    errors.extend(emulator_version_errors(settings))
    return errors


# --------------------------------------------------------------------------------------------
# Paths, names and versions (before any host is touched)
# --------------------------------------------------------------------------------------------

# systemd.unit(5) "unit names": letters, digits, ':', '_', '.', '-' and one '@' before an instance;
# '\' escapes are refused too (the stem also names files and the journal identifier).
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.-]+(@[A-Za-z0-9:_.-]+)?\.service$")
# useradd(8)'s portable names (Debian's default NAME_REGEX without the trailing '$').
_NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# Host paths that go into unit-file directives (WorkingDirectory=, ReadWritePaths=, EnvironmentFile=,
# LoadCredential=) and into `install`/`mkdir`: no blanks (ReadWritePaths= splits on them), no '%'
# (systemd specifiers), no quotes, backslashes or control characters.
_HOST_PATH_RE = re.compile(r"^(/[A-Za-z0-9._@+,:=~-]+)+$")
# PEP 440 public versions as pip takes them for `sglang==X` (0.5.9, 0.5.10rc0, 0.5.5.post3, 1.0.dev2).
_VERSION_RE = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")
_DEVICE_RE = re.compile(r"^[A-Za-z0-9/_.:*-]+( [rwm]{1,3})?$")
_DIRECTIVE_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_LIMIT_RE = re.compile(r"^[A-Za-z0-9:]*$")
# Directories the role creates and chowns must not be a system directory (state_dir=/var/lib
# would hand /var/lib to the service user).
_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt"}
    | {"/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"}
    | {f"/usr/{d}" for d in ("bin", "etc", "games", "include", "lib", "lib32", "lib64", "libexec", "local", "sbin")}
    | {f"/usr/{d}" for d in ("share", "src")}
    | {f"/usr/local/{d}" for d in ("bin", "etc", "include", "lib", "sbin", "share", "src")}
    | {f"/var/{d}" for d in ("backups", "cache", "lib", "local", "lock", "log", "mail", "opt", "run", "spool", "tmp")}
    | {"/etc/systemd", "/etc/systemd/system", "/etc/default", "/etc/ssh", "/etc/sudoers.d", "/run/user"}
)
# Variables that name a path on the host, and whether the role creates/owns it (system dirs refused).
HOST_DIRS = ("install_dir", "venv_dir", "state_dir", "config_dir")
HOST_FILES = ("cuda_env_file", "python")
# Controller-side paths: absolute and normalised too (relative ones resolve against wherever
# ansible-playbook runs); the emulator profile is checked in server_errors (it may be relative).
CONTROLLER_DIRS = ("wheelhouse_dir", "emulator_wheelhouse_dir")


def _one_line(value: Any) -> bool:
    return isinstance(value, str) and not any(c in value for c in "\n\r\0")


def _under(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or inside it (both normalised)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def path_error(name: str, value: Any, strict: bool = True) -> str | None:
    """Why `value` is not an absolute, normalised path (with only `_HOST_PATH_RE` characters when strict)."""
    if not isinstance(value, str) or value.strip() == "":
        return f"{name} must be an absolute path; got {_fmt(value)}"
    if not _one_line(value):
        return f"{name} must be one line (an absolute path); got {_fmt(value)}"
    if not value.startswith("/"):
        return f"{name} must be an absolute path; got {_fmt(value)}"
    if posixpath.normpath(value) != value or value.startswith("//"):
        return (
            f"{name} must be a normalised absolute path (no '..', '.', '//' or trailing '/'); "
            f"got {_fmt(value)}, did you mean {posixpath.normpath('/' + value.lstrip('/'))!r}?"
        )
    if strict and not _HOST_PATH_RE.fullmatch(value):
        return (
            f"{name} may hold only letters, digits and . _ @ + , : = ~ - between its slashes "
            f"(it goes into the unit file); got {_fmt(value)}"
        )
    return None


def host_errors(settings: dict[str, Any]) -> list[str]:
    """Check every path-forming, name and version variable (keys without `sglang_server_`).

    These name files the role writes as root (`<config_dir>/<unit stem>.env`, the unit under
    /etc/systemd/system, `last-good/<stem>/`) and lines of the unit file, so they are checked
    before any host is contacted: `-e sglang_server_unit_name=../../etc/passwd` must never reach a
    `mkdir`.
    """
    errors: list[str] = []
    unit = settings.get("unit_name")
    if (
        not isinstance(unit, str)
        or not _UNIT_RE.fullmatch(unit)
        or ".." in unit
        or len(unit) > 255
        or "@.service" in unit
    ):
        errors.append(
            "sglang_server_unit_name must be a systemd service name such as sglang-qwen.service (letters, digits "
            f"and : _ . -, optionally one @instance, ending in .service; no '/' or '..'); got {_fmt(unit)}"
        )

    for key in ("user", "group"):
        value = settings.get(key)
        if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
            errors.append(
                f"sglang_server_{key} must be a user/group name (lower-case letters, digits, _ and -, "
                f"at most 32); got {_fmt(value)}"
            )
        elif value == "root":
            errors.append(f"sglang_server_{key} must not be root: the server runs as a dedicated system account")
    groups = settings.get("user_groups")
    if not isinstance(groups, list):
        errors.append(f"sglang_server_user_groups must be a list of group names; got {_fmt(groups)}")
    else:
        for value in groups:
            if not isinstance(value, str) or not _NAME_RE.fullmatch(value) or value == "root":
                errors.append(f"sglang_server_user_groups: {_fmt(value)} is not a group name (or is root)")

    paths: dict[str, str] = {}
    for key in HOST_DIRS + HOST_FILES:
        err = path_error(f"sglang_server_{key}", settings.get(key))
        if err:
            errors.append(err)
        else:
            paths[key] = settings[key]
    for key in HOST_DIRS:
        if key in paths and paths[key] in _SYSTEM_DIRS:
            errors.append(
                f"sglang_server_{key} must be a directory of its own (the role creates it and sets its owner "
                f"and mode), not the system directory {paths[key]}"
            )
    state = paths.get("state_dir")
    if state:
        for key in ("install_dir", "venv_dir", "config_dir"):
            if key in paths and _under(paths[key], state):
                errors.append(
                    f"sglang_server_{key} must not be inside sglang_server_state_dir ({state}), which the service "
                    "user owns: root installs and reads what is there"
                )
    rw = settings.get("read_write_paths")
    if not isinstance(rw, list):
        errors.append(f"sglang_server_read_write_paths must be a list of absolute paths; got {_fmt(rw)}")
    else:
        for i, value in enumerate(rw):
            err = path_error(f"sglang_server_read_write_paths[{i}]", value)
            if err:
                errors.append(err)

    for key in ("model_path", "spec_draft_model_path"):
        value = settings.get(key)
        if key == "spec_draft_model_path" and _is_unset(value):
            continue
        if _is_unset(value):
            continue  # server_errors says the model path is required
        err = path_error(f"sglang_server_{key}", value, strict=False)
        if err:
            errors.append(err)

    for key in CONTROLLER_DIRS:
        value = settings.get(key)
        if _is_unset(value):
            continue
        err = path_error(f"sglang_server_{key}", value, strict=False)
        if err:
            errors.append(err + " (a directory on the controller)")

    version = settings.get("sglang_version")
    if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
        errors.append(
            "sglang_server_sglang_version must be a release version such as 0.5.9 (PEP 440: N.N[.N...] with "
            f"optional aN/bN/rcN, .postN, .devN); got {_fmt(version)}"
        )
    packages = settings.get("pip_packages")
    if not isinstance(packages, list) or not packages:
        errors.append(f"sglang_server_pip_packages must be a non-empty list of requirements; got {_fmt(packages)}")
    else:
        for value in packages:
            if not _one_line(value) or not value.strip():
                errors.append(f"sglang_server_pip_packages: {_fmt(value)} is not a one-line requirement")
            elif value.strip().startswith("-"):
                errors.append(
                    f"sglang_server_pip_packages: {_fmt(value)} is a pip option, not a requirement: "
                    "put options in sglang_server_pip_extra_args"
                )

    served = settings.get("served_model_name")
    if served is not None and not _one_line(str(served)):
        errors.append("sglang_server_served_model_name must be one line (it is in the unit's Description=)")
    devices = settings.get("device_allow")
    if not isinstance(devices, list):
        errors.append(f"sglang_server_device_allow must be a list like ['char-nvidia rw']; got {_fmt(devices)}")
    else:
        for value in devices:
            if not isinstance(value, str) or not _DEVICE_RE.fullmatch(value):
                errors.append(
                    f"sglang_server_device_allow: {_fmt(value)} is not a DeviceAllow= value like 'char-nvidia rw'"
                )
    extra = settings.get("unit_extra")
    if not isinstance(extra, dict):
        errors.append(f"sglang_server_unit_extra must be a mapping of directive to value; got {_fmt(extra)}")
    else:
        for name, value in extra.items():
            values = value if isinstance(value, list) else [value]
            if not isinstance(name, str) or not _DIRECTIVE_RE.fullmatch(name):
                errors.append(f"sglang_server_unit_extra: {_fmt(name)} is not a directive name like CPUAffinity")
            elif any(isinstance(v, (dict, list)) or not _one_line(str(v)) for v in values):
                errors.append(f"sglang_server_unit_extra: the value of {name} must be one line (or a list of lines)")
    for key in ("limit_nofile", "limit_memlock"):
        value = settings.get(key)
        if value is not None and not _LIMIT_RE.fullmatch(str(value)):
            errors.append(f"sglang_server_{key} must be a number, 'infinity' or empty; got {_fmt(value)}")
    return errors


def emulator_version_errors(settings: dict[str, Any]) -> list[str]:
    """The emulator plays the SGLang release the role installs (sglang_server_sglang_version,
    passed as --emulator-sglang-version); a release it does not model fails here, before the host."""
    version = settings.get("sglang_version")
    if settings.get("engine") != "emulator" or _is_unset(version):
        return []
    text = str(version).strip()
    base = ".".join(str(n) for n in _releases.release_key(text)[:3])
    if text in _releases.EMULATED_RELEASES or (base in _releases.EMULATED_RELEASES and text.startswith(base + ".post")):
        return []
    return [
        f"sglang_server_sglang_version={_fmt(version)} is not emulated: with sglang_server_engine=emulator "
        f"use one of {', '.join(_releases.EMULATED_RELEASES)}"
    ]


def _num_text(value: Any, kind: str) -> str:
    if kind == "int":
        parsed = parse_whole_number(value)
        if parsed is None:
            raise ValueError(f"not a whole number: {value!r}")
        return str(parsed)
    parsed_f = parse_number(value)
    if parsed_f is None:
        raise ValueError(f"not a number: {value!r}")
    return f"{parsed_f:g}" if parsed_f != int(parsed_f) else str(int(parsed_f))


def server_flags(settings: dict[str, Any]) -> list[list[str]]:
    """The launch_server arguments, one [flag, value...] entry per ExecStart line.

    `settings` holds the role variables without the `sglang_server_` prefix plus `spec`
    (from spec_settings) and `node` (from node_settings); it must pass server_errors first.
    """
    lines: list[list[str]] = []
    for key, flag, kind in FLAG_TABLE:
        value = settings.get(key)
        if kind == "bool":
            if parse_bool(value):
                lines.append([flag])
        elif not _is_unset(value):
            lines.append([flag, str(value).strip() if kind == "str" else _num_text(value, kind)])

    spec = settings.get("spec") or {}
    schedule = settings.get("schedule") or {}
    if schedule.get("enabled"):
        # Adaptive speculation (spec_schedule): topk 1 and draft tokens = steps + 1 are what SGLang
        # sets under it (_init_adaptive_speculative_params); with `default` and no spec_steps all
        # three are left to SGLang, which asserts they come together.
        lines.append(["--speculative-algorithm", schedule["algorithm"]])
        if spec.get("draft_model_path"):
            lines.append(["--speculative-draft-model-path", spec["draft_model_path"]])
        if schedule.get("num_steps") is not None:
            lines.append(["--speculative-num-steps", str(schedule["num_steps"])])
            lines.append(["--speculative-eagle-topk", "1"])
            lines.append(["--speculative-num-draft-tokens", str(int(schedule["num_steps"]) + 1)])
        lines.append(["--speculative-adaptive"])
        if schedule.get("config") is not None:
            lines.append(["--speculative-adaptive-config", str(settings["adaptive_config_path"])])
    elif spec.get("enabled"):
        lines.append(["--speculative-algorithm", spec["algorithm"]])
        if spec.get("draft_model_path"):
            lines.append(["--speculative-draft-model-path", spec["draft_model_path"]])
        lines.append(["--speculative-num-steps", str(spec["num_steps"])])
        lines.append(["--speculative-eagle-topk", str(spec["eagle_topk"])])
        lines.append(["--speculative-num-draft-tokens", str(spec["num_draft_tokens"])])

    node = settings.get("node") or {}
    if int(node.get("nnodes") or 1) > 1:
        lines.append(["--nnodes", str(node["nnodes"])])
        lines.append(["--node-rank", str(node["node_rank"])])
        lines.append(["--dist-init-addr", str(node["dist_init_addr"])])

    extra = settings.get("extra_flags") or {}
    for name in sorted(extra):
        value = extra[name]
        flag = normalise_flag(name)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is True:
                lines.append([flag])
            elif item is False or _is_unset(item):
                continue
            else:
                lines.append([flag, str(item)])

    if settings.get("engine") == "emulator":
        if not _is_unset(settings.get("sglang_version")):
            # the emulator plays the release the role would install (tuner/emulator/versions.py)
            lines.append(["--emulator-sglang-version", str(settings["sglang_version"]).strip()])
        if not _is_unset(settings.get("emulator_profile_path")):
            lines.append(["--emulator-profile", str(settings["emulator_profile_path"])])
        if not _is_unset(settings.get("emulator_startup_s")):
            lines.append(["--emulator-startup-s", _num_text(settings["emulator_startup_s"], "float")])
        for fault in settings.get("emulator_faults") or []:
            lines.append(["--emulator-fault", str(fault).strip()])
    return lines


# --------------------------------------------------------------------------------------------
# systemd quoting
# --------------------------------------------------------------------------------------------

_EXEC_SAFE = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def systemd_exec_quote(word: Any) -> str:
    """Quote one ExecStart argument so systemd passes it through unchanged.

    systemd.service(5) "Command lines": `%` starts a specifier (write `%%`), `$` starts a
    variable (write `$$`), quotes and backslashes are escapes, blanks split words.
    """
    text = str(word)
    if text and _EXEC_SAFE.fullmatch(text):
        return text
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("%", "%%")
        .replace("$", "$$")
        .replace("\n", "\\n")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def systemd_env_assign(name: str, value: Any) -> str:
    """One `NAME="value"` line for an EnvironmentFile (no specifier or variable expansion there).

    Inside double quotes systemd's env-file parser treats backslash as an escape for `"`, `\\`,
    `$` and the backtick, as a shell does, so those four are escaped and everything else is literal.
    """
    if not _ENV_NAME_RE.fullmatch(str(name)):
        raise ValueError(f"not an environment variable name: {name!r}")
    text = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"environment value of {name} must be one line")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    return f'{name}="{escaped}"'


class FilterModule:
    """Ansible entry point: the filters the sglang_server role uses."""

    def filters(self) -> dict[str, Any]:
        return {
            "sglang_spec": spec_settings,
            "sglang_schedule": schedule_settings,
            "sglang_node": node_settings,
            "sglang_server_errors": server_errors,
            "sglang_server_host_errors": host_errors,
            "sglang_flags": server_flags,
            "sglang_secret_config": secret_config,
            "sglang_engine_module": engine_module,
            "systemd_exec_quote": systemd_exec_quote,
            "systemd_env_assign": systemd_env_assign,
        }
