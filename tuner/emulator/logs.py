"""SGLang's log lines, in SGLang's format (docs/reference/sglang.md §1).

Format: `[%Y-%m-%d %H:%M:%S{.mmm if SGLANG_LOG_MS=1}{rank prefix}] message`, no level name for
SGLang's own loggers; uvicorn lines as `[time] INFO:     message`. SGLang's loggers write to
stderr and uvicorn's access log to stdout (journald collects both). The line builders are pure
functions so tests and the module's parser can be checked against them without a process.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def rank_prefix(tp_rank: int | None, tp_size: int, dp_rank: int | None = None, dp_size: int = 1) -> str:
    """ " DP{n}" when data-parallel ranks exist, " TP{n}" only when tp_size > 1 (docs/reference/sglang.md §1.1)."""
    out = ""
    if dp_rank is not None and dp_size > 1:
        out += f" DP{dp_rank}"
    if tp_rank is not None and tp_size > 1:
        out += f" TP{tp_rank}"
    return out


def scheduler_prefixes(tp_ranks: list[int], tp_size: int, dp_size: int, attn_dp_size: int) -> list[str]:
    """The rank prefix of each scheduler process on this node (`tp_ranks`: its TP ranks), in the
    order SGLang launches them. Plain DP replicas (`dp_size` > 1): one TP group per replica, " DP{d}"
    then " TP{r}" (0.5.9 managers/data_parallel_controller.py launch_dp_schedulers). Attention DP
    (`attn_dp_size` > 1, `attention_dp_size`): one TP group whose ranks the DP controller launches
    with the rank's attention-DP rank as dp_rank, `tp_rank // (tp_size // attn_dp_size)` (0.5.9
    launch_tensor_parallel_group with compute_dp_attention_world_info from layers/dp_attention.py;
    0.5.23 the same method with runtime_context.py derive_attention_ranks, shown as
    `display_dp_rank`), so " DP{tp_rank // attn_tp_size} TP{tp_rank}": no attention-DP form of
    its own ("DP", as 0.5.23 scheduler.py configure_scheduler_process writes any dp_rank)."""
    if attn_dp_size > 1:
        attn_tp = max(1, tp_size // attn_dp_size)
        return [rank_prefix(r, tp_size, r // attn_tp, attn_dp_size) for r in tp_ranks]
    dp_ranks: list[int | None] = list(range(dp_size)) if dp_size > 1 else [None]
    return [rank_prefix(r, tp_size, d, dp_size) for d in dp_ranks for r in tp_ranks]


def _uvicorn_levelprefix(level: str) -> str:
    # uvicorn pads "LEVEL:" to 9 columns; the format adds one space (docs/reference/sglang.md §1.1).
    return (level.upper() + ":").ljust(9)


class Logger:
    """Writes SGLang-format lines; caches the timestamp text per second to keep the cost per line low."""

    def __init__(
        self,
        level: str = "info",
        http_level: str | None = None,
        log_ms: bool | None = None,
        out: TextIO | None = None,
        access_out: TextIO | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.level = LEVELS.get(level, 20)
        self.http_level = LEVELS.get(http_level or level, 20)
        self.log_ms = (os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true")) if log_ms is None else log_ms
        self.out = out if out is not None else sys.stderr
        self.access_out = access_out if access_out is not None else sys.stdout
        self.clock = clock
        self._sec = -1
        self._sec_text = ""

    def stamp(self) -> str:
        now = self.clock()
        sec = int(now)
        if sec != self._sec:
            self._sec = sec
            self._sec_text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sec))
        if self.log_ms:
            return f"{self._sec_text}.{int((now - sec) * 1000):03d}"
        return self._sec_text

    def _write(self, stream: TextIO, text: str) -> None:
        try:
            stream.write(text + "\n")
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def info(self, message: str, prefix: str = "") -> None:
        """An SGLang INFO line, e.g. `[2026-06-14 09:02:31 TP0] max_total_num_tokens=...`."""
        if self.level <= 20:
            self._write(self.out, f"[{self.stamp()}{prefix}] {message}")

    def warning(self, message: str, prefix: str = "") -> None:
        if self.level <= 30:
            self._write(self.out, f"[{self.stamp()}{prefix}] {message}")

    def error(self, message: str, prefix: str = "") -> None:
        if self.level <= 40:
            self._write(self.out, f"[{self.stamp()}{prefix}] {message}")

    def located(self, level: str, where: str, message: str) -> None:
        """Lines logged while arguments are resolved: `[time] WARNING server_args.py:2364: message`."""
        if self.level <= LEVELS.get(level.lower(), 20):
            self._write(self.out, f"[{self.stamp()}] {level.upper()} {where}: {message}")

    def prelaunch(self, style: str, level: str, where: str, message: str) -> None:
        """A line logged while arguments are resolved, in the release's form (versions.prelaunch_log):
        "located" as above, "plain" `[time] message` (0.5.11+ logging.basicConfig in prepare_server_args,
        which shows INFO and above whatever --log-level says)."""
        if style == "located":
            self.located(level, where, message)
        else:
            self._write(self.out, f"[{self.stamp()}] {message}")

    def raw(self, text: str) -> None:
        """Unformatted text (tracebacks continue over several lines)."""
        self._write(self.out, text)

    def uvicorn(self, message: str, level: str = "INFO") -> None:
        if self.http_level <= LEVELS.get(level.lower(), 20):
            self._write(self.out, f"[{self.stamp()}] {_uvicorn_levelprefix(level)} {message}")

    def access(self, client: str, method: str, path: str, status: int, reason: str) -> None:
        """`[time] INFO:     127.0.0.1:51872 - "POST /generate HTTP/1.1" 200 OK` (docs/reference/sglang.md §1.1)."""
        if self.http_level <= 20:
            self._write(
                self.access_out, f'[{self.stamp()}] INFO:     {client} - "{method} {path} HTTP/1.1" {status} {reason}'
            )


# ---- message builders (pure): the text after the bracketed prefix ---------------------------------


def capacity_line(
    max_total_num_tokens: int,
    chunked_prefill_size: int,
    max_prefill_tokens: int,
    max_running_requests: int,
    context_len: int,
    available_gpu_mem: float,
) -> str:
    """The scheduler's capacity line, field order of docs/reference/sglang.md §1.2."""
    return (
        f"max_total_num_tokens={max_total_num_tokens}, chunked_prefill_size={chunked_prefill_size}, "
        f"max_prefill_tokens={max_prefill_tokens}, max_running_requests={max_running_requests}, "
        f"context_len={context_len}, available_gpu_mem={available_gpu_mem:.2f} GB"
    )


