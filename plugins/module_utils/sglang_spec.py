"""The play-level speculative-decoding variables (spec_*): validated and normalised once, for the
role (the `sglang_spec` and `sglang_schedule` filters) and for the tuner, which plans its sweeps with
the same rules (`sglang_utils.sglang_spec`).

- spec_settings: spec_algorithm/steps/topk/draft_tokens -> the flags' values, or the errors.
- schedule_settings: spec_schedule (adaptive speculation) -> SGLang's per-batch-size JSON and the
  launch depth.

Standard library only; Ansible is not imported.
"""

from __future__ import annotations

import json
from typing import Any

from . import sglang_adaptive as _adaptive
from . import sglang_releases as _releases
from .sglang_checks import check_number, fmt, is_unset, parse_number, parse_whole_number

# Builtin --speculative-algorithm values over 0.5.9 .. 0.5.23, from the table the emulator plays
# them by (plugins/module_utils/sglang_releases.py SPEC_ALGORITHMS_SINCE).
SPEC_ALGORITHMS = _releases.SPEC_ALGORITHMS
# EAGLE3 and STANDALONE drafts are separate models; NEXTN/EAGLE on MTP checkpoints reuse the
# target's own MTP layers (docs/reference/sglang.md §2.5).
SPEC_NEED_DRAFT_MODEL = ("EAGLE3", "STANDALONE", "DFLASH")
# The algorithms whose draft tokens SGLang rewrites to steps + 1 when topk is 1: the rule sits in
# server_args.py's `if self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE")` block (0.5.9
# server_args.py:2443-2450, 0.5.23 speculative_hook.py:1253-1265; NEXTN is EAGLE by then)
TOPK1_RULE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


def _uno_tree_errors(steps: int, topk: int, q: int | None) -> list[str]:
    """What SGLang's UNO tree mode (topk > 1) refuses at start-up, in its words' order: the verify
    width Q (spec_draft_tokens) against the draft width F = steps + 1 and the candidates K = topk
    (0.5.20-0.5.23 arg_groups/speculative_hook.py `_handle_uno`)."""
    if q is None:
        return [f"spec_draft_tokens is required with spec_algorithm=UNO and spec_topk={topk} > 1: its verify width Q"]
    f = steps + 1
    capacity, width = 1, 1
    for _depth in range(steps):
        width *= topk
        capacity += width
        if capacity >= q:
            break
    limits = [
        (q < f, f"at least the draft width spec_steps + 1 = {f}"),
        (q > 128, "at most 128 verify nodes"),
        (q * topk > 2048, f"at most 2048 / spec_topk = {2048 // topk} (Q x K <= 2048)"),
        (q > capacity, f"at most the tree's {capacity} nodes for spec_steps={steps}, spec_topk={topk}"),
        (q - 1 > topk * (steps - 1) + 1, f"at most spec_topk x (spec_steps - 1) + 2 = {topk * (steps - 1) + 2}"),
    ]
    return [
        f"spec_draft_tokens={q} with spec_algorithm=UNO in tree mode (spec_topk={topk}) must be {why}"
        for bad, why in limits
        if bad
    ][:1]


def max_tree_draft_tokens(steps: int, topk: int) -> int:
    """The most draft tokens a tree of `steps` levels and `topk` branches can verify: SGLang picks
    num_draft_tokens - 1 of the draft's candidates, topk at the first step and topk x topk at each
    later one (speculative/eagle_utils.py `organize_draft_results`: `torch.topk(score_list,
    num_draft_token - 1)` over `topk + (num_steps - 1) * topk` rows of topk), plus the verified
    token; asking for more fails inside the kernels (`selected index k out of range`, sglang#5160).
    SGLang's own docs launch steps 3, topk 4, draft 16 (above steps x topk + 1 = 13)."""
    return topk + (steps - 1) * topk * topk + 1


# --------------------------------------------------------------------------------------------
# Speculative decoding
# --------------------------------------------------------------------------------------------


# The role's defaults for sglang_server_spec_max_steps / _max_topk (roles/sglang_server/defaults/main.yml).
DEFAULT_MAX_STEPS = 16
DEFAULT_MAX_TOPK = 16


def draft_model_errors(algo: str | None, draft_model: str) -> list[str]:
    """An algorithm that loads its own draft model without one (SGLang fills the path in only for
    targets with a built-in MTP head): one rule for a static server and a schedule alike."""
    if algo in SPEC_NEED_DRAFT_MODEL and not draft_model:
        return [f"spec_algorithm={algo} needs a draft model: set sglang_server_spec_draft_model_path"]
    return []


