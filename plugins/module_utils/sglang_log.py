# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Pure parsers for SGLang's start-up log.

Shared by the ``sglang_ready`` Ansible module (imported as
``ansible.module_utils.sglang_log``) and the tuner (``sglang_utils.sglang_log``), so it uses the
standard library only and imports nothing from this package but ``sglang_secrets`` (the one
definition of how secrets are masked; a relative import, which Ansible resolves when it builds
the module).

Everything here takes text or lists of lines and returns plain ``dict``/``list`` values that
Ansible can serialise. Lines that do not parse are skipped: a log is evidence from a process
that may have been killed mid-write, and a report with ``None`` in it beats a crash.

Facts are cited as ``docs/reference/sglang.md §x.y``.
"""

from __future__ import annotations

import ast
import calendar
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple, Sequence

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
# Line level
# --------------------------------------------------------------------------------------------

# docs/reference/sglang.md §1.1: "[%(asctime)s{maybe_ms}{prefix}] %(message)s", datefmt "%Y-%m-%d %H:%M:%S",
# maybe_ms ".%(msecs)03d" with SGLANG_LOG_MS=1, prefix " DPn"/" PPn"/" ATTN_CPn"/" MOE_DPn"/
# " TPn"/" EPn" (TP only when tp_size > 1). The prefix is searched for, not anchored: journald
# short formats, `docker logs -t` timestamps and tqdm progress bars written without a newline
# all end up in front of it in real logs.
_PREFIX_RE = re.compile(
    r"\[(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
    r"(?P<ranks>(?:\s+[A-Z][A-Z_]*\d+)*)\]\s?(?P<msg>.*)$"
)
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)$")
# A wrapper's own stamp and level in front of SGLang's line: "[2025-04-03 12:05:45,155] INFO: [2025-04-03
# 12:05:45 TP1] KV Cache is allocated. ..." (a relay through Python logging's "[%(asctime)s]
# %(levelname)s: %(message)s"). SGLang's own message never starts with a prefix of its own shape (its
# format is "[%(asctime)s{maybe_ms}{prefix}] %(message)s", docs/reference/sglang.md §1.1), so a second
# prefix right after the first, with at most a level word between them, is SGLang's and the first is
# the wrapper's: its ranks, its level and its message are read from the inner one.
_WRAPPED_PREFIX_RE = re.compile(r"^(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL):?\s+)?(?=\[\d{4}-\d{2}-\d{2}[ T])")
# Uvicorn's "[%(asctime)s] %(levelprefix)s %(message)s" (docs/reference/sglang.md §1.1) and the level-tagged form
# that SGLang's main process uses before the server_args line, e.g.
# "[2026-02-27 14:33:03] WARNING server_args.py:2326: KV cache is forced as chunk cache ...".
_UVICORN_RE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+(?P<msg>.*)$")
_LEVEL_RE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?P<where>[\w./-]+\.py:\d+):\s?(?P<msg>.*)$")


# Prefixes that log collectors put in front of a line without SGLang's own prefix (a traceback
# line, a foreign library): `docker logs -t` (RFC 3339), journalctl short/short-iso/short-precise,
# short-full ("Sun 2026-06-28 15:16:45 CEST host python3[1234]: "), short-monotonic
# ("[  123.456789] host python3[1234]: ") and short-unix ("1719580605.123456 host python3[1234]: "),
# docker compose ("sglang-1  | ", sgl-project/sglang issue #4968), `kubectl logs --prefix`
# ("[pod/NAME/CONTAINER] ") and Google Cloud Logging's entries copied with their severity before the
# RFC 3339 stamp ("ERROR 2026-06-15T14:10:59.392125190Z AssertionError: ...", a GKE server's traceback
# in sgl-project/sglang issue #28702; severities as Cloud Logging's LogSeverity names them), or in
# brackets ("[2025-11-06T02:08:28.503Z]   File ...", issue #12827: UTC only, with its zone, so never
# SGLang's own local "[2025-11-06 02:08:28]"), and a launcher that relays the server's output through
# Python's logging in "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (allenai/olmocr
# olmocr/pipeline.py: `sglang_logger.info(line)` and `logger.info(line)` of each line of its SGLang
# server, "2025-03-08 02:04:48,693 - __main__ - INFO -   File ...", allenai/olmocr issue #105; asctime's
# comma before the milliseconds is logging's default), and Ray's driver printing an actor's output
# ("(SGLangEngine pid=23902) ", "(WorkerDict pid=616, ip=192.168.149.159) ": ray-project/ray
# python/ray/_private/worker.py print_worker_logs, "({actor or task name} pid={pid}, ip={ip}) ", the ip
# only for another node's; the SGLang engines of THUDM/slime issue #1314 and volcengine/verl's rollouts),
# and mpirun's --tag-output ("[1,1]<stderr>:", job and rank) with --timestamp-output's ctime before it
# ("Thu Jan 23 11:55:50 2025[1,1]<stderr>:    scheduler.event_loop_overlap()": a multi-node server started
# with mpirun, sgl-project/sglang issue #3065), and a container runtime's CRI log file, as a node's
# /var/log/pods holds it and log shippers read it: "<RFC 3339 stamp> <stdout|stderr> <F|P> " (F a whole
# line, P a part of one the runtime split; kubernetes/kubernetes pkg/kubelet/kuberuntime/logs/logs.go
# parseCRILog), and Grafana's "Download logs" as text of a Loki query: "<epoch ms>\t<ISO 8601 UTC>\t<line>"
# (grafana/grafana public/app/features/inspector/utils/download.ts downloadLogsModelAsTxt: `row.timeEpochMs +
# '\t' + dateTime(row.timeEpochMs).toISOString() + '\t' + entry`; a GLM-5.1 PP2 x ATTN_CP8 server's traceback
# exported so, sgl-project/sglang issue #25887).
_COLLECTOR_RE = re.compile(
    r"^(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) (?=\d{4}-\d{2}-\d{2}T))?"
    r"(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s"
    r"(?:\S+ \S+?\[\d+\]: |std(?:out|err) [FP] )?"
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+ \S+?\[\d+\]: "
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+?\[\d+\]: "  # journalctl --no-hostname
    r"|[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+ \S+ \S+?\[\d+\]: "
    r"|\[\s*\d+\.\d+\] \S+ \S+?\[\d+\]: "
    r"|\d{9,}\.\d+ \S+ \S+?\[\d+\]: "
    r"|[\w.-]+\s+\| "
    r"|\[pod/[^\]]+\] "
    r"|\[\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\]\s"
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} - [\w.]+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    r"|\((?:[^()\s]+ )?pid=\d+(?:, ip=[^()\s]+)?\) "
    r"|(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})?\[[^\]\s]+\]<std(?:out|err)>:"
    r"|\d{10,13}\t\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\t)"
)
# NVIDIA Dynamo's SGLang worker (python -m dynamo.sglang) hands SGLang's logging to its Rust runtime: it points
# SGLANG_LOGGING_CONFIG_PATH at a config whose only handler, dynamo.runtime.logging.LogHandler, formats a record
# as "%(message)s" and passes it, its level and "{module}.{funcName}" as the target to Rust's tracing, which
# writes "<RFC 3339 UTC stamp> <level, right-aligned in 5> <target>: <message>" (ai-dynamo/dynamo
# components/src/dynamo/runtime/logging.py configure_sglang_logging and LogHandler.emit; its
# VllmColorFormatter copies the shape: f"{ts} {level:>5} {target}: {msg}", "%Y-%m-%dT%H:%M:%S.%fZ"):
# "2025-12-10T13:50:29.938649Z  INFO memory_pool._finalize_allocation_log: KV Cache is allocated. ..."
# (ai-dynamo/dynamo issue #4855), "2025-05-15T08:05:10.734Z  INFO worker.generate: ..." (issue #1089). SGLang's
# own prefix is gone (its configure_logger applies that config instead of its format), so the stamp, the
# level and the target are the line's prefix: no rank is named. Rust's own targets ("dynamo_runtime::...")
# take the same shape. Tracing's level names are Rust's: WARN is Python's WARNING, TRACE below DEBUG.
_DYNAMO_RE = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z)\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR)\s+"
    r"(?P<target>[\w.<>-]+(?:::[\w.<>-]+)*): (?P<msg>.*)$"
)
_DYNAMO_LEVELS = {"WARN": "WARNING", "TRACE": "DEBUG"}
# What Ray's log deduplication appends to a line several actors printed alike: " [repeated 2x across
# cluster]", the first time followed by " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 ...)"
# (ray-project/ray python/ray/_private/ray_logging/__init__.py DedupState.formatted, _warn_once): not the
# line's words ("subprocess.CalledProcessError: ... exit status 1. [repeated 2x across cluster]", THUDM/slime
# issue #1314)
_RAY_DEDUP_RE = re.compile(r" \[repeated \d+x across cluster\](?: \(Ray deduplicates logs by default\..*\))?\s*$")
# Terminal colours (uvicorn colours its level when its output is a terminal)
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class LogLine:
    """One log line, split into SGLang's prefix fields and the message.

    ``timestamp`` is ``None`` for lines without SGLang's prefix (tracebacks, tqdm bars, other
    libraries); their ``message`` is the stripped raw text.
    """

    raw: str
    message: str
    timestamp: str | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    level: str | None = None
    where: str | None = None
    uvicorn: bool = False

    @property
    def sglang(self) -> bool:
        return self.timestamp is not None

    @property
    def rank_label(self) -> str:
        return " ".join(f"{k}{v}" for k, v in self.ranks.items())


def split_lines(text: str) -> list[str]:
    """Split on ``\\n``, ``\\r\\n`` and lone ``\\r`` (tqdm redraws with carriage returns)."""
    if not text:
        return []
    return re.split(r"\r\n|\r|\n", text)


def _parse_ranks(text: str) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for token in text.split():
        m = _RANK_RE.match(token)
        if m:
            ranks[m.group(1)] = int(m.group(2))
    return ranks


def parse_line(raw: str) -> LogLine | None:
    """Parse one line; ``None`` for blank lines."""
    if raw is None:
        return None
    text = _RAY_DEDUP_RE.sub("", _ANSI_RE.sub("", raw.rstrip("\n")))
    if not text.strip():
        return None
    m = _PREFIX_RE.search(text)
    if not m:
        bare = _COLLECTOR_RE.sub("", text, count=1)
        # Dynamo's stamp is itself a collector's shape: read it on the line as written, or behind a collector's
        dyn = _DYNAMO_RE.match(text) or _DYNAMO_RE.match(bare)
        if dyn is not None:
            level = dyn.group("level")
            return LogLine(
                raw=text,
                message=dyn.group("msg").rstrip(),
                timestamp=dyn.group("ts"),
                level=_DYNAMO_LEVELS.get(level, level),
                where=dyn.group("target"),
            )
        return LogLine(raw=text, message=bare.strip())
    wrapped = _WRAPPED_PREFIX_RE.match(m.group("msg"))
    inner = _PREFIX_RE.match(m.group("msg"), wrapped.end()) if wrapped else None
    if inner is not None:
        m = inner
    msg = m.group("msg").rstrip()
    level = where = None
    uvicorn = False
    um = _UVICORN_RE.match(msg)
    if um:
        level, msg, uvicorn = um.group("level"), um.group("msg"), True
    else:
        lm = _LEVEL_RE.match(msg)
        if lm:
            level, where, msg = lm.group("level"), lm.group("where"), lm.group("msg")
    return LogLine(
        raw=text,
        message=msg,
        timestamp=m.group("ts"),
        ranks=_parse_ranks(m.group("ranks")),
        level=level,
        where=where,
        uvicorn=uvicorn,
    )


def parse_lines(lines: Iterable[str]) -> list[LogLine]:
    out: list[LogLine] = []
    for raw in lines:
        for piece in split_lines(raw) if ("\r" in raw or "\n" in raw) else [raw]:
            parsed = parse_line(piece)
            if parsed is not None:
                out.append(parsed)
    return out


def _as_parsed(lines: Sequence[Any]) -> list[LogLine]:
    if lines and isinstance(lines[0], LogLine):
        return list(lines)
    return parse_lines(lines)


def parse_timestamp(ts: str | None) -> float | None:
    """SGLang timestamp (local time of the server host) -> epoch seconds, or ``None``. A stamp ending in
    ``Z`` (Dynamo's tracing, _DYNAMO_RE) is UTC."""
    if not ts:
        return None
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z?)$", ts)
    if not m:
        return None
    parts = [int(x) for x in m.groups()[:6]]
    frac = float("0." + m.group(7)) if m.group(7) else 0.0
    try:
        if m.group(8):
            return calendar.timegm((parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], 0, 0, 0)) + frac
        return time.mktime((parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], 0, 0, -1)) + frac
    except (OverflowError, ValueError):
        return None


