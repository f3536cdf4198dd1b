# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Pure parsers for SGLang's start-up log.

Shared by the ``sglang_ready`` Ansible module (imported as
``ansible.module_utils.sglang_log``) and the tuner (``sglang_utils.sglang_log``), so it uses the
standard library only and imports nothing from this package but its own parts (relative imports,
which Ansible resolves when it builds the module): ``sglang_lines`` (a line, its prefix and the
collectors' prefixes), ``sglang_fatal`` (what ended a start, ``find_fatal``) and ``sglang_secrets``
(the one definition of how secrets are masked). This module is their one public face: its
``__all__`` names what the module and the tuner call, wherever it is written.

Everything here takes text or lists of lines and returns plain ``dict``/``list`` values that
Ansible can serialise. Lines that do not parse are skipped: a log is evidence from a process
that may have been killed mid-write, and a report with ``None`` in it beats a crash.

Facts are cited as ``docs/reference/sglang.md §x.y``.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Iterable, Sequence

from .sglang_fatal import _TRACEBACK_RE, _WRAPPERS, _exception_line, find_fatal
from .sglang_lines import (
    LogLine,
    _as_parsed,
    _primary,
    is_primary_rank,
    parse_line,
    parse_lines,
    parse_timestamp,
    split_lines,
)
from .sglang_secrets import MASK, redact_text

__all__ = [
    "LogLine",
    "split_lines",
    "parse_line",
    "parse_lines",
    "parse_timestamp",
    "is_primary_rank",
    "parse_repr_kwargs",
    "parse_server_args",
    "parse_capacity",
    "parse_kv_pools",
    "parse_mamba_cache",
    "parse_speculative",
    "parse_prefill_batches",
    "find_warnings",
    "find_fatal",
    "current_launch",
    "is_launch_line",
    "is_ready_line",
    "is_joined_line",
    "redact",
    "summarize",
    "MASK",
]

# --------------------------------------------------------------------------------------------
# server_args=ServerArgs(...)
# --------------------------------------------------------------------------------------------

_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def _scan_value(text: str, i: int, closer: str = ")") -> int:
    """Index just past the value starting at ``text[i]`` (a Python repr), tolerant of truncation;
    the value ends at a top-level ``,`` or at ``closer`` (the container's own end)."""
    depth: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            q = c
            i += 1
            while i < n and text[i] != q:
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c in _CLOSERS:
            depth.append(_CLOSERS[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif not depth and (c == "," or c == closer):
            return i
        i += 1
    return n


def _literal(token: str) -> Any:
    token = token.strip()
    try:
        return ast.literal_eval(token)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return token


def parse_repr_kwargs(text: str) -> dict[str, Any]:
    """Parse ``key=value, key=value`` as printed by a dataclass ``repr``.

    Values are read with :func:`ast.literal_eval` (never ``eval``); anything else (enum reprs,
    objects, a value cut off by truncation) is kept as its source text. A truncated trailing
    value is dropped rather than returned half-read.
    """
    return _parse_pairs(text, _KWARG_KEY_RE, ")")


_KWARG_KEY_RE = re.compile(r"\s*([A-Za-z_]\w*)=")
_DICT_KEY_RE = re.compile(r"\s*'([A-Za-z_]\w*)':\s*")


def parse_repr_dict(text: str) -> dict[str, Any]:
    """Parse ``'key': value, ...`` (the inside of a dict's repr, as 0.5.2x logs ``server_args={...}``:
    ``_server_args_for_logging`` = ``ServerArgs.resolved_dict()``, sgl-project/sglang
    python/sglang/srt/entrypoints/engine.py), with :func:`parse_repr_kwargs`' tolerance of truncation."""
    return _parse_pairs(text, _DICT_KEY_RE, "}")


def _parse_pairs(text: str, key_re: re.Pattern[str], closer: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i, n = 0, len(text)
    while i < n:
        m = key_re.match(text, i)
        if not m:
            break
        start = m.end()
        end = _scan_value(text, start, closer)
        if end >= n and not text.rstrip().endswith(closer):
            break  # value runs off the end of a truncated line
        out[m.group(1)] = _literal(text[start:end])
        i = end + 1
        if end < n and text[end] == closer:
            break
    return out


# ``server_args=ServerArgs(...)`` (0.3.x-0.5.1x: f"{server_args=}") or ``server_args={...}`` (0.5.2x)
_SERVER_ARGS_RE = re.compile(r"server_args=(?:\w*\((?P<kwargs>.*)|\{(?P<dict>.*))$")


def parse_server_args(lines: Sequence[Any]) -> dict[str, Any] | None:
    """The last ``server_args=`` line as a dict (docs/reference/sglang.md §1.3: resolved values),
    in either form SGLang has printed it, with the pieces of a line that was broken in two put back."""
    parsed = _as_parsed(lines)
    for i in range(len(parsed) - 1, -1, -1):
        m = _SERVER_ARGS_RE.search(parsed[i].message)
        if m:
            kwargs = m.group("kwargs")
            if kwargs is not None:
                return parse_repr_kwargs(_rejoin(kwargs, parsed[i + 1 :], ")"))
            return parse_repr_dict(_rejoin(m.group("dict"), parsed[i + 1 :], "}"))
    return None


_REJOIN_LOOKAHEAD = 20  # lines a broken server_args= line is looked for in


def _rejoin(text: str, following: Sequence[LogLine], closer: str) -> str:
    """``text`` (a ``server_args=`` line's arguments) with the lines that continue it, where the
    line does not close. The one line of 10,000+ characters comes broken into pieces: journald makes
    several entries of a line longer than its LineMax= (journald.conf(5)), and copies of logs break it
    ("..., max_queued_requests=None, max_total_token" then "s=None, chunked_prefill_size=8192, ...",
    the stored copy of sgl-project/sglang issue #12726). A piece has no SGLang prefix of its own; the
    first line that has one, or a traceback's, ends the search. Text after the closer is never read."""
    for ln in following[:_REJOIN_LOOKAHEAD]:
        if _closes(text, closer) or ln.sglang or _TRACEBACK_RE.search(ln.message):
            break
        text += ln.message
    return text


def _closes(text: str, closer: str) -> bool:
    """Whether ``text`` reaches its container's own ``closer`` (outside any string or nesting)."""
    i, n = 0, len(text)
    while i < n:
        end = _scan_value(text, i, closer)
        if end < n and text[end] == closer:
            return True
        i = end + 1
    return False


# --------------------------------------------------------------------------------------------
# Capacity, pools
# --------------------------------------------------------------------------------------------

# docs/reference/sglang.md §1.2: "max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={},
# max_running_requests={}, context_len={}, available_gpu_mem={:.2f} GB" (available_cpu_mem on
# CPU); builds before ~0.4.4 end at context_len. Fields are matched by name, each one only when
# it is complete (followed by ",", " GB" or the end of a line that is not cut mid-number). The line is
# the scheduler's own message, so it starts with the field (0.4.x-0.5.23 managers/scheduler.py
# `logger.info(f"max_total_num_tokens={...}, "`; bench_one_batch's bare `max_total_num_tokens=N`): the
# field inside another message is not it, e.g. 0.5.23 mem_cache/kv_cache_configurator.py's assert
# ("AssertionError: unified allocator virtual space smaller than the token budget: virtual_id_space=N <
# max_total_num_tokens=N") or mem_cache/unified_memory_pool.py's "[unified-memory-pool]   total_bytes=N,
# max_total_num_tokens=N, ...", both before the capacity line of a start that may crash before it.
# A prefix the parser does not know (a custom SGLANG_LOGGING_CONFIG_PATH format, a journal's or a
# collector's own, logfmt's `pid=123 ` included) may still come first: the field follows the start,
# a space, "]" or ":", but not another field's ", " or a comparison's "< " as in those two messages.
_CAPACITY_START_RE = re.compile(r"(?:^|(?<=[\s\]:]))(?<![,<>=]\s)max_total_num_tokens=\d+(?:,|\s*$)")
_FIELD_RE = re.compile(r"(?P<key>[a-z_]+)=(?P<val>-?\d+(?:\.\d+)?)(?P<tail>\s*GB)?(?P<end>,|\s|$)")
CAPACITY_KEYS = (
    "max_total_num_tokens",
    "max_running_requests",
    "max_prefill_tokens",
    "chunked_prefill_size",
    "context_len",
    "available_gpu_mem_gb",
)


def _capacity_fields(message: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in _FIELD_RE.finditer(message):
        key, val = m.group("key"), m.group("val")
        if key.startswith("available_") and key.endswith("_mem"):
            if not m.group("tail"):
                continue  # "available_gpu_mem=14.8" without " GB": cut off
            out[key + "_gb"] = float(val)
        elif "." not in val:
            out[key] = int(val)
    return out


def parse_capacity(lines: Sequence[Any]) -> dict[str, Any] | None:
    """The capacity line's fields (``None`` when the line is absent).

    Always returns every key of :data:`CAPACITY_KEYS` (missing ones ``None``), plus
    ``available_cpu_mem_gb`` on CPU builds and ``rank`` (e.g. ``"TP0"``, ``""`` for TP=1).
    """
    parsed = _as_parsed(lines)
    hits = _primary(parsed, lambda ln: bool(_CAPACITY_START_RE.search(ln.message)))
    if not hits:
        return None
    line = hits[-1]
    begin = _CAPACITY_START_RE.search(line.message)
    if begin is None:
        return None
    start = begin.start()
    fields = _capacity_fields(line.message[start:])
    out: dict[str, Any] = {k: fields.get(k) for k in CAPACITY_KEYS}
    if "available_cpu_mem_gb" in fields:
        out["available_cpu_mem_gb"] = fields["available_cpu_mem_gb"]
    out["rank"] = line.rank_label
    out["timestamp"] = line.timestamp
    return out


# docs/reference/sglang.md §1.3 (0.5.5–0.5.12): "KV Cache is allocated. #tokens: {n}, K size: {x:.2f} GB, V size:
# {y:.2f} GB" (MHA/GQA) or "..., KV size: {x:.2f} GB" (MLA); 0.5.23: "{label }KV Cache is
# allocated. dtype: {dtype}, #tokens: ..." or "... VA upper bound. ..." in post-capture sizing
# (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, 0.5.19+), whose pools are sized after the graph capture:
# "Post-capture KV sizing: KV cache allocated. dtype: {dtype}, #tokens: {n}, KV size: {x:.2f} GB,
# avail mem=..." and "Post-capture KV sizing: draft KV cache allocated. ..."
# (model_executor/model_runner_components/kv_pool_runtime.py).
_KV_RE = re.compile(
    r"^(?:Post-capture KV sizing: (?P<post>draft )?KV cache allocated"
    r"|(?:(?P<label>\S.*?)\s+)?KV Cache (?P<kind>is allocated|VA upper bound))\.\s*"
    r"(?:dtype:\s*(?P<dtype>[\w.]+),\s*)?(?:#tokens:\s*(?P<tokens>\d+))?(?P<rest>.*)$"
)
_SIZE_RE = re.compile(r"\b(?P<name>K|V|KV)\s+size:\s*(?P<gb>\d+(?:\.\d+)?)\s*GB")
# A sliding-window model's target pool is two pools (srt/mem_cache/swa_memory_pool.py `SWAKVPool`), each
# logging its own KV line, then this summary: "SWAKVPool mem usage: {gb:.2f} GB, swa size: {n}, full size:
# {n}" ("VA upper bound" for "mem usage" under post-capture sizing, 0.5.2x). 0.5.2x labels the two lines
# "Full" and "SWA"; 0.5.9-0.5.1x print them unlabelled (SWA first), which the summary's sizes label here.
_SWA_RE = re.compile(
    r"^SWAKVPool (?:mem usage|VA upper bound): [\d.]+ GB, swa size: (?P<swa>\d+), full size: (?P<full>\d+)"
)


def parse_kv_pools(lines: Sequence[Any]) -> list[dict[str, Any]]:
    """One dict per KV pool allocated by the primary rank, in log order.

    With speculative decoding the draft worker allocates its own pool after the target's
    (docs/reference/sglang.md §1.3), so a second entry is expected then. A sliding-window model's
    target has two, labelled ``Full`` and ``SWA`` (by SGLang from 0.5.2x, from its ``SWAKVPool``
    summary line before). With post-capture sizing the pools sized after the capture replace the
    virtual reservations' upper bounds.
    """
    parsed = _as_parsed(lines)
    hits = _primary(
        parsed,
        lambda ln: (
            (("KV Cache " in ln.message or "KV cache allocated" in ln.message) and _KV_RE.match(ln.message) is not None)
            or (ln.message.startswith("SWAKVPool ") and _SWA_RE.match(ln.message) is not None)
        ),
    )
    pools: list[dict[str, Any]] = []
    post_capture = False  # a pool sized after the capture: it replaces the reservations' upper bounds
    since_swa = 0  # the first pool not yet before a SWAKVPool summary
    for ln in hits:
        swa = _SWA_RE.match(ln.message)
        if swa is not None:
            _label_swa_pools(pools[since_swa:], int(swa.group("swa")), int(swa.group("full")))
            since_swa = len(pools)
            continue
        m = _KV_RE.match(ln.message)
        if m is None:
            continue
        sizes = {s.group("name"): float(s.group("gb")) for s in _SIZE_RE.finditer(m.group("rest"))}
        if m.group("tokens") is None and not sizes:
            continue  # neither a count nor a size: not SGLang's line
        if "KV" in sizes:
            layout = "mla"
        elif "K" in sizes or "V" in sizes:
            layout = "mha"
        else:
            layout = None
        k_gb, v_gb, kv_gb = sizes.get("K"), sizes.get("V"), sizes.get("KV")
        if kv_gb is not None:
            total = kv_gb
        elif k_gb is not None and v_gb is not None:
            total = round(k_gb + v_gb, 2)
        else:
            total = None
        label = (m.group("label") or "").strip() or ("draft" if m.group("post") else None)
        pools.append(
            {
                "rank": ln.rank_label,
                "label": label,
                "layout": layout,
                "dtype": m.group("dtype"),
                # 0.4.0-0.4.2 print the sizes only: "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB."
                "tokens": int(m.group("tokens")) if m.group("tokens") is not None else None,
                "k_size_gb": k_gb,
                "v_size_gb": v_gb,
                "kv_size_gb": kv_gb,
                "total_gb": total,
                "upper_bound": m.group("kind") == "VA upper bound",
            }
        )
        post_capture = post_capture or m.group("kind") is None
    return [p for p in pools if not p["upper_bound"]] if post_capture else pools


def _label_swa_pools(pools: list[dict[str, Any]], swa: int, full: int) -> None:
    """Label the two unlabelled pools just before a ``SWAKVPool`` summary by its sizes (SWA first
    where they are equal: 0.5.9-0.5.1x allocate it first)."""
    bare = [p for p in pools if p["label"] is None][-2:]
    if len(bare) != 2:
        return
    first, second = bare
    if first["tokens"] == full and second["tokens"] == swa and swa != full:
        first["label"], second["label"] = "Full", "SWA"
    elif first["tokens"] == swa and second["tokens"] == full:
        first["label"], second["label"] = "SWA", "Full"


# docs/reference/sglang.md §1.3: "Mamba Cache is allocated. max_mamba_cache_size: {n}, conv_state size: {x}GB,
# ssm_state size: {y}GB " + with speculation "intermediate_ssm_state_cache size: ...GB
# intermediate_conv_window_cache size: ...GB".
_MAMBA_RE = re.compile(r"Mamba Cache is allocated\.\s*(?P<rest>.*)$")
_MAMBA_SIZE_RE = re.compile(r"(?P<name>[A-Za-z_]+) size:\s*(?P<gb>\d+(?:\.\d+)?)\s*GB")
_MAMBA_SLOTS_RE = re.compile(r"max_mamba_cache_size:\s*(?P<n>\d+)(?=\D|$)")


def parse_mamba_cache(lines: Sequence[Any]) -> dict[str, Any] | None:
    """The Mamba/GDN state pool of hybrid models (Qwen3-Next, Qwen3.5); ``None`` otherwise."""
    parsed = _as_parsed(lines)
    hits = _primary(parsed, lambda ln: _MAMBA_RE.search(ln.message) is not None)
    if not hits:
        return None
    ln = hits[-1]
    found = _MAMBA_RE.search(ln.message)
    if found is None:
        return None
    rest = found.group("rest")
    slots = _MAMBA_SLOTS_RE.search(rest)
    out: dict[str, Any] = {
        "rank": ln.rank_label,
        "max_mamba_cache_size": int(slots.group("n")) if slots else None,
        "conv_state_gb": None,
        "ssm_state_gb": None,
        "intermediate_ssm_state_cache_gb": None,
        "intermediate_conv_window_cache_gb": None,
    }
    for m in _MAMBA_SIZE_RE.finditer(rest):
        out[m.group("name") + "_gb"] = float(m.group("gb"))
    return out


# --------------------------------------------------------------------------------------------
# Speculative decoding and warnings
# --------------------------------------------------------------------------------------------

# docs/reference/sglang.md §2.3 and §2.4 (exact texts, unchanged from 0.5.9 to 0.5.23).
DRAFT_ADJUSTED_TEXT = "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
MRR_RESET_RE = re.compile(r"Max running requests is reset to (\d+) for speculative decoding")


def parse_speculative(lines: Sequence[Any], server_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Resolved speculative settings as the log shows them.

    ``algorithm``/``num_steps``/``eagle_topk``/``num_draft_tokens`` come from the
    ``server_args=`` line (already resolved: NEXTN is shown as EAGLE, docs/reference/sglang.md §2.2).
    ``draft_tokens_adjusted`` and ``max_running_requests_reset`` are ``True``/``False`` when a
    log was read, ``None`` when there was none to read.
    """
    parsed = _as_parsed(lines)
    if server_args is None:
        server_args = parse_server_args(parsed)
    sa = server_args or {}
    have_log = bool(parsed)
    adjusted = any(DRAFT_ADJUSTED_TEXT in ln.message for ln in parsed) if have_log else None
    reset_to = None
    for ln in parsed:
        m = MRR_RESET_RE.search(ln.message)
        if m:
            reset_to = int(m.group(1))
    algo = sa.get("speculative_algorithm")
    if algo is not None and not isinstance(algo, str):
        algo = str(algo)
    # With speculation off, old builds still print default steps/topk/draft (0.4.x: 5/4/8):
    # they are not in effect, so they are not reported. A line cut before the field says nothing of
    # it (every build since speculative decoding came, 0.4.1, prints speculative_algorithm).
    enabled = bool(algo) if "speculative_algorithm" in sa else None

    def _int(key: str) -> int | None:
        val = sa.get(key)
        return val if enabled and isinstance(val, int) and not isinstance(val, bool) else None

    return {
        "enabled": enabled,
        "algorithm": algo or None,
        "num_steps": _int("speculative_num_steps"),
        "eagle_topk": _int("speculative_eagle_topk"),
        "num_draft_tokens": _int("speculative_num_draft_tokens"),
        "draft_tokens_adjusted": adjusted,
        "max_running_requests_reset": (reset_to is not None) if have_log else None,
        "max_running_requests_reset_to": reset_to,
    }


# docs/reference/sglang.md §1.4: the scheduler logs one `Prefill batch, ...` line per prefill forward
# batch, so a long input prefilled in chunks (--chunked-prefill-size) logs one per chunk. Its fields
# (sgl-project/sglang python/sglang/srt/managers/scheduler_metrics_mixin.py `log_prefill_stats` in
# 0.5.9, observability/ in 0.5.10-0.5.12, managers/scheduler_components/metrics_reporter.py
# `report_prefill_stats` in 0.5.23): `#new-seq: N, #new-token: N, #cached-token: N, token usage:
# X, #running-req: N, #queue-req: N, ` then `input throughput (token/s): X, cuda graph: B` (0.5.9),
# `cuda graph: B, input throughput (token/s): X` (0.5.10), with `#pending-token: N, ` before them
# (0.5.11+); hybrid models say `full token usage: X, mamba usage: X` (or `swa token usage`).
# 0.4.x wrote `Prefill batch. #new-seq: ...` (a period), some with `cache hit rate: X%`.
# The graph flag is named by the device: `cuda graph` on CUDA and ROCm, `npu graph` on Ascend,
# `cpu graph` on CPU (0.5.9 scheduler_metrics_mixin.py `graph_backend`), `musa graph` on Moore
# Threads (0.5.12 `_graph_backend_label`, 0.5.23 metrics_reporter.py); read as `cuda_graph` on all
# (an Ascend 0.5.1x log: "..., #pending-token: 109585, npu graph: False, input throughput (token/s):
# 15734.14", sgl-project/sglang PR #30047).
_PREFILL_RE = re.compile(r"^Prefill batch(?: \[\d+\])?[.,] (?P<rest>.*)$")
_STAT_RE = re.compile(r"(?:^|, )(?P<key>#?[a-z][a-z \-]*?)(?: \([a-z/]+\))?: (?P<val>[^,]+)")
_DEVICE_GRAPH_KEYS = frozenset(("npu_graph", "cpu_graph", "musa_graph"))
PREFILL_KEYS = (
    "new_seq",
    "new_token",
    "cached_token",
    "running_req",
    "queue_req",
    "pending_token",
    "token_usage",
    "input_throughput",
    "cuda_graph",
)


def _stat_value(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


def parse_prefill_batches(lines: Sequence[Any]) -> list[dict[str, Any]]:
    """Every ``Prefill batch`` line of the primary rank, oldest first, as a dict.

    Each has the keys of :data:`PREFILL_KEYS` (``None`` where the release does not log the field,
    e.g. ``pending_token`` before 0.5.11; ``token_usage`` is the full pool's on hybrid models,
    ``cuda_graph`` the graph flag whatever device names it),
    the other fields under their names (``#`` dropped, ``-`` and spaces as ``_``, the unit left
    out: ``mamba_usage``), ``timestamp`` and ``rank``.
    """
    out: list[dict[str, Any]] = []
    for ln in _primary(_as_parsed(lines), lambda x: x.message.startswith("Prefill batch")):
        m = _PREFILL_RE.match(ln.message)
        if m is None:
            continue
        fields = {
            st.group("key").lstrip("#").replace("-", "_").replace(" ", "_"): _stat_value(st.group("val"))
            for st in _STAT_RE.finditer(m.group("rest"))
        }
        if "token_usage" not in fields and "full_token_usage" in fields:
            fields["token_usage"] = fields["full_token_usage"]
        for key in _DEVICE_GRAPH_KEYS.intersection(fields):
            fields.setdefault("cuda_graph", fields.pop(key))
        row: dict[str, Any] = {k: fields.get(k) for k in PREFILL_KEYS}
        row.update((k, v) for k, v in fields.items() if k not in row)
        row["timestamp"] = ln.timestamp
        row["rank"] = ln.rank_label
        out.append(row)
    return out


# Warnings SGLang's own loggers print without a level name (docs/reference/sglang.md §1.1: the level is not in the
# format), so they are recognised by text. Sources: docs/reference/sglang.md §2.3, §2.4, §2.6, §5.3, §7.5.
_KNOWN_WARNING_RES = [
    re.compile(re.escape(DRAFT_ADJUSTED_TEXT)),
    MRR_RESET_RE,
    re.compile(r"max_total_tokens=\d+ is larger than the profiled value"),
    # 0.5.9 "Custom allreduce is disabled because ..."; 0.5.10+ f"{cls_name} is disabled because ..."
    # with CustomAllreduce or CustomAllReduceV2 (custom_all_reduce_utils.py)
    re.compile(r"Custom ?[Aa]ll[Rr]educe(?:V2)? is disabled"),
    re.compile(r"Setup Custom allreduce failed"),
    re.compile(r"Disabling radix cache"),
    re.compile(r"Overlap scheduler is disabled"),
    re.compile(r"Mixed chunked prefill is disabled"),
    re.compile(r"Using default MoE kernel config"),
    re.compile(r"The memory capacity is unbalanced"),
    re.compile(r"Health check failed"),
    re.compile(r"does not require setting speculative_draft_model_path"),
    re.compile(r"Spec v1 is used for"),
    re.compile(r"Beta spec is enabled"),
    re.compile(r"[Ww]atchdog timeout"),
    re.compile(r"is deprecated"),
    # logged right after the draft model's "Warning: Target model's context_length ..." (_SGLANG_WARNING_WORD_RE)
    re.compile(r"Overriding the draft model's max_position_embeddings"),
]
_PY_WARNING_RE = re.compile(r"\b(?:User|Future|Deprecation|Runtime|Resource)?Warning: ")
# An SGLang logger's warning in Python's default format, where logging was set up before SGLang's
# own format (by another library, or a launch that imports SGLang from a script):
# "WARNING:sglang.srt.server_args:Disabling overlap schedule since mamba no_buffer is not compatible
# with overlap schedule, ..." (sgl-project/sglang PR #13023 shows the form before `server_args=`).
_DEFAULT_FORMAT_WARNING_RE = re.compile(r"^(?:WARNING|ERROR|CRITICAL):sglang(?:\.\w+)*:(?P<msg>.+)$")
# ROCm's runtime on a GPU page fault: the queue's exception handler prints "Queue error -
# HSA_STATUS_ERROR_MEMORY_FAULT" and leaves the report to the VM-fault handler, whose "Memory access fault
# by GPU node-N ..." line then aborts the process (ROCm/ROCR-Runtime core/runtime/amd_aql_queue.cpp
# AqlQueue::ExceptionHandler: "Suppress VM fault reporting. This is more useful when reported through the
# system error handler."). It comes as "Warning: Queue error - HSA_STATUS_ERROR_MEMORY_FAULT" beside that
# fatal line (sgl-project/sglang issues #39517, #23784, #37648): the same fault, so not a warning (its words
# add nothing to the fault line's, which is find_fatal's reason)
_HSA_QUEUE_FAULT_RE = re.compile(r"^(?:Warning: )?Queue error - HSA_STATUS_ERROR_MEMORY_FAULT\b")
# SGLang's own loggers put the word in some warnings' message, their format having no level: "[2026-02-05
# 18:39:49] Warning: Target model's context_length (8192) is greater than the derived context_length (2048). This
# may lead to incorrect model outputs or CUDA errors. ..." (configs/model_config.py `_derive_context_length`,
# 0.5.9 and 0.5.23: an EAGLE draft trained at 2048 tokens under a longer target, logged in CI or with
# SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, then "Overriding the draft model's max_position_embeddings to
# 8192."; a ValueError with the same words otherwise), as SGLang's docs CI prints it
# (tests/module/fixtures/sglang-0.5.9dev_docs-ci_eagle_draft_context_override.log) and an MTP server's compose
# log does (jpezzulli/sglang-rtxpro6000 issue #19); also model_runner.py's "Warning: Attention backend specified
# by --attention-backend or default backend might be overridden.". Read on SGLang's prefixed lines only: the
# same word in that ValueError's line ("ValueError: Warning: Target model's ...") is the fatal error, and in
# ROCm's "Warning: Queue error - ..." a fault's (_HSA_QUEUE_FAULT_RE)
_SGLANG_WARNING_WORD_RE = re.compile(r"^Warning: ")
MAX_WARNINGS = 100


def find_warnings(lines: Sequence[Any], limit: int = MAX_WARNINGS) -> list[str]:
    """SGLang's warnings in this start's log, de-duplicated across ranks, in first-seen order."""
    parsed = _as_parsed(lines)
    seen = set()
    out: list[str] = []
    for ln in parsed:
        if ln.uvicorn:
            if ln.level not in ("WARNING", "ERROR", "CRITICAL"):
                continue
        msg = ln.message.strip()
        is_warning = ln.level in ("WARNING", "ERROR", "CRITICAL")
        if not is_warning and not ln.sglang:
            default_form = _DEFAULT_FORMAT_WARNING_RE.match(msg)
            if default_form:
                is_warning, msg = True, default_form.group("msg").strip()
        if not is_warning:
            is_warning = any(r.search(ln.message) for r in _KNOWN_WARNING_RES)
        if not is_warning and ln.sglang:
            is_warning = _SGLANG_WARNING_WORD_RE.match(msg) is not None
        if not is_warning and not ln.sglang:
            # an exception's line ("ValueError: Warning: ...") is an error that happens to hold the word
            is_warning = (
                _PY_WARNING_RE.search(ln.message) is not None
                and not _HSA_QUEUE_FAULT_RE.match(msg)
                and _exception_line(msg) is None
            )
        if not is_warning:
            continue
        if msg in seen:
            continue
        seen.add(msg)
        out.append(msg)
        if len(out) >= limit:
            break
    return out


# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------
# This start's lines, readiness, redaction
# --------------------------------------------------------------------------------------------

_SERVER_ARGS_MARK = "server_args="
# Lines that may precede server_args= in one launch (docs/reference/sglang.md §1.3: server_args is the first line
# SGLang's configured logger writes; real logs show level-tagged "[ts] WARNING server_args.py:N:"
# lines, vLLM-style "INFO 03-07 12:29:02 __init__.py:190]" lines, Python warnings and blank lines
# before it). A traceback or a ranked/uvicorn line belongs to the previous launch.
_PRELAUNCH_FOREIGN_RE = re.compile(
    r"^(?:(?:INFO|WARNING|DEBUG) \d\d-\d\d [\d:.]+ |(?:INFO|WARNING|DEBUG):sglang[\w.]*:|<frozen |"
    r"/\S+\.py:\d+: \w*Warning|\s+warnings\.warn|"
    r"\w*Warning: |The module name |\s+Example: )"
)


def _is_prelaunch(ln: LogLine, not_before: float | None, slack_s: float) -> bool:
    if ln.sglang:
        # Only the "[ts] WARNING server_args.py:2326: ..." form precedes server_args= in a launch:
        # a ranked, uvicorn or untagged line ("[ts] Received sigquit from a child process") is the
        # previous launch's, however close its stamp is to this process's start.
        if ln.ranks or ln.uvicorn:
            return False
        if ln.where is not None and ".py:" not in ln.where and not ln.where.startswith("server_args."):
            # a Dynamo worker's line (_DYNAMO_RE) names no rank, so only its target tells: the argument
            # warnings are ServerArgs' own; any other is the previous launch's
            return False
        if ln.level is None and not_before is None:
            # 0.5.11+ print the argument warnings as plain "[ts] message" lines before
            # server_args= (prepare_server_args' logging.basicConfig); without a start time to
            # compare stamps with they cannot be told from the previous launch's last words
            return False
        ts = parse_timestamp(ln.timestamp) if not_before is not None else None
        if ln.level is None:
            # a plain line is this launch's only when stamped in this process's own second or
            # later, and never a line of the kind a launch ends with ("Received sigquit ...")
            dying = any(rx.search(ln.message) for _kind, rx in _WRAPPERS)
            return ts is not None and not_before is not None and ts >= int(not_before) and not dying
        if ts is not None and not_before is not None:
            return ts >= not_before - slack_s
        return True
    msg = ln.message
    if _TRACEBACK_RE.search(msg) or _exception_line(msg) or msg.startswith("File "):
        return False
    # 0.5.9/0.5.10 configure no logging before ServerArgs.__post_init__, whose warnings then come
    # bare through Python's last-resort handler ("Max running requests is reset to 48 ..."):
    # sgl-project/sglang PR #22926 (0.5.11) added the basicConfig that stamps them
    return bool(_PRELAUNCH_FOREIGN_RE.match(ln.raw)) or any(rx.search(msg) for rx in _KNOWN_WARNING_RES)


def current_launch(lines: Sequence[str], not_before: float | None = None, slack_s: float = 2.0) -> list[str]:
    """The lines of the latest launch in a log file that several launches appended to.

    The launch starts at the last ``server_args=`` line (docs/reference/sglang.md §1.3), extended back over the
    warnings SGLang prints while resolving its arguments (real 0.5.x logs show
    ``[ts] WARNING server_args.py:N: ...`` lines *before* ``server_args=``). With
    ``not_before`` (epoch seconds of the process start; SGLang's timestamps are the host's
    local time), a ``server_args=`` line older than that belongs to a previous launch: the
    result is then only what was written after that launch's last stamped line (empty until
    the new process writes something).
    """
    raw = list(lines)
    start = None
    for i in range(len(raw) - 1, -1, -1):
        if _SERVER_ARGS_MARK in raw[i]:
            ln = parse_line(raw[i])
            if ln is None or not is_launch_line(ln):
                continue
            if not_before is not None:
                ts = parse_timestamp(ln.timestamp)
                if ts is not None and ts < not_before - slack_s:
                    return _since(raw, not_before, slack_s)
            start = i
            break
    if start is None:
        return raw if not_before is None else _since(raw, not_before, slack_s)
    j = start
    while j > 0:
        prev = parse_line(raw[j - 1])
        if prev is None:
            j -= 1
            continue
        if not _is_prelaunch(prev, not_before, slack_s):
            break
        j -= 1
    while j < start and not raw[j].strip():
        j += 1
    return raw[j:]


# Lines of a traceback's tail (frames, carets, chained-exception banners, warnings printed on exit).
_TRACE_TAIL_RE = re.compile(
    r"^(?:\s|\^|~|File |Traceback |During handling|The above exception|/\S+\.py:\d+: \w*Warning)"
)


def _since(raw: list[str], not_before: float, slack_s: float) -> list[str]:
    """Lines written after ``not_before`` when the launch has no ``server_args=`` line yet.

    That happens when the process dies before SGLang configures its logger (argparse errors,
    import errors). Everything up to the last line stamped before the process start is old;
    an old crash's unstamped traceback tail right after it is skipped too.
    """
    last_old = -1
    for i, text in enumerate(raw):
        ln = parse_line(text)
        if ln is not None and ln.sglang:
            ts = parse_timestamp(ln.timestamp)
            if ts is not None and ts < not_before - slack_s:
                last_old = i
    j = last_old + 1
    if last_old >= 0:
        while j < len(raw):
            ln = parse_line(raw[j])
            if ln is None or (not ln.sglang and (_TRACE_TAIL_RE.match(raw[j]) or _exception_line(ln.message))):
                j += 1
                continue
            break
    return raw[j:]


READY_TEXT = "The server is fired up and ready to roll!"  # docs/reference/sglang.md §5.1 step 10


def is_launch_line(line: Any) -> bool:
    """A launch's ``server_args=`` line (its whole argument list), not a traceback frame that passes
    ``server_args=`` on (0.5.9 scheduler.py ``HiRadixCache(params=params, server_args=server_args)``):
    where a log file's launches begin (`current_launch`, the gate's restart check)."""
    msg = line.message if isinstance(line, LogLine) else str(line)
    return _SERVER_ARGS_MARK in msg and _SERVER_ARGS_RE.search(msg) is not None


def is_ready_line(line: Any) -> bool:
    msg = line.message if isinstance(line, LogLine) else str(line)
    return READY_TEXT in msg


# Logged by every rank once torch.distributed's group is formed (docs/reference/sglang.md §5.1
# step 2). The rendezvous blocks until all ranks of all nodes connected to the dist-init address,
# so on a worker node of a multi-node server this line is the proof that it joined rank 0.
# "Init torch distributed ends. elapsed=..., mem usage=..." up to 0.5.20; from 0.5.21 "Init
# parallel ends. elapsed=... s", logged at the same point after the same rendezvous
# (srt/distributed/bootstrap.py `_init_parallel_groups` of each wheel).
JOINED_TEXT = "Init torch distributed ends."
JOINED_TEXT_0521 = "Init parallel ends."


def is_joined_line(line: Any) -> bool:
    msg = line.message if isinstance(line, LogLine) else str(line)
    return JOINED_TEXT in msg or JOINED_TEXT_0521 in msg


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask API keys: the given secrets in every form a log line carries them, and whatever a
    secret field or flag holds (``api_key='...'`` in the ``server_args=`` line,
    docs/reference/sglang.md §1.3; ``--api-key X``; ``Bearer X``). One definition:
    ``sglang_secrets.redact_text``."""
    return redact_text(text, secrets)


def summarize(lines: Sequence[Any]) -> dict[str, Any]:
    """Everything the gate reports from one start's log lines."""
    parsed = _as_parsed(lines)
    server_args = parse_server_args(parsed)
    sa = server_args or {}
    served = sa.get("served_model_name")
    return {
        "server_args": server_args,
        "served_model_name": served if isinstance(served, str) else None,
        "capacity": parse_capacity(parsed),
        "kv_pools": parse_kv_pools(parsed),
        "mamba_cache": parse_mamba_cache(parsed),
        "speculative": parse_speculative(parsed, server_args),
        "warnings": find_warnings(parsed),
        "fatal": find_fatal(parsed),
        "ready_line_seen": any(is_ready_line(ln) for ln in parsed),
        "line_count": len(parsed),
    }