def spec_settings(
    steps: Any,
    topk: Any = None,
    draft_tokens: Any = None,
    algorithm: Any = None,
    max_steps: Any = DEFAULT_MAX_STEPS,
    max_topk: Any = DEFAULT_MAX_TOPK,
    draft_model_path: Any = "",
    steps_name: str = "spec_steps",
    algorithm_name: str = "spec_algorithm",
) -> dict[str, Any]:
    """Validate and normalise spec_steps/spec_topk/spec_draft_tokens/spec_algorithm.

    `steps_name` and `algorithm_name` are the variables the values came from, for the messages:
    the role passes its defaults' names (sglang_server_spec_steps_default, ...) when the play
    variables are unset, so a bad default is not reported under a variable the user never set.

    Returns {"errors": [...], "enabled": bool, "algorithm", "num_steps", "eagle_topk",
    "num_draft_tokens", "draft_model_path"}; the numbers are ints when there are no errors.
    SGLang would silently rewrite draft tokens to steps + 1 when topk is 1 (docs/reference/sglang.md
    §2.3) and crashes later on more draft tokens than the tree holds (`max_tree_draft_tokens`,
    issue #5160), so both are rejected here.
    """
    errors: list[str] = []
    max_steps_i = parse_whole_number(max_steps)
    max_topk_i = parse_whole_number(max_topk)
    if max_steps_i is None or max_steps_i < 1:
        errors.append(f"sglang_server_spec_max_steps must be a whole number of at least 1; got {fmt(max_steps)}")
        max_steps_i = 1
    if max_topk_i is None or max_topk_i < 1:
        errors.append(f"sglang_server_spec_max_topk must be a whole number of at least 1; got {fmt(max_topk)}")
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
        steps_name,
        0 if steps is None else steps,
        "int",
        0,
        max_steps_i,
        hint=" (0 turns speculative decoding off; the maximum is sglang_server_spec_max_steps)",
    )
    if err:
        errors.append(err)

    topk_given = not is_unset(topk)
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
    if is_unset(algorithm):
        algo = "NEXTN"
    elif isinstance(algorithm, str) and algorithm.strip().upper() in SPEC_ALGORITHMS:
        algo = algorithm.strip().upper()
    else:
        errors.append(
            f"{algorithm_name} must be one of {', '.join(SPEC_ALGORITHMS)} "
            f"(SGLang's builtin algorithms); got {fmt(algorithm)}"
        )

    draft_given = not is_unset(draft_tokens)
    n_draft = None
    if draft_given:
        n_draft = parse_whole_number(draft_tokens)
        if n_draft is None:
            errors.append(f"spec_draft_tokens must be a whole number; got {fmt(draft_tokens)}")

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

    if algo in ("DFLASH", "DSPARK") or (algo == "UNO" and n_topk == 1):
        # SGLang runs DFLASH, DSPARK and UNO's linear mode at one step with topk 1 and overrides any
        # other value with only a warning ("DFLASH only supports speculative_num_steps == 1;
        # overriding ...": 0.5.12 srt/server_args.py, 0.5.23 arg_groups/speculative_hook.py; "DSpark
        # only supports ..." 0.5.18+; "UNO uses %s=1; overriding %s." 0.5.20+). Their verify window is
        # the draft tokens: DFLASH's block size and DSPARK's gamma + 1, which SGLang reads from the
        # draft model's config when not given (and refuses a value that differs from it: "DSpark
        # speculative_num_draft_tokens must equal gamma + 1"), so the role passes it only when given;
        # UNO's linear width, which SGLang requires ("UNO requires --speculative-num-draft-tokens")
        window = {
            "DFLASH": "its block size; unset, SGLang reads it from the draft model's config",
            "DSPARK": "gamma + 1; unset, SGLang reads gamma from the draft model's config",
            "UNO": "its linear width, which SGLang requires",
        }[algo]
        if n_steps != 1:
            errors.append(
                f"spec_steps={n_steps} with spec_algorithm={algo}: SGLang runs {algo} at one step (it overrides "
                f"speculative_num_steps to 1); set spec_steps 1 and size its verify window with spec_draft_tokens "
                f"({window})"
            )
        if n_topk != 1:
            errors.append(
                f"spec_topk={n_topk} with spec_algorithm={algo}: SGLang overrides speculative_eagle_topk to 1; "
                "leave spec_topk unset or 1"
            )
        if draft_given and (n_draft is None or n_draft < 2):
            errors.append(f"spec_draft_tokens must be a whole number of at least 2; got {fmt(draft_tokens)}")
        if algo == "UNO" and not draft_given:
            errors.append(f"spec_draft_tokens is required with spec_algorithm=UNO: {window}")
    elif algo == "UNO":
        # tree mode (topk > 1): the verify width Q is the draft tokens, the draft width F steps + 1
        # (0.5.20-0.5.23 arg_groups/speculative_hook.py _handle_uno's checks, in its order)
        errors += _uno_tree_errors(int(n_steps), int(n_topk), n_draft if draft_given else None)
    elif algo == "NGRAM" and n_topk != 1:
        # SGLang sets NGRAM's topk to --speculative-ngram-max-bfs-breadth whatever it is given (0.5.9
        # server_args.py:2475, 0.5.23 speculative_hook.py:1312): the topk recorded would not run
        errors.append(
            f"spec_topk={n_topk} with spec_algorithm=NGRAM: SGLang sets NGRAM's topk from "
            "--speculative-ngram-max-bfs-breadth (sglang_server_extra_flags); leave spec_topk unset or 1"
        )
    elif n_topk == 1 and algo not in TOPK1_RULE_ALGORITHMS:
        # NGRAM keeps the draft tokens it is given (its match window), DSPARK and UNO take them as
        # given (UNO as its linear width): SGLang's steps + 1 rewrite is the EAGLE block's only
        if draft_given and (n_draft is None or n_draft < 2):
            errors.append(f"spec_draft_tokens must be a whole number of at least 2; got {fmt(draft_tokens)}")
        n_draft = n_draft if draft_given else int(n_steps) + 1
    elif n_topk == 1:
        if draft_given and n_draft != n_steps + 1:
            errors.append(
                f"spec_draft_tokens={n_draft} contradicts spec_steps={n_steps} with spec_topk=1: SGLang forces "
                f"draft tokens to spec_steps + 1 = {n_steps + 1} when topk is 1; leave spec_draft_tokens unset "
                f"or set it to {n_steps + 1}"
            )
        n_draft = int(n_steps) + 1
    else:
        upper = max_tree_draft_tokens(int(n_steps), int(n_topk))
        bound = "spec_topk + (spec_steps - 1) * spec_topk^2 + 1"
        if not draft_given:
            errors.append(
                f"spec_draft_tokens is required when spec_topk={n_topk} > 1: a whole number from 2 to {bound} = {upper}"
            )
        elif n_draft is None or not 2 <= n_draft <= upper:
            errors.append(
                f"spec_draft_tokens must be a whole number from 2 to {bound} = {upper} "
                f"with spec_steps={n_steps} and spec_topk={n_topk}; got {n_draft}"
            )

    draft_model = "" if is_unset(draft_model_path) else str(draft_model_path)
    errors += draft_model_errors(algo, draft_model)
    if algo == "UNO" and draft_model:
        # "UNO reuses the target model and does not accept --speculative-draft-model-path" (0.5.20+)
        errors.append(
            "spec_algorithm=UNO reuses the target model and takes no draft model: leave "
            "sglang_server_spec_draft_model_path empty"
        )

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
        "draft_model_path": None,
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
            errors.append(f"spec_schedule: bucket {key!r} must have steps from {rng}; got {fmt(value)}")
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
            f"spec_schedule: bucket {key!r} needs candidate_steps, a non-empty list of steps from {rng}; got {fmt(raw)}"
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
                f" {why}; got {fmt(value[name])}"
            )
            return None
        entry[name] = parsed
    return entry