def kv_cache_line(tokens: int, k_gb: float, v_gb: float, dtype: str | None = None) -> str:
    """MHA/GQA form of the KV pool line: 0.5.5-0.5.12 memory_pool.py _finalize_allocation_log, and
    0.5.23's, which adds `dtype: ...` (pass `dtype` for it)."""
    mid = f"dtype: {dtype}, " if dtype else ""
    return f"KV Cache is allocated. {mid}#tokens: {tokens}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"


def mamba_cache_line(
    size: int,
    conv_gb: float,
    ssm_gb: float,
    intermediate_ssm_gb: float | None = None,
    intermediate_conv_gb: float | None = None,
) -> str:
    """Hybrid models' state pool line; the intermediate caches appear with speculation (§1.3)."""
    text = f"Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {conv_gb:.2f}GB, ssm_state size: {ssm_gb:.2f}GB "
    if intermediate_ssm_gb is not None:
        text += (
            f"intermediate_ssm_state_cache size: {intermediate_ssm_gb:.2f}GB "
            f"intermediate_conv_window_cache size: {intermediate_conv_gb or 0.0:.2f}GB "
        )
    return text


def decode_batch_line(
    *,
    running: int,
    tokens: int,
    token_usage: float,
    gen_throughput: float,
    queue: int,
    accept_len: float | None = None,
    accept_rate: float | None = None,
    hybrid: bool = False,
    mamba_num: int = 0,
    mamba_usage: float = 0.0,
    cuda_graph: bool = True,
) -> str:
    """`Decode batch, ...` every --decode-log-interval steps (docs/reference/sglang.md §1.4), hybrid form when asked."""
    if hybrid:
        mid = (
            f"#full token: {tokens}, full token usage: {token_usage:.2f}, "
            f"mamba num: {mamba_num}, mamba usage: {mamba_usage:.2f}, "
        )
    else:
        mid = f"#token: {tokens}, token usage: {token_usage:.2f}, "
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    return (
        f"Decode batch, #running-req: {running}, {mid}{spec}cuda graph: {cuda_graph}, "
        f"gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queue}"
    )


def prefill_batch_line(
    *,
    new_seq: int,
    new_token: int,
    token_usage: float,
    running: int,
    queue: int,
    input_throughput: float,
    hybrid: bool = False,
    mamba_usage: float = 0.0,
    pending: int = 0,
    style: str = "throughput-graph",
) -> str:
    """`Prefill batch, ...` for each prefill forward batch (docs/reference/sglang.md §1.4; hybrid form
    as seen in public logs), its tail in the release's order (versions.SGLangVersion.prefill_line).

    A long input prefilled in chunks logs one line per chunk: `#new-seq` counts the chunked request
    in every batch it is in and `#cached-token` stays 0 for its later chunks (PrefillAdder
    add_chunked_req passes prefix_len 0, schedule_policy.py 0.5.9-0.5.23); the emulator has no
    prefix cache, so it is 0 throughout. `#pending-token` (0.5.11+): the waiting requests' tokens
    plus what the chunked request has left after this chunk (`_get_num_pending_tokens`)."""
    if hybrid:
        usage = f"full token usage: {token_usage:.2f}, mamba usage: {mamba_usage:.2f}, "
    else:
        usage = f"token usage: {token_usage:.2f}, "
    head = (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: 0, {usage}"
        f"#running-req: {running}, #queue-req: {queue}, "
    )
    thr = f"input throughput (token/s): {input_throughput:.2f}"
    if style == "throughput-graph":
        return f"{head}{thr}, cuda graph: False"
    if style == "pending-graph-throughput":
        head += f"#pending-token: {pending}, "
    return f"{head}cuda graph: False, {thr}"


READY_LINE = "The server is fired up and ready to roll!"
NOT_ENOUGH_MEMORY = (
    "Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: self.server_args.mem_fraction_static={value}"
)
SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."

# The emulator's own line, at SIGTERM (SGLang prints nothing like it): whether this process kept
# the model's clock (server.py `clock`), for benches that read the log after the server is gone.
CLOCK_LINE = "Emulator clock: max lag {max_lag_ms} ms, {lag_resets} lag resets, model busy {model_busy_s} s"
CLOCK_RE = re.compile(r"Emulator clock: max lag ([0-9.]+) ms, ([0-9]+) lag resets, model busy ([0-9.]+) s")


def parse_clock_lines(text: str) -> list[dict[str, float]]:
    """Every CLOCK_LINE in a log, oldest first: {max_lag_ms, lag_resets, model_busy_s}."""
    return [
        {"max_lag_ms": float(m[1]), "lag_resets": int(m[2]), "model_busy_s": float(m[3])}
        for m in CLOCK_RE.finditer(text)
    ]
