# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""What ended a start: the most specific fatal error in an SGLang log (``find_fatal``), its kind and
the line a person should read first. Shared, through sglang_log, by the ``sglang_ready`` module and
the tuner. Standard library only, and the line model of sglang_lines.

Facts are cited as ``docs/reference/sglang.md §x.y``.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Sequence

from .sglang_lines import LogLine, _as_parsed


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
            nxt = _next_message(parsed, idx)
            reason = f"{reason} {nxt}".strip()
        elif kind == "bind_failed":
            reason += _bind_advice(reason)
        elif kind == "native_crash" and reason.startswith("terminate called"):
            nxt = _next_message(parsed, idx)
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


def _next_message(parsed: list[LogLine], idx: int) -> str:
    """The first non-blank message after line ``idx``: where a reason's line leaves its cause to the next
    one (torch's "raised:", libstdc++'s "what():")."""
    return next((ln.message.strip() for ln in parsed[idx + 1 :] if ln.message.strip()), "")


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