def is_primary_rank(ranks: dict[str, int]) -> bool:
    """True for the process that speaks for the server: no prefix (TP=1) or every rank 0."""
    return all(v == 0 for v in ranks.values())


def _primary(lines: list[LogLine], pred: Callable[[LogLine], bool]) -> list[LogLine]:
    """Lines matching ``pred`` from the primary rank; if none, from the first rank seen.

    docs/reference/sglang.md §1.2/§1.3: the capacity line is printed by TP rank 0 only, the pool lines by every
    rank; a log that lost rank 0's lines (truncated, filtered) still has the others.
    """
    hits = [ln for ln in lines if pred(ln)]
    primary = [ln for ln in hits if is_primary_rank(ln.ranks)]
    if primary or not hits:
        return primary
    first = hits[0].ranks
    return [ln for ln in hits if ln.ranks == first]


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
# Fatal start-up errors
# --------------------------------------------------------------------------------------------


class _Reason(NamedTuple):
    """A specific fatal reason: its kind, its words, and the lines it is read on. ``on``: "any" (a
    line of SGLang's or another library's, not uvicorn's), "bind" (uvicorn's own lines too: the
    reasons a server cannot bind its address) or "launcher" (only the launcher's own line,
    _in_launcher_shape: words that elsewhere mean something else)."""

    kind: str
    rx: re.Pattern[str]
    on: str = "any"

    def reads(self, ln: LogLine) -> bool:
        if ln.uvicorn:
            return self.on == "bind"
        return self.on != "launcher" or _in_launcher_shape(ln)


