# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""SGLang's log line: its prefix (time, ranks, level), the prefixes log collectors put in front of it,
and the line-level helpers every reader of the log shares (sglang_log for the start-up facts,
sglang_fatal for the fatal errors). Standard library only.

Facts are cited as ``docs/reference/sglang.md §x.y``.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

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
    # a wrapper's stamp names no rank: a ranked prefix is SGLang's own, whatever its message starts with
    wrapped = None if m.group("ranks").strip() else _WRAPPED_PREFIX_RE.match(m.group("msg"))
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
