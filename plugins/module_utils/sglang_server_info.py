# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Pure parsers for SGLang's ``/server_info`` (``/get_server_info``) and ``/v1/models`` bodies.

Shared by the ``sglang_ready`` module (``ansible.module_utils.sglang_server_info``) and the tuner
(``sglang_utils.sglang_server_info``): standard library only, no imports from this package but
``sglang_secrets``.

The body carries SGLang's secrets: ``api_key`` and ``admin_api_key`` in the argument fields (both
versions), and in 0.5.23 ``launch_command`` is the argument list after ``--config FILE.yaml`` was
merged into it, so a key delivered in that file is there as ``--api-key KEY`` (sgl-project/sglang
#37457). Every parser here masks them first (``redact_server_info``), so no report, record or
output built from what it returns can carry a value read back from a secret field.

The body changed between versions (docs/reference/sglang.md §3, §3.1 of ``docs/reference/sglang.md``):
0.5.9 returns ``dataclasses.asdict(server_args)`` + scheduler info (``max_total_num_tokens``)
+ ``internal_states`` (one per DP rank) + ``version``; 0.5.23 adds ``launch_command``,
``startup_time`` and more. Every field read here may be absent or ``null``; the parsers return
``None`` for it and never raise on unexpected shapes.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Sequence

from .sglang_secrets import redact_argv, redact_fields

__all__ = [
    "SERVER_INFO_PATHS",
    "redact_server_info",
    "parse_server_info",
    "parse_models",
    "parse_launch_command",
    "requested_speculative",
    "draft_tokens_adjusted",
]

# docs/reference/sglang.md §3: /server_info from ~0.5.9; /get_server_info is all that 0.5.5.post3 has (and is
# deprecated, logging a warning per call, in later versions): try in this order.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if value is None:
        return False  # a body that lists the field as null: the flag's default (off)
    return None


def _as_str(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    return None


def _first_state(info: dict[str, Any]) -> dict[str, Any]:
    states = info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        return states[0]
    return {}


def _lookup(info: dict[str, Any], key: str) -> Any:
    """``key`` at top level, else in a nested ``server_args`` dict, else in internal_states[0]."""
    if key in info and info[key] is not None:
        return info[key]
    nested = info.get("server_args")
    if isinstance(nested, dict) and nested.get(key) is not None:
        return nested[key]
    state = _first_state(info)
    if state.get(key) is not None:
        return state[key]
    return None


def _accept_length(info: dict[str, Any]) -> Any:
    """``avg_spec_accept_length`` over every DP rank's internal state that carries it, averaged.

    ``internal_states`` holds one entry per DP rank, in the order their answers arrived
    (``_Communicator.handle_recv`` appends them until its fan-out, the DP ranks, is reached: 0.4.6
    tokenizer_manager.py, 0.5.9 tokenizer_communicator_mixin.py, 0.5.23 communicator.py), and a
    rank adds the key only once it has run a verify pass itself (scheduler.py
    ``get_internal_state``: ``cum_spec_accept_count > 0`` in 0.4.6, ``spec_total_num_forward_ct >
    0`` in 0.5.9; 0.5.23 scheduler_components/internal_state.py ``_add_speculative``). The first
    entry alone is whichever rank answered first: with DP it may have no value while another rank
    has one, or the value of its own share of the requests. The ranks' mean is read (no rank says
    how many passes its value covers); a body without states keeps the key at its top level."""
    states = info.get("internal_states")
    values = [
        _as_float(state.get("avg_spec_accept_length"))
        for state in (states if isinstance(states, list) else [])
        if isinstance(state, dict)
    ]
    known = [v for v in values if v is not None]
    if known:
        return sum(known) / len(known)
    return info.get("avg_spec_accept_length")


def redact_server_info(info: dict[str, Any]) -> dict[str, Any]:
    """A copy of a decoded server-info body with every secret field and flag value masked
    (``sglang_secrets.redact_fields``): what to keep or print when the whole body is wanted."""
    redacted: dict[str, Any] = redact_fields(info)
    return redacted


def _behind_a_pd_router(info: dict[str, Any]) -> dict[str, Any]:
    """A prefill/decode router answers /get_server_info with its servers' bodies nested: SGLang's
    mini_lb ``{"internal_states", "prefill": [...], "decode": [...]}``, sgl-router's PD router
    ``{"internal_states", "decode_servers": [...]}`` (sgl-project/sglang PR #7731: "nested with
    multiple instances' server info"). The decode server is the one that speculates: its body is read,
    with the router's internal states."""
    if info.get("version") is not None:
        return info
    for key in ("decode", "decode_servers"):
        servers = info.get(key)
        if isinstance(servers, list) and servers and isinstance(servers[0], dict):
            states = info.get("internal_states")
            return {**servers[0], **({"internal_states": states} if isinstance(states, list) and states else {})}
    return info


def parse_server_info(info: Any) -> dict[str, Any]:
    """The fields the readiness report needs, from a decoded server-info body.

    ``max_running_requests`` is the effective per-DP limit the scheduler uses
    (``internal_states[0].effective_max_running_requests_per_dp``, docs/reference/sglang.md §3.1) when present, else
    the server argument; ``max_running_requests_arg`` is always the argument (``None`` when unset).
    """
    if not isinstance(info, dict):
        info = {}
    info = _behind_a_pd_router(info)
    info = redact_server_info(info)
    state = _first_state(info)
    raw_memory = state.get("memory_usage")
    memory: dict[str, Any] = raw_memory if isinstance(raw_memory, dict) else {}
    mrr_arg = _as_int(_lookup(info, "max_running_requests"))
    mrr_eff = _as_int(state.get("effective_max_running_requests_per_dp"))
    algo = _lookup(info, "speculative_algorithm")
    algo = _as_str(algo) if not isinstance(algo, (int, float)) else str(algo)
    spec_on = bool(algo)
    nested = info.get("server_args") if isinstance(info.get("server_args"), dict) else {}
    # "speculative_algorithm": null means off; no such key at all means this body does not say
    spec_known = (
        "speculative_algorithm" in info or "speculative_algorithm" in nested or "speculative_algorithm" in state
    )

    def spec_int(key: str) -> int | None:
        return _as_int(_lookup(info, key)) if spec_on else None

    served = _lookup(info, "served_model_name")
    if isinstance(served, list):  # some builds accept several names
        served = served[0] if served else None
    accept = _accept_length(info)
    dp_size = _as_int(_lookup(info, "dp_size"))
    attn_dp = _as_int(_lookup(info, "attn_dp_size"))
    if attn_dp is not None and attn_dp > 1:
        # 0.5.23 moved attention DP's width from dp_size to attn_dp_size (`--dp-size N
        # --enable-dp-attention` resolves to attn_dp_size=N, dp_size=1: sgl-project/sglang
        # python/sglang/srt/arg_groups/parallel_hook.py); each rank still has its own request limit
        # (pool_configurator.py: max_running_requests // attn_dp_size), so the ranks are counted
        # as before. The two are never both above 1 (the same file refuses it).
        dp_size = (dp_size or 1) * attn_dp
    return {
        "version": _as_str(info.get("version")),
        "status": _as_str(info.get("status")),
        "served_model_name": _as_str(served),
        "model_path": _as_str(_lookup(info, "model_path")),
        "max_total_num_tokens": _as_int(_lookup(info, "max_total_num_tokens")),
        "max_running_requests": mrr_eff if mrr_eff is not None else mrr_arg,
        "max_running_requests_arg": mrr_arg,
        "max_prefill_tokens": _as_int(_lookup(info, "max_prefill_tokens")),
        "chunked_prefill_size": _as_int(_lookup(info, "chunked_prefill_size")),
        "context_length": _as_int(_lookup(info, "context_length")),
        "max_req_input_len": _as_int(_lookup(info, "max_req_input_len")),
        "tp_size": _as_int(_lookup(info, "tp_size")),
        "dp_size": dp_size,
        "mem_fraction_static": _as_float(_lookup(info, "mem_fraction_static")),
        "kv_token_capacity": _as_int(memory.get("token_capacity")),
        "speculative": {
            "enabled": spec_on if spec_known else None,
            "algorithm": algo or None,
            "num_steps": spec_int("speculative_num_steps"),
            "eagle_topk": spec_int("speculative_eagle_topk"),
            "num_draft_tokens": spec_int("speculative_num_draft_tokens"),
            # Resolved: SGLang sets it False when it falls back to static speculation
            # (0.5.23 speculative_hook.py _maybe_disable_adaptive; /server_info is resolved_dict()).
            "adaptive": _as_bool(_lookup(info, "speculative_adaptive")) if spec_on else None,
            "adaptive_config": _as_str(_lookup(info, "speculative_adaptive_config")) if spec_on else None,
        },
        "avg_spec_accept_length": _as_float(accept),
        # --enable-deterministic-inference (batch-invariant kernels): the correctness gate's exact rule
        "deterministic": _as_bool(_lookup(info, "enable_deterministic_inference")),
        "launch_command": parse_launch_command(info.get("launch_command")),
        # what changes greedy numerics whatever the speculation: the correctness gate's baseline is
        # comparable only with a server that has the same (sglang_verify.baseline_mismatch)
        "numerics": {key: _num_arg(_lookup(info, key)) for key in NUMERICS_ARGS},
        # the attention kernels the server resolved (not a numerics key: SGLang picks them per
        # configuration); the gate's exact rule holds only between the same kernels (sglang_verify.rule_for)
        "attention_backends": {key: _as_str(_lookup(info, key)) for key in ATTENTION_BACKEND_ARGS},
    }


# Server arguments the greedy outputs depend on and speculation does not change (the attention
# backend is left out: SGLang may pick another one for a speculative server by itself): the
# tokenizer (ServerArgs.tokenizer_path, model_path unless given) and the model's revision among
# them, so a baseline of another tokenizer or revision of the same model path is refused rather
# than compared (sgl-project/sglang python/sglang/srt/server_args.py; /server_info is its fields).
NUMERICS_ARGS = ("tp_size", "dtype", "quantization", "kv_cache_dtype", "tokenizer_path", "revision")
# (speculative_attention_mode: which of a split backend's kernels a speculative verify pass runs on)
ATTENTION_BACKEND_ARGS = (
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "speculative_attention_mode",
)


def _num_arg(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float)) else _as_str(value)


def parse_models(body: Any) -> dict[str, Any]:
    """``/v1/models`` -> ``{"served_model_name", "max_model_len"}`` (docs/reference/sglang.md §3: ``data[0].id``)."""
    out: dict[str, Any] = {"served_model_name": None, "max_model_len": None}
    if not isinstance(body, dict):
        return out
    data = body.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        out["served_model_name"] = _as_str(data[0].get("id"))
        out["max_model_len"] = _as_int(data[0].get("max_model_len"))
    return out


def parse_launch_command(value: str | Sequence[str] | None) -> list[str] | None:
    """0.5.23's ``launch_command`` (a string or an argv list) as an argv list, secret flag values masked."""
    if isinstance(value, str) and value.strip():
        try:
            return redact_argv(shlex.split(value))
        except ValueError:
            return redact_argv(value.split())
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return redact_argv(value)
    return None


_SPEC_FLAGS = {
    "--speculative-algorithm": "algorithm",
    "--speculative-num-steps": "num_steps",
    "--speculative-eagle-topk": "eagle_topk",
    "--speculative-num-draft-tokens": "num_draft_tokens",
}


def requested_speculative(argv: Sequence[str] | None) -> dict[str, Any]:
    """Speculative flags as the user passed them (before SGLang resolved them).

    argparse accepts unambiguous prefixes (the docs use ``--speculative-algo NEXTN``, facts
    §2.1), so a flag is matched to the one canonical name it is a prefix of.
    """
    out: dict[str, Any] = {v: None for v in _SPEC_FLAGS.values()}
    if not argv:
        return out
    args = list(argv)
    i = 0
    while i < len(args):
        tok = args[i]
        value = None
        if tok.startswith("--"):
            name, eq, inline = tok.partition("=")
            matches = [full for full in _SPEC_FLAGS if full.startswith(name)] if len(name) > 14 else []
            if name in _SPEC_FLAGS:
                matches = [name]
            if len(matches) == 1:
                if eq:
                    value = inline
                elif i + 1 < len(args):
                    value = args[i + 1]
                    i += 1
                key = _SPEC_FLAGS[matches[0]]
                out[key] = value if key == "algorithm" else _as_int(value)
        i += 1
    return out


def draft_tokens_adjusted(requested: dict[str, Any], resolved: dict[str, Any]) -> bool | None:
    """Whether SGLang changed the draft-token count it was given (docs/reference/sglang.md §2.3), if knowable."""
    want = requested.get("num_draft_tokens") if requested else None
    got = resolved.get("num_draft_tokens") if resolved else None
    if want is None or got is None:
        return None
    return bool(want != got)