# uvicorn cannot bind --host/--port: it logs the OSError as it is (uvicorn 0.55.0 uvicorn/server.py
# Server.startup: `except OSError as exc: logger.error(exc)`; SGLang 0.5.23 runs it with loop="uvloop",
# entrypoints/http_server.py, and its own "[%(asctime)s] %(levelprefix)s %(message)s", srt/utils/common.py
# set_uvicorn_logging_configs), in uvloop's (and CPython's asyncio) words: "[Errno 98] error while
# attempting to bind on address ('0.0.0.0', 30000): address already in use" (CPython 3.13+ asyncio:
# "...: [errno 98] address already in use"). Only "address already in use" is a taken port; the
# others are _BIND_FAILED. The server exits without an SGLang line saying why.
_UVICORN_BIND = r"error while attempting to bind on address \((?P<addr>.*?)\): (?:\[errno -?\d+\] )?"
# Also SGLang's own check of the ports it reserves (PortArgs.init_new with DP attention or
# --dist-init-addr, before the server_args line): "ValueError: port_base at 5001 is not available in 30
# seconds. ..." (0.5.9 srt/utils/common.py, 0.5.23 srt/utils/network.py `wait_port_available`);
# torch's TCPStore on the --dist-init-addr or NCCL port ("torch.distributed.DistNetworkError: The server
# socket has failed to listen on any local network address. port: 42173, useIpv6: false, code: -98, name:
# EADDRINUSE, message: address already in use": Ascend/sglang issue #625, sgl-project/sglang issue #37215
# with --dp 8; before libuv, "... failed to bind to [::]:29500 (errno: 98 - Address already in use)"),
# only the final error, not the per-address "[W socket.cpp] ... failed to listen on [::]:N" warnings; and
# a ZMQ port SGLang binds ("zmq.error.ZMQError: Address already in use (addr='tcp://...')",
# sgl-project/sglang issue #9396)
_PORT_IN_USE = _Reason(
    "port_in_use",
    re.compile(
        _UVICORN_BIND + r"address already in use.*"
        r"|\b\w+ at \d+ is not available in \d+ seconds\..*"
        r"|\bThe server socket has failed to listen on any local network address\..*[Aa]ddress already in use.*"
        r"|\bZMQError: Address already in use\b.*"
        # 0.5.23 with --enable-http-worker-reuseport and several tokenizer workers binds the socket
        # itself (entrypoints/http_server.py `_reserve_reuseport_socket`: `logger.error(error)` then
        # SystemExit(1)): SGLang's own logger, not uvicorn's, logs the bare OSError, no address
        # ("[ts] [Errno 98] Address already in use"). Read on any line, unlike _REUSEPORT_BIND_FAILED's
        # errnos: EADDRINUSE is only ever a bind's (or listen's) error, where EACCES is also a file's
        r"|^\[Errno 98\] [Aa]ddress already in use.*"
    ),
    "bind",
)
# Any other reason uvicorn cannot bind: "[Errno 99] ... ('10.1.2.3', 30000): cannot assign requested
# address" (a --host no interface of this machine has) or "[Errno 13] ... ('0.0.0.0', 80): permission
# denied" (a --port below 1024 without CAP_NET_BIND_SERVICE): freeing a port does not help, the
# address or port must change (its reason says which: _bind_advice)
_BIND_FAILED = _Reason("bind_failed", re.compile(_UVICORN_BIND + r"(?P<why>.+)"), "bind")
# a --host that does not resolve: create_server's getaddrinfo fails first, and uvicorn logs the
# socket.gaierror as it is ("[Errno -2] Name or service not known"; -3 while DNS is down, -5 for a
# name with no address), or SGLang's logger does in _reserve_reuseport_socket (above): the same
# kind, since the address must change
_HOST_UNRESOLVED = _Reason(
    "bind_failed",
    re.compile(
        r"^\[Errno -\d+\] (?:Name or service not known|Temporary failure in name resolution"
        r"|No address associated with hostname)$"
    ),
    "bind",
)
# The other bind errors of that reuseport path (_reserve_reuseport_socket, above: `logger.error(error)` of
# the OSError, then `raise SystemExit(1) from error`, so no traceback follows and the launcher exits 1):
# "[ts] [Errno 99] Cannot assign requested address" (a --host no interface of this machine has) and
# "[ts] [Errno 13] Permission denied" (a --port below 1024 without CAP_NET_BIND_SERVICE). A socket's
# OSError names no file, so the message is the error and nothing else, on the launcher's own line:
# SGLang's prefix with no rank and no level (configure_logger's "[%(asctime)s] %(message)s", 0.5.23
# srt/utils/common.py). Read only in that shape (_in_launcher_shape): a file's "PermissionError: [Errno
# 13] Permission denied: '/path'" in a traceback, or the words inside a warning, are not a bind error.
_REUSEPORT_BIND_FAILED = _Reason(
    "bind_failed",
    re.compile(r"^\[Errno (?:99|13)\] (?P<why>Cannot assign requested address|Permission denied)$"),
    "launcher",
)
# Lower in the list = more specific reason. docs/reference/sglang.md §5.3 and §2.6.
_SPECIFIC: list[_Reason] = [
    # 0.5.14+ adds the weights-first form (mem_cache/kv_cache_configurator.py, sgl-project/sglang
    # PRs #28683 and #28855: draft weights counted against --mem-fraction-static); 0.5.20+ the
    # hybrid models' state cache (Mamba / linear attention: Qwen3.5, Qwen3-Next), the same file,
    # in two forms: no memory left for it, or too few slots for one request at the speculative
    # ratio (0.5.23 :3152 "... state cache is too small to serve any requests"); 0.5.20+ the SWA
    # pool's cap leaving no room for the full pool (0.5.23 model_executor/pool_configurator.py
    # :1025 and its DSV4 form :1679); and the scheduler's own assert on a pool that holds no request
    # (0.5.9 managers/tp_worker.py: "max_running_request is zero")
    _Reason(
        "kv_pool_oom",
        re.compile(
            r"Not enough memory\. Please try to increase --mem-fraction-static"
            r"|Loaded weights leave no GPU memory for the KV cache"
            r"|Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache"
            r"|Hybrid \(mamba/linear-attention\) state cache is too small to serve"
            r"|SWA pool cap \(.*\) leaves no room for the full KV pool"
            r"|AssertionError: max_running_request is zero"
            # its sibling right after it, every release 0.4.10-0.5.23: `assert max_req_len > 0, "Memory
            # pool size is too small"` (a pool of a handful of tokens)
            r"|AssertionError: Memory pool size is too small"
        ),
    ),
    # "Capture cuda graph failed", "Capture prefill CUDA graph failed" (PrefillCudaGraphRunner), and
    # the draft's runners: "Capture frozen-KV MTP cuda graph failed" (0.5.12+,
    # frozen_kv_mtp_cuda_graph_runner.py), "Capture single-CG draft extend failed" (0.5.17+, on by
    # default: multi_layer_eagle_draft_extend_cuda_graph_runner.py)
    _Reason("cuda_graph", re.compile(r"Capture [\w \-]*?(?:cuda graph|draft extend) failed", re.I)),
    _Reason(
        "out_of_memory",
        # torch's runtime-error text, "CUDA error: out of memory" and, on ROCm builds, "HIP error: ...";
        # Triton's driver, loading a kernel: "RuntimeError: Triton Error [CUDA]: out of memory"
        # (triton-lang/triton third_party/nvidia/backend/driver.c gpuAssert)
        re.compile(
            r"\bOutOfMemoryError\b|\b(?:CUDA|NPU|HIP|XPU) out of memory\b|\b(?:CUDA|HIP) error: out of memory\b"
            r"|\bTriton Error \[(?:CUDA|HIP)\]: out of memory\b"
            # cuBLAS's handle or workspace not allocated, which SGLang's own warm-up probe reads as
            # out of memory too (0.5.23 multimodal_gen/runtime/server_warmup.py _OUT_OF_MEMORY_MARKERS)
            r"|\bCUBLAS_STATUS_ALLOC_FAILED\b|\bcudaErrorMemoryAllocation\b"
        ),
    ),
    # no code for this GPU in a kernel library: CUDA's cudaErrorNoKernelImageForDevice, and ROCm's
    # hipErrorInvalidDeviceFunction, which torch prints as "RuntimeError: HIP error: invalid device
    # function" (an image built for other gfx targets on an MI100: sgl-project/sglang issue #5775)
    _Reason(
        "kernel_image",
        re.compile(r"no kernel image is available for execution on the device|\bHIP error: invalid device function\b"),
    ),
    # faulthandler's dump of a native crash (SGLang enables it in every scheduler process): no
    # Python traceback follows, and when the dead rank is not the one the launcher waits on the
    # launcher hangs (sgl-project/sglang issue #3451, PR #20287); rank 0's CUDA-graph capture bar
    # (tqdm, no newline) may come first on the same line (issue #7847:
    # "Capturing batches (bs=448 ...):   8%|...| 4/51 [00:20<03:35,  4.59s/it]Fatal Python error: ...")
    # A C++ exception nobody caught aborts the process (libstdc++'s std::terminate), before faulthandler's
    # "Fatal Python error: Aborted": torch's NCCL watchdog on a collective that timed out or a CUDA error
    # ("terminate called after throwing an instance of 'c10::DistBackendError'" then "  what():  [PG ID 2 PG
    # GUID 3 Rank 1] Process group watchdog thread terminated with exception: CUDA error: an illegal memory
    # access was encountered": sgl-project/sglang issues #1693, #10216 and PR #14193). Its what() line is the
    # cause that "Aborted" does not name, so it outranks faulthandler's line and is read with it.
    # ROCm's runtime on a GPU page fault (an out-of-bounds kernel): ROCR-Runtime's VMFaultHandler prints
    # "Memory access fault by GPU node-N (Agent handle: 0x...) on address 0x.... Reason: <why>." and
    # calls std::abort() (ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp; older runtimes
    # without the agent handle), so faulthandler's "Fatal Python error: Aborted" and the launcher's exit
    # code -6 follow it, neither naming the fault (sgl-project/sglang issues #23784 and #37648 on MI355X,
    # #39517 on MI300X/MI325X/MI355X; at start-up in the graph capture, iree-org/wave issue #466). A
    # progress bar may come first on its line (ROCm/legacy-rocm-build issue #4021): the fault's own words are the reason
    _Reason("native_crash", re.compile(r"Memory access fault by GPU node-\d+ .*?Reason: [^.]+\.?")),
    _Reason("native_crash", re.compile(r"terminate called after throwing an instance of '[^']+'")),
    # torch's NCCL watchdog on a collective that never completed: LOG(ERROR) "[Rank N] Watchdog caught
    # collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, ...) ran for 600050 milliseconds
    # before timing out." (pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp WorkNCCL::checkTimeout),
    # then the same words in "Process group watchdog thread terminated with exception: ..." as the
    # watchdog takes the process down, and only after a frame dump the uncaught DistBackendError above.
    # At start-up it is a rank that never reached the collective: a node of a multi-node server that died
    # or cannot reach the others (a head node's log 10 minutes after its weights loaded, its peers on the
    # other node gone: sgl-project/sglang issues #3368, #3424, #3783). The first such line is the reason; the
    # terminate line, when it comes, still names the same cause (it ranks above this one)
    _Reason(
        "native_crash",
        re.compile(r"(?:\[Rank \d+\] )?Watchdog caught collective operation timeout: .+"),
    ),
    _Reason("native_crash", re.compile(r"(?:^|(?<=\]))Fatal Python error: .+")),
    _PORT_IN_USE,
    _BIND_FAILED,
    _HOST_UNRESOLVED,
    _REUSEPORT_BIND_FAILED,
    _Reason(
        "bad_arguments",
        re.compile(
            r"^(?:[\w. /-]+: )?error: (?:unrecognized arguments|argument |the following arguments are required"
            r"|invalid choice|ambiguous option)"
        ),
    ),
]
# The last line of a Python traceback: "ValueError: ...", "torch.OutOfMemoryError: ...",
# "AssertionError" (bare assert, docs/reference/sglang.md §2.2), "RuntimeError: NCCL error: ...".
# Python's bare `Exception` too: SGLang raises it ("Exception: Capture cuda graph failed: ...").
_EXC_RE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*(?P<name>[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception)(?::\s*(?P<text>.*))?$"
)
# Generic "something died" lines, most informative first; used when no exception line is there.
_WRAPPERS = [
    ("scheduler_dead", re.compile(r"Rank \d+ scheduler (?:is dead|died during initialization).*")),
    # SGLang's subprocess liveness monitor (sgl-project/sglang PR #18582, v0.5.10): "Subprocess scheduler_0 (pid=1225)
    # crashed with exit code -9. Triggering cleanup..." (a kill -9 prints no traceback)
    ("subprocess_crashed", re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code -?\d+.*")),
    # a worker node's launcher (--node-rank >= 1, every release 0.4.6-0.5.23: entrypoints/engine.py joins its
    # schedulers instead of serving): "Scheduler or DataParallelController 4242 terminated with -9", the only
    # word of a scheduler killed without a traceback; the launcher then joins the next one, which may hang, so
    # the unit stays up and its stand-in health server answers 200. A nonzero code only: 0 is an orderly exit.
    ("subprocess_crashed", re.compile(r"Scheduler or DataParallelController \d+ terminated with -?[1-9]\d*\s*$")),
    # the scheduler's hard watchdog, which then SIGQUITs the launcher: "Scheduler watchdog timeout
    # (self.watchdog_timeout=300, self.soft=False)", before it "Watchdog timeout
    # (self.watchdog_timeout=300)". A soft one (`self.soft=True`: --soft-watchdog-timeout, and every
    # tokenizer/detokenizer watchdog) only logs, the server goes on (python/sglang/srt/utils/watchdog.py)
    (
        "watchdog_timeout",
        re.compile(r"^(?:Scheduler )?[Ww]atchdog timeout \(self\.watchdog_timeout=[^,)]*(?:, self\.soft=False)?\).*"),
    ),
    ("scheduler_exception", re.compile(r"Scheduler hit an exception.*")),
    ("init_failed", re.compile(r"Initialization failed.*")),
    ("child_failed", re.compile(r"Received sigquit from a child process.*")),
    # the tokenizer manager's handler once it runs (0.5.5 on, tokenizer_manager.py): "SIGQUIT
    # received. signum=None, frame=None. It usually means one child failed."
    ("child_failed", re.compile(r"SIGQUIT received\..*")),
    ("subprocess_exited", re.compile(r"sglang subprocess exited with code.*")),
    ("subprocess_exited", re.compile(r"Server process exited with code.*")),
]
# Kinds that only say something died: the line naming why (an exception, an OOM) usually follows.
_GENERIC_KINDS = frozenset([wrapper[0] for wrapper in _WRAPPERS] + ["traceback"])
_TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
# Tracebacks SGLang logs for an exception it handled and starts anyway: the optional Responses API's
# import (http_server.py lifespan: logger.warning(f"Can not initialize OpenAIServingResponses,
# error: {traceback}"), at every boot of an environment without openai_harmony, up to 0.5.1x;
# sgl-project/sglang PR #28349 made it one line because it "look[ed] exactly like a fatal startup
# error"). Its body and exception line, up to SGLang's next line, are not fatal.
_HANDLED_TRACEBACK_RE = re.compile(
    r"Can not initialize OpenAIServingResponses, error: Traceback"
    # the same from 0.5.20 on, with --log-level debug: a one-line warning ("OpenAI Responses API
    # (/v1/responses) disabled: ..."), then logger.debug(f"OpenAIServingResponses init traceback:\n
    # {get_exception_traceback()}") (http_server.py lifespan, 0.5.20-0.5.23: "must not look like a
    # fatal error")
    r"|OpenAIServingResponses init traceback:"
    # logger.exception in the custom all-reduce's topology check, which then returns False and
    # goes on without it: "NVLink detection failed. This is normal if your machine has no NVLink
    # equipped." and, on ROCm, logger.error(..., exc_info=error) "AMD 1 hop XGMI detection failed."
    # (srt/distributed/device_communicators/custom_all_reduce_utils.py `is_full_nvlink`, 0.5.9-0.5.23)
    r"|NVLink detection failed\. This is normal|AMD 1 hop XGMI detection failed\."
    # the warm-up's own POST /freeze_gc timing out (requests' ReadTimeout), logged with exc_info
    # just before the ready line, and the server goes on (0.5.20-0.5.23 http_server.py
    # _freeze_gc_after_server_warmup: logger.warning("post-warmup freeze_gc failed", exc_info=True))
    r"|post-warmup freeze_gc failed"
)
# The same handled import in its older form (http_server.py lifespan before the rename of PR #10802,
# sgl-project/sglang 0025436e: `traceback.print_exc()` then `logger.warning(f"Can not initialize
# OpenAIServingResponses, error: {e}")`): the bare traceback comes first, the warning after it.
_HANDLED_AFTER_RE = re.compile(r"Can not initialize OpenAIServingResponses, error: (?!Traceback)")
# The same shape from SGLang's `retry()` (srt/utils/common.py, 0.5.5-0.5.23: `traceback.print_exc()`
# on every failed try, then "retry() failed once (Nth try, maximum M retries). Will delay ...": a
# try follows) and from its caller at start-up, the Hugging Face check for a quantization file of
# a model given by repo id (srt/configs/model_config.py: the last try's exception caught, "Failed to
# load hf_quant_config.json for model X: ...", and the start goes on). A Hugging Face hiccup (a 503,
# a read timeout) logs these on a server that then starts; SGLang's docs CI logs show both. The
# message may come without SGLang's prefix (a process whose logger has no format), so it is matched
# at the start of the line's message either way.
_RETRIED_AFTER_RE = re.compile(r"^(?:retry\(\) failed once \(|Failed to load hf_quant_config\.json for model )")
# Inside a traceback, an exception whose class name does not end in Error/Exception, named with its
# module: "triton.runtime.errors.OutOfResources: out of resource: shared memory, ..." (sgl-project/sglang
# issues #8513, #2384).
_QUALIFIED_EXC_RE = re.compile(r"^(?:[a-z_]\w*\.)+(?P<name>[A-Z]\w*):\s*(?P<text>.+)$")
# "Rank 0 scheduler is dead." is followed by "Exit code: -9" (killed by a signal) and the
# launcher's own EOFError, the consequence of the death rather than its cause (0.5.9 engine.py
# `_wait_for_scheduler_ready`)
_EXIT_CODE_RE = re.compile(r"^Exit code: (-?\d+)")
_CONSEQUENCES = frozenset(["EOFError", "BrokenPipeError", "ConnectionResetError"])
_CHAINED_RE = re.compile(r"During handling of the above exception|The above exception was the direct cause")


def _exception_line(msg: str, in_traceback: bool = False) -> re.Match[str] | None:
    # "Error: ..." style words inside prose do not end a traceback; require the canonical form
    # (any class name only when qualified by its module, and only inside a traceback).
    m = _EXC_RE.match(msg.strip())
    if m is None and in_traceback:
        m = _QUALIFIED_EXC_RE.match(msg.strip())
    return m


def find_fatal(lines: Sequence[Any]) -> dict[str, Any] | None:
    """The most specific fatal start-up error in ``lines``, or ``None``.

    Returns ``{"kind", "reason", "line", "index", "trigger", "generic"}``: ``reason`` is the line
    a human would want to read first (e.g. ``RuntimeError: Not enough memory. ...`` rather than
    ``Traceback (most recent call last):`` or ``Scheduler hit an exception``), ``trigger`` the
    first fatal line seen (what fails the gate at once), ``generic`` whether the reason only says
    that something died (a reader of a growing log may wait briefly for the specific line).
    """
    parsed = _as_parsed(lines)
    trigger: tuple[int, LogLine] | None = None
    specific: tuple[int, str, str, int] | None = None  # (index, kind, reason, rank in _SPECIFIC)
    exceptions: list[tuple[int, str]] = []
    wrapper: tuple[int, str, str, int] | None = None
    in_traceback = handled = False
    # what was found before the bare traceback now being read (the older handled form's undo point)
    before_bare: tuple[Any, Any, Any, int] | None = None
    for i, ln in enumerate(parsed):
        msg = ln.message
        if ln.uvicorn:
            handled = False  # a handled traceback's body ends at the next line of SGLang's or uvicorn's
            rank = next((r for r, spec in enumerate(_SPECIFIC) if spec.reads(ln) and spec.rx.search(msg.strip())), None)
            if rank is not None and specific is None:
                specific = (i, _SPECIFIC[rank].kind, msg.strip(), rank)
                trigger = trigger or (i, ln)
            continue
        if before_bare is not None and (
            (ln.sglang and _HANDLED_AFTER_RE.search(msg)) or _RETRIED_AFTER_RE.match(msg.strip())
        ):
            trigger, specific, wrapper = before_bare[0], before_bare[1], before_bare[2]
            del exceptions[before_bare[3] :]
            before_bare, in_traceback = None, False
            continue
        if ln.sglang:
            before_bare = None
        elif before_bare is None and _TRACEBACK_RE.search(msg):
            before_bare = (trigger, specific, wrapper, len(exceptions))
        if handled and not ln.sglang:
            continue  # the handled traceback's body
        handled = bool(_HANDLED_TRACEBACK_RE.search(msg))
        if handled:
            in_traceback = False
            continue
        hit = False
        if _TRACEBACK_RE.search(msg):
            # "[ts TP0] Scheduler hit an exception: Traceback (...)" is both a traceback start
            # and a wrapper line, so the checks below still run
            in_traceback = True
            hit = True
        for rank, (kind, rx, _on) in enumerate(_SPECIFIC):
            m = rx.search(msg) if _SPECIFIC[rank].reads(ln) else None
            if m:
                # the most specific wins, not the first: a chained traceback names the CUDA
                # out-of-memory error before the "Capture cuda graph failed" that explains it,
                # and the two need opposite --mem-fraction-static changes
                if specific is None or rank < specific[3]:
                    # a native crash glued to a progress bar: the crash's words, not the bar's
                    specific = (i, kind, (m.group(0) if kind == "native_crash" else msg).strip(), rank)
                hit = True
                break
        exc = _exception_line(msg, in_traceback and not ln.sglang)
        if exc and (in_traceback or ln.sglang is False):
            is_wrapper = any(wrapper[1].search(msg) for wrapper in _WRAPPERS)
            if not is_wrapper:
                exceptions.append((i, msg.strip()))
                hit = True
        for prio, (kind, rx) in enumerate(_WRAPPERS):
            m = rx.search(msg)
            if m:
                if wrapper is None or prio < wrapper[3]:
                    wrapper = (i, kind, m.group(0).strip(), prio)
                hit = True
                break
        if hit and trigger is None:
            trigger = (i, ln)
    if trigger is None:
        return None
    root = _root_exception(parsed, exceptions) if exceptions else None
    root_exc = _exception_line(root[1], True) if root is not None else None
    # the launcher's own EOFError after "Rank N scheduler is dead" is the death's consequence, not its cause
    consequence = (
        wrapper is not None
        and wrapper[1] == "scheduler_dead"
        and root_exc is not None
        and root_exc["name"] in _CONSEQUENCES
    )
    if specific is not None:
        idx, kind, reason = specific[:3]
        if reason.endswith("raised:"):
            # torch's BackendCompilerFailed puts its cause on the next line ("Capture cuda graph
            # failed: backend='inductor' raised:" then "OutOfResources: out of resource: shared
            # memory, ...": sgl-project/sglang#6001): the line without it names no cause
            nxt = next((ln.message.strip() for ln in parsed[idx + 1 :] if ln.message.strip()), "")
            reason = f"{reason} {nxt}".strip()
        elif kind == "bind_failed":
            reason += _bind_advice(reason)
        elif kind == "native_crash" and reason.startswith("terminate called"):
            nxt = next((ln.message.strip() for ln in parsed[idx + 1 :] if ln.message.strip()), "")
            reason += f": {' '.join(nxt.split()[1:])}" if nxt.startswith("what():") else ""
        elif kind == "cuda_graph" and _DEVICE_ASSERT_TRIGGERED_RE.search(reason):
            reason += _first_device_assert(parsed, idx)
    elif root is not None and not consequence:
        idx, reason, kind = root[0], root[1], "exception"
        if root_exc is not None and root_exc["text"] is None:
            reason += _failing_source(parsed, idx)
        elif root_exc is not None and not root_exc["text"].strip():
            reason += _message_below(parsed, idx)
        reason += _rendezvous_advice(reason)
    elif wrapper is not None:
        idx, kind, reason = wrapper[:3]
        reason += _exit_code(parsed, idx) if kind == "scheduler_dead" else ""
        if kind == "subprocess_crashed":
            code = re.search(r"(?:exit code|terminated with) (-?\d+)", reason)
            reason += _signal_words(int(code.group(1))) if code else ""
    else:
        idx, kind, reason = trigger[0], "traceback", trigger[1].message.strip()
    return {
        "kind": kind,
        "reason": reason[:1000],
        "line": parsed[idx].raw[:2000],
        "index": idx,
        "trigger": trigger[1].raw[:2000],
        "generic": kind in _GENERIC_KINDS,
    }


def _in_launcher_shape(ln: LogLine) -> bool:
    """Whether ``ln`` is a line of SGLang's launcher as its own logger writes it (the prefix, no rank,
    no level): the only line _REUSEPORT_BIND_FAILED's bare errno is a bind error on."""
    return ln.sglang and not ln.ranks and ln.level is None and not ln.uvicorn


def _bind_advice(reason: str) -> str:
    """ " (--host 10.1.2.3 is not an address of this machine: ...)": what to change for a bind that
    failed for another reason than a taken port, which the line itself does not say (the reuseport
    path's bare errno names no address: then the words name the flag only)."""
    if _HOST_UNRESOLVED.rx.search(reason):
        return " (--host does not resolve to an address here: give --host an address of this machine, or 0.0.0.0)"
    m = _BIND_FAILED.rx.search(reason) or _REUSEPORT_BIND_FAILED.rx.search(reason)
    if m is None:
        return ""
    addr = m.groupdict().get("addr")
    parts = addr.split(", ") if addr else []
    host = " " + parts[0].strip("'") if parts else ""
    port = " " + parts[1] if len(parts) > 1 else ""
    why = m.group("why").lower()
    if "cannot assign requested address" in why:  # EADDRNOTAVAIL
        return f" (--host{host} is not an address of this machine: give --host one of its addresses, or 0.0.0.0)"
    if "permission denied" in why:  # EACCES
        return (
            f" (port{port} needs a privilege to bind, as every port below 1024 does (CAP_NET_BIND_SERVICE):"
            " give --port 1024 or above)"
        )
    return f" (--host{host} --port{port} cannot be bound here: change the address or the port)"


# torch's TCPStore client never reached the rendezvous it was given: "torch.distributed.DistNetworkError: The
# client socket has timed out after 600000ms while trying to connect to (172.17.0.9, 46229)." (pytorch
# torch/csrc/distributed/c10d/socket.cpp throwTimeoutError; vllm-project/vllm issue #19670, FanqingM/MM-Eureka-V0
# issue #16), and before it the form naming the socket's errno: "The client socket has failed to connect to
# [host]:port (errno: 111 - Connection refused)." For SGLang that address is --dist-init-addr (or its own
# 127.0.0.1 port on one node): on a worker node (--node-rank >= 1) node 0 is not listening there, or cannot be
# reached. The exception says neither, so the reason says what to check.
_RENDEZVOUS_RE = re.compile(
    r"The client socket has (?:timed out after \S+ while trying to connect to \((?P<host>[^,()]+), (?P<port>\d+)\)"
    r"|failed to connect to \[?(?P<host2>[^\]\s]+?)\]?:(?P<port2>\d+) \(errno: \d+ - [^)]+\))"
)


def _rendezvous_advice(reason: str) -> str:
    """ " (torch's rendezvous at 10.0.0.1:5000 did not answer: ...)": what to check when a node could not
    reach the address torch.distributed meets at, which the exception does not say."""
    m = _RENDEZVOUS_RE.search(reason)
    if m is None:
        return ""
    host, port = m.group("host") or m.group("host2"), m.group("port") or m.group("port2")
    return (
        f" (torch's rendezvous at {host}:{port} did not answer: on a node other than 0, check that node 0"
        " (--node-rank 0) is up and was started with the same --dist-init-addr and --nnodes, that this node"
        " reaches that address, and that no firewall blocks the port between the nodes)"
    )


def _exit_code(parsed: list[LogLine], idx: int) -> str:
    """ " Exit code: -9 (killed by SIGKILL, ...)" from the line after a dead scheduler's, if there."""
    for ln in parsed[idx + 1 : idx + 4]:
        m = _EXIT_CODE_RE.match(ln.message.strip())
        if m:
            code = int(m.group(1))
            return f" Exit code: {code}{_signal_words(code)}"
    return ""


def _signal_words(code: int) -> str:
    """ " (killed by signal 9, SIGKILL: ...)" for a negative exit code (Python's killed-by-signal)."""
    if code >= 0:
        return ""
    names = {6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL: the kernel's OOM killer, or a kill -9", 11: "SIGSEGV"}
    return f" (killed by signal {-code}, {names.get(-code, 'see `kill -l`')})"


def _root_exception(parsed: list[LogLine], exceptions: list[tuple[int, str]]) -> tuple[int, str]:
    """The final exception of the first traceback chain (what Python reports as the error). An
    exception is chained when Python's "During handling ..." / "The above exception ..." line comes
    between it and the next traceback: its message may run several lines first (huggingface_hub's
    RepositoryNotFoundError prints four before the OSError it causes), so the whole stretch is read,
    up to _CHAIN_LOOKAHEAD lines."""
    for idx, text in exceptions:
        chained = False
        for ln in parsed[idx + 1 : idx + 1 + _CHAIN_LOOKAHEAD]:
            if _CHAINED_RE.search(ln.message):
                chained = True
                break
            if "Traceback (most recent call last)" in ln.message:
                break
        if chained:
            continue
        return idx, text
    return exceptions[-1]


_CHAIN_LOOKAHEAD = 40  # lines of an exception's message read for the chain's marker

# An item of a message that lists the errors it gathered: "- ImportError: ...: undefined symbol: ..."
_LISTED_ERROR_RE = re.compile(r"^- (?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): .+")


def _message_below(parsed: list[LogLine], idx: int) -> str:
    """ " <first line> (<first listed error>)" of an exception whose message starts on the line after its
    name, as sgl_kernel's ImportError does ("ImportError: " then "[sgl_kernel] CRITICAL: Could not load any
    common_ops library!", the places it tried, and "Error details from previous import attempts:" listing
    each attempt's error, "- ImportError: .../common_ops.abi3.so: undefined symbol: ..." or "- ImportError:
    libnuma.so.1: cannot open shared object file": sgl-project/sglang PR #13948 and issue #18203): the bare
    "ImportError:" names no cause, the listed error is the one to fix. The message ends at the next SGLang
    line, traceback, frame or exception line."""
    lines: list[str] = []
    for ln in parsed[idx + 1 : idx + 1 + _CHAIN_LOOKAHEAD]:
        msg = ln.message.strip()
        if ln.sglang or ln.uvicorn or _TRACEBACK_RE.search(msg) or _CHAINED_RE.search(msg):
            break
        if msg.startswith("File ") or _exception_line(msg):
            break
        lines.append(msg)
    if not lines:
        return ""
    listed = next((line[2:] for line in lines if _LISTED_ERROR_RE.match(line)), None)
    return f" {lines[0]}" + (f" ({listed})" if listed else "")


# A frame's header in a traceback: 'File "/x/sglang/srt/server_args.py", line 2423, in _handle_speculative_decoding'
_FRAME_RE = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)$')
# The markers CPython 3.11+ prints under a frame's source line (traceback.py: "^" the failing part, "~" the rest)
_CARETS_RE = re.compile(r"^[~^]+$")
_SOURCE_MAX = 200  # characters of a failing frame's source kept in the reason


def _failing_source(parsed: list[LogLine], idx: int) -> str:
    """ ": <source> (<file>:<line> in <function>)" for an exception line with no message (a bare
    ``assert``'s "AssertionError": SGLang's server_args.py has them, e.g. 0.5.5 :1577 / 0.5.9 :2423
    `assert (self.speculative_eagle_topk is None and self.speculative_num_draft_tokens is None)` when
    --speculative-num-steps is not given): what failed is only in the frame's source, which CPython prints
    between the last "File ..." line and the exception line. Which source lines depends on the Python: 3.10
    and 3.11 the line that made the test false ("and self.speculative_num_draft_tokens is None"), 3.12 the
    statement's first line ("assert (", completed here as "assert (...)"), 3.13 the statement's lines
    (CPython Lib/traceback.py FrameSummary, _extract_caret_anchors; 3.11+ add caret lines, skipped). ""
    when no source line is there (a frame without source, or no frame)."""
    source: list[str] = []
    for ln in reversed(parsed[max(0, idx - 12) : idx]):
        msg = ln.message.strip()
        if ln.sglang or ln.uvicorn:
            return ""
        frame = _FRAME_RE.match(msg)
        if frame:
            if not source:
                return ""
            text = " ".join(reversed(source))
            text = re.sub(r"([(\[{]) ", r"\1", re.sub(r" ([)\]}])", r"\1", text))
            opened = sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
            text += "...)" if opened > 0 and text.endswith("(") else ""
            if len(text) > _SOURCE_MAX:
                text = text[: _SOURCE_MAX - 3] + "..."
            where = f"{frame.group('file').rsplit('/', 1)[-1]}:{frame.group('line')} in {frame.group('func')}"
            return f": {text} ({where})"
        if not _CARETS_RE.match(msg):
            source.append(msg)
    return ""


# torch's error for a CUDA (or HIP) kernel that failed a device-side assert; the context is unusable after
# it, so a CUDA-graph capture that comes later fails with these words ("Capture cuda graph failed: CUDA
# error: device-side assert triggered": sgl-project/sglang issues #8230 and #8870, an EAGLE3 draft whose
# vocabulary or hot-token map does not fit the target's)
_DEVICE_ASSERT_TRIGGERED_RE = re.compile(r"\b(?:CUDA|HIP) error: device-side assert triggered", re.I)
# The kernel's own line, printed by the device's __assert_fail, one per failing thread: "/pytorch/aten/src/
# ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: [64,0,0] Assertion `-sizes[i] <=
# index && index < sizes[i] && "index out of bounds"` failed." (issue #8230, sglang 0.4.9.post2, torch 2.7.1;
# "Indexing.cu:1500: indexSelectSmallIndex: ... Assertion `srcIndex < srcSelectDimSize` failed.", issue #7139)
_DEVICE_ASSERT_RE = re.compile(
    r"(?:(?P<where>[\w.+-]+\.(?:cu|cuh|cpp|h|hpp):\d+):.*?)?Assertion `(?P<expr>.+)` failed\.?"
)


def _first_device_assert(parsed: list[LogLine], idx: int) -> str:
    """ " (first device-side assert: IndexKernel.cu:93: `... "index out of bounds"`)": the kernel assert that
    the capture's "device-side assert triggered" only reports (an index out of range in a GPU kernel, not a
    lack of memory, whatever the "Possible solutions" SGLang prints after it say). The first one, before the
    capture's line: every later CUDA call of the process fails after it. "" when the log has none."""
    for ln in parsed[:idx]:
        m = _DEVICE_ASSERT_RE.search(ln.message)
        if m:
            where = f"{m.group('where').rsplit('/', 1)[-1]}: " if m.group("where") else ""
            return f" (first device-side assert: {where}`{m.group('expr')[:_SOURCE_MAX]}`)"
    return ""


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