def schedule_settings(
    schedule: Any,
    steps: Any = None,
    topk: Any = None,
    draft_tokens: Any = None,
    algorithm: Any = None,
    sglang_version: Any = None,
    max_steps: Any = DEFAULT_MAX_STEPS,
    draft_model_path: Any = None,
) -> dict[str, Any]:
    """Validate and normalise the play-level spec_schedule (every error names it).

    Accepted: ``{"1": 4, "16": 3}`` (batch-size lower bound -> steps), SGLang's own per-batch-size
    JSON (``{"1": {"candidate_steps": [4]}, ...}``), either as a JSON string (``-e
    spec_schedule='...'``), or ``default`` (SGLang's DEFAULT_ADAPTIVE_CONFIG). Unset, "", none and
    null mean no schedule. Returns {"errors", "enabled", "mode" ("schedule" | "default" | None),
    "config" (SGLang's JSON as a dict, buckets in increasing order), "text" (the file's content),
    "num_steps" (the --speculative-num-steps to pass, None to let SGLang choose), "algorithm",
    "draft_model_path"}.
    ``steps``/``topk``/``draft_tokens``/``algorithm`` are the raw spec_* variables (None when unset).
    ``draft_model_path`` is sglang_server_spec_draft_model_path (None: not checked here): the schedule
    carries it itself, since spec_settings, which reads it for a static server, is off when the launch
    depth comes from the schedule and sglang_server_spec_steps_default is 0; SGLang fills it in only
    for the targets with a built-in MTP head, so an EAGLE3 schedule without it cannot start.
    """
    out = _schedule_off()
    errors: list[str] = out["errors"]
    if is_unset(schedule) or (isinstance(schedule, str) and schedule.strip().lower() in SCHEDULE_OFF):
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
                f"SGLang's JSON, 'default' or 'none'; got {fmt(doc)}"
            )
        elif isinstance(doc, dict):
            config = {}
            seen: dict[int, Any] = {}
            for key, value in doc.items():
                bound = parse_whole_number(key)
                if bound is None or bound < 1:
                    errors.append(
                        f"spec_schedule: keys are batch-size lower bounds, whole numbers of at least 1; got {fmt(key)}"
                    )
                    continue
                if bound in seen:
                    errors.append(f"spec_schedule: bucket {bound} is given twice ({fmt(seen[bound])} and {fmt(key)})")
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
            f"sglang_server_sglang_version is {fmt(sglang_version)}"
        )
    elif mode == "schedule" and form != "per-bs":
        errors.append(
            f"spec_schedule needs SGLang {_releases.ADAPTIVE_PER_BS_SINCE} or later (the per-batch-size "
            "--speculative-adaptive-config, sgl-project/sglang PR #24055); "
            f"sglang_server_sglang_version is {fmt(sglang_version)}"
        )

    if config is not None and form == "per-bs" and not _adaptive.zero_steps_allowed(sglang_version):
        zero = sorted((k for k, e in config.items() if 0 in e["candidate_steps"]), key=int)
        if zero:
            errors.append(
                f"spec_schedule: bucket(s) {', '.join(zero)} with 0 steps need SGLang "
                f"{_releases.ADAPTIVE_ZERO_STEPS_SINCE} or later ({fmt(sglang_version)} refuses them: "
                "'candidate_steps must be a list of positive ints'); use 1 or upgrade"
            )

    algo = "NEXTN" if is_unset(algorithm) else str(algorithm).strip().upper()
    if algo not in ADAPTIVE_ALGORITHMS:
        errors.append(
            f"spec_schedule needs spec_algorithm {', '.join(ADAPTIVE_ALGORITHMS)} (SGLang runs adaptive speculation "
            f"for EAGLE/EAGLE3 only, NEXTN being EAGLE); got spec_algorithm={fmt(algorithm)}"
        )
    draft_model = "" if is_unset(draft_model_path) else str(draft_model_path)
    if draft_model_path is not None:
        errors += draft_model_errors(algo, draft_model)
    if not is_unset(topk) and parse_whole_number(topk) != 1:
        errors.append(
            f"spec_schedule needs spec_topk 1 (SGLang's adaptive speculation supports topk=1 only); got spec_topk={fmt(topk)}"
        )

    num_steps: int | None = None
    if config is not None:
        num_steps = _adaptive.launch_steps(config)
    elif mode == "default" and form is not None and _adaptive.zero_steps_allowed(sglang_version):
        num_steps = None  # SGLang picks it (0.5.14+: topk 1, the middle of the default's candidates)
    elif mode == "default" and form is not None:
        # before 0.5.14 SGLang auto-picks steps, topk and draft tokens by architecture before its
        # adaptive check (0.5.12 server_args.py, 0.5.13 speculative_hook.py): (5, 4, 8) for Llama and
        # Grok targets, whose topk 4 then turns adaptive off ('only topk=1 is supported'); launched
        # at 3, a candidate of every such default table, with topk 1
        num_steps = 3
    if not is_unset(steps):
        given = parse_whole_number(steps)
        candidates = (
            sorted({s for e in config.values() for s in e["candidate_steps"]})
            if config is not None
            else sorted(
                {s for e in _adaptive.default_adaptive_config(sglang_version).values() for s in e["candidate_steps"]}
            )
            if form == "per-bs"
            else None
        )
        if given is None or given == 0 or (candidates is not None and given not in candidates):
            errors.append(
                f"spec_steps={fmt(steps)} with spec_schedule: the launch depth must be one of the schedule's "
                f"positive steps {[c for c in (candidates or []) if c > 0] or ''} (SGLang requires a candidate); "
                "leave spec_steps unset to launch at the high-load bucket's depth"
            )
        else:
            num_steps = given
    if not is_unset(draft_tokens) and (num_steps is None or parse_whole_number(draft_tokens) != num_steps + 1):
        errors.append(
            f"spec_draft_tokens={fmt(draft_tokens)} contradicts spec_schedule: SGLang sets draft tokens to the "
            "steps + 1 under adaptive speculation; leave spec_draft_tokens unset"
        )
    if errors:
        return out
    text = json.dumps(config) + "\n" if config is not None else ""
    out.update(
        enabled=True,
        mode=mode,
        config=config,
        text=text,
        num_steps=num_steps,
        algorithm=algo,
        draft_model_path=draft_model or None,
    )
    return out
