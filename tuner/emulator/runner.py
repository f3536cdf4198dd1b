"""The process's life: start-up timeline, serving, faults and shutdown, as SGLang lives it.

Start-up order (docs/reference/sglang.md §5.1): `server_args=...`, distributed init, weight loading, KV (and
Mamba) pool allocation, CUDA-graph capture (then the draft model's), the capacity line, uvicorn
opening the port (/v1/models answers, /health is 503), warm-up, and `The server is fired up and
ready to roll!` (/health 200). Each phase takes its share of the start-up time, so a profile's
100 s and a test's 0.2 s run the same sequence.

Failures end the way SGLang's do: a scheduler exception is logged as `Scheduler hit an exception:
Traceback ...`, the parent logs `Received sigquit from a child process...` and kills its process
tree, itself included (SIGKILL; docs/reference/sglang.md §5.3 and §7.2).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web
from sglang_utils.sglang_releases import release_key

from . import __version__, adaptive, dp, graphs, logs, model, multinode, startup
from .engine import EngineSpec
from .faults import FaultSet
from .logs import Logger
from .memory import memory_figures
from .profile import Profile
from .resolve import ResolvedArgs, max_total_tokens_note, server_args_repr
from .server import EmulatorApp, UvicornAccessLogger
from .versions import SGLangVersion, attention_dp_size, dp_rank_count

# Shares of the start-up time (the warm-up takes what is left).
PHASE_INIT = 0.03
PHASE_LOAD = 0.60
PHASE_POOL = 0.02
PHASE_GRAPH = 0.12
PHASE_DRAFT = 0.08
PHASE_HTTP = 0.02


def emulator_version(version: str) -> str:
    """The `version` /server_info reports: the emulated SGLang version plus a PEP 440 local label.

    A parser that reads the leading `X.Y.Z` sees the SGLang version whose behaviour is emulated;
    the `+emulator.N` label keeps results from being mistaken for a real server's.
    """
    return f"{version}+emulator.{__version__}"


class Runner:
    """One emulated SGLang process: the start-up timeline, serving, faults, signals and shutdown."""

    def __init__(
        self, cfg: ResolvedArgs, profile: Profile, faults: FaultSet, startup_s: float, logger: Logger | None = None
    ) -> None:
        self.cfg = cfg
        self.p = profile
        self.faults = faults
        self.startup_s = startup_s
        v = cfg.values
        self.log = logger or Logger(level=v["log_level"], http_level=v["log_level_http"])
        self.k = cfg.num_steps if cfg.spec_on else 0
        self.app: EmulatorApp | None = None
        self.runner: web.AppRunner | None = None
        self._stop = asyncio.Event()
        self._exit_code = 0
        self._sigterm_count = 0
        self._drain_needed = False
        tp, nn, node = v["tp_size"], v["nnodes"], v["node_rank"]
        per_node = tp // nn
        self.ranks = list(range(node * per_node, (node + 1) * per_node))
        adp = attention_dp_size(v)
        self.prefixes = logs.scheduler_prefixes(self.ranks, tp, v["dp_size"], adp)
        self.prefix0 = logs.scheduler_prefixes([0], tp, v["dp_size"], adp)[0]
        # TP0 of each scheduler replica (dp.py): every DP rank without attention DP, else one
        self.heads = [logs.rank_prefix(0, tp, d, v["dp_size"]) for d in range(dp.replica_count(v))]
        self.heads = self.heads if len(self.heads) > 1 else [self.prefix0]
        self.has_rank0 = 0 in self.ranks
        # multi-node (multinode.py): rank 0's store and links, or this worker node's link
        self.layout = multinode.layout(v)
        self.head: multinode.Head | None = None
        self.worker: multinode.Worker | None = None
        self._worker_ready = False  # a worker node's schedulers are ready (0.5.23 installs its SIGTERM handler then)

    # ---- helpers ------------------------------------------------------------------------------------
    def each_rank(self, message: str) -> None:
        for pre in self.prefixes:
            self.log.info(message, pre)

    async def sleep(self, seconds: float) -> None:
        """Wait out a phase; a SIGTERM during start-up cuts it short."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass
        if self._stop.is_set():
            raise _Stopped()

    def die(self, exception_line: str, where: str) -> None:
        """A scheduler exception: log it on every rank, then the parent kills the tree (itself too)."""
        for pre in self.prefixes:
            self.log.error(
                "Scheduler hit an exception: Traceback (most recent call last):\n"
                f'  File "<sglang-emulator>", line 1, in {where}\n'
                f"{exception_line}\n",
                pre,
            )
        self.log.error(logs.SIGQUIT_LINE)
        _kill_self()

    @property
    def kv_dtype(self) -> str | None:
        return graphs.kv_dtype(self.cfg.facts.kv_line_dtype, self.cfg.values)

    @property
    def graph_max_bs(self) -> int:
        return graphs.graph_max_bs(self.cfg.values, self.p)

    @property
    def graph_bs(self) -> tuple[int, ...] | None:
        return graphs.graph_bs(self.cfg.values, self.p)

    def graph_exact(self, pool: int) -> tuple[int, ...] | None:
        return graphs.graph_exact(self.cfg.values, self.p, pool)

    def _adaptive_policy(self, prefix: str) -> adaptive.Policy | None:
        """The release's adaptive policy, built where SGLang builds it (the EAGLE worker's init, in
        the scheduler process, one per DP replica): a config the release reads there and rejects
        ends the server."""
        ad = self.cfg.adaptive
        assert ad is not None

        def say(line: str) -> None:
            self.log.info(line, prefix)

        try:
            if ad.deferred_error is not None:
                raise ad.deferred_error
            if ad.kind == "per-bs":
                return adaptive.PerBsPolicy(ad.initial_steps, ad.config, ad.bs_entries, ad.graph_bs, say)
            return adaptive.FlatPolicy(ad.initial_steps, ad.config or {}, self.cfg.facts.adaptive_initial, say)
        except Exception as e:  # noqa: BLE001 - SGLang's own exception, shown as the scheduler's
            self.die(_exception_line(e), "__init__")
        return None

    def _scheduler_error(self, e: BaseException) -> None:
        """An exception in the scheduler loop (e.g. an adaptive config value of the wrong type that
        SGLang only trips over at the first update) ends the server as SGLang's does."""
        self.die(_exception_line(e), "event_loop_normal")

    # ---- the process --------------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self._start()
        except _Stopped:
            await self._shutdown()
            return self._exit_code
        await self._stop.wait()
        await self._shutdown()
        return self._exit_code

    async def _start(self) -> None:
        cfg, p, v, log = self.cfg, self.p, self.cfg.values, self.log
        facts = cfg.facts
        for note in cfg.notes:
            log.prelaunch(facts.prelaunch_log, note.level, note.where, note.message)
        log.info("server_args=" + server_args_repr(v, facts))
        t_start = time.monotonic()
        S = self.startup_s
        ctx_flag = v.get("context_length")
        if (
            ctx_flag is not None
            and ctx_flag > p.context_len
            and not _env_true("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")
        ):
            log.raw(
                'Traceback (most recent call last):\n  File "<sglang-emulator>", line 1, in __init__\n'
                f"ValueError: User-specified context_length ({ctx_flag}) is greater than the derived "
                f"context_length ({p.context_len}). This may lead to incorrect model outputs or CUDA errors. "
                "Note that the derived context_length may differ from max_position_embeddings in the model's "
                "config. To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
            )
            sys.stderr.flush()
            os._exit(1)

        # the prefill-stats clock up to 0.5.12 (versions.stats_clock): before the model worker
        stats_since = asyncio.get_running_loop().time()
        # distributed init
        parallel = self.cfg.facts.parallel_init_log
        self.each_rank("Init parallel begin." if parallel else "Init torch distributed begin.")
        t0 = time.monotonic()
        await self.sleep(PHASE_INIT * S)
        await self._join_group()
        elapsed = time.monotonic() - t0
        if parallel:
            self.each_rank(f"Init parallel ends. elapsed={elapsed:.2f} s")
        else:
            self.each_rank(f"Init torch distributed ends. elapsed={elapsed:.2f} s, mem usage=0.09 GB")

        # weights
        kv = model.max_total_num_tokens(p, self.k, v["mem_fraction_static"])
        mrr_flag = v["max_running_requests"]
        cap = model.capacity(p, self.k, mrr_flag, v["mem_fraction_static"])
        kv_total = cap.max_total_num_tokens
        mem = memory_figures(p, cfg, max(kv_total, 0), cap.state_slot_cap)
        self.each_rank(f"Load weight begin. avail mem={mem['avail0']:.2f} GB")
        t0 = time.monotonic()
        if self.faults.hang_before_ready == "load":
            await self.sleep(float("inf"))
        await self.sleep(PHASE_LOAD * S + self.faults.slow_startup_s)
        self.each_rank(
            f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={p.model_architecture}, "
            f"dtype=torch.bfloat16, avail mem={mem['after_load']:.2f} GB, mem usage={p.weights_gb:.2f} GB."
        )
        phases = {"load_weight": time.monotonic() - t0}  # 0.5.23's startup phases (startup.py)

        # pools: the KV pool must have room, or SGLang raises (docs/reference/sglang.md §5.3)
        if kv <= 0 or self.faults.kv_oom:
            self.die(
                "RuntimeError: " + facts.not_enough_memory.format(value=v["mem_fraction_static"]), "init_memory_pool"
            )
        mtt = v.get("max_total_tokens")
        if mtt is not None:
            if mtt > kv_total:
                note = max_total_tokens_note(facts, mtt, kv_total)
                for pre in self.prefixes:
                    log.warning(note.message, pre)
            else:
                kv_total = mtt
                cap = model.Capacity(
                    kv_total, model.max_running_requests(p, self.k, mrr_flag, kv_total), cap.state_slot_cap
                )
                mem = memory_figures(p, cfg, kv_total, cap.state_slot_cap)
        if cap.max_running_requests < 1:
            # SGLang's scheduler asserts a request pool of at least one (managers/tp_worker.py);
            # a state pool too small for one request at this depth, or a KV pool under 2 tokens
            self.die("AssertionError: max_running_request is zero", "__init__")
        await self.sleep(PHASE_POOL * S)
        phases["kv_cache_allocation"] = PHASE_POOL * S  # the sleep is cut short only by a SIGTERM
        if p.hybrid_mamba:
            self.each_rank(
                logs.mamba_cache_line(
                    int(mem["mamba_size"]),
                    mem["conv"],
                    mem["ssm"],
                    mem["inter_widest_ssm"] if cfg.spec_on else None,
                    mem["inter_widest_conv"] if cfg.spec_on else None,
                )
            )
        self.each_rank(logs.kv_cache_line(kv_total, mem["kv_half"], mem["kv_half"], self.kv_dtype))
        self.each_rank(f"Memory pool end. avail mem={mem['after_pool']:.2f} GB")

        # CUDA graphs
        self.each_rank(
            f"Capture cuda graph begin. This can take up to several minutes. avail mem={mem['after_pool']:.2f} GB"
        )
        t0 = time.monotonic()
        await self.sleep(PHASE_GRAPH * S)
        if mem["after_graph"] < 0 <= mem["baseline"]:  # the widest candidate's buffers (memory.py)
            self.die(_graph_oom(facts), "capture")
        self.each_rank(
            f"Capture cuda graph end. Time elapsed: {time.monotonic() - t0:.2f} s. "
            f"mem usage={mem['graph']:.2f} GB. avail mem={mem['after_graph']:.2f} GB."
        )
        policies = [self._adaptive_policy(pre) if cfg.adaptive is not None else None for pre in self.heads]
        if cfg.spec_on:
            # the draft (MTP) worker: its own runner, weights, pool sized like the target's, graphs
            self.each_rank(f"Load weight begin. avail mem={mem['after_graph']:.2f} GB")
            t0 = time.monotonic()
            await self.sleep(PHASE_DRAFT * S * 0.4)
            phases["load_weight"] += time.monotonic() - t0
            self.each_rank(
                f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={p.draft_model_architecture}, "
                f"dtype=torch.bfloat16, avail mem={mem['after_graph']:.2f} GB, mem usage=0.00 GB."
            )
            self.each_rank(logs.kv_cache_line(kv_total, mem["draft_kv_half"], mem["draft_kv_half"], self.kv_dtype))
            self.each_rank(f"Memory pool end. avail mem={mem['after_draft_pool']:.2f} GB")
            self.each_rank(
                "Capture draft cuda graph begin. This can take up to several minutes. "
                f"avail mem={mem['after_draft_pool']:.2f} GB"
            )
            t0 = time.monotonic()
            await self.sleep(PHASE_DRAFT * S * 0.6)
            if cfg.draft_tokens_inconsistent:
                # topk > 1 with more draft tokens than the tree holds: SGLang does not check, the
                # kernels fail (sglang issue #5160, docs/reference/sglang.md §2.3)
                self.die("RuntimeError: selected index k out of range", "capture")
            self.each_rank(
                f"Capture draft cuda graph end. Time elapsed: {time.monotonic() - t0:.2f} s. "
                f"mem usage={mem['draft_graph']:.2f} GB. avail mem={mem['after_draft']:.2f} GB."
            )
            if cfg.adaptive is not None:
                # AdaptiveController.init_states: one runtime state (attention backends, CUDA
                # graphs) per other candidate, built after the draft worker exists.
                avail = mem["after_draft"]
                for steps in cfg.adaptive.candidate_steps:
                    if steps == self.k:
                        continue
                    t0 = time.monotonic()
                    await self.sleep(PHASE_DRAFT * S * 0.1)
                    avail -= mem["state_graph"]
                    if avail < 0 <= mem["baseline"]:
                        self.die(_graph_oom(facts), "build_adaptive_runtime_state")
                    for pre in self.heads:
                        log.info(adaptive.built_state_line(steps, time.monotonic() - t0, mem["state_graph"]), pre)

        if not self.has_rank0:
            # Other nodes of a multi-node deployment run schedulers only; rank 0's node serves the
            # API. Once their schedulers are ready they answer /health on --host/--port, as SGLang's
            # launch_dummy_health_check_server does (0.5.9 engine.py, node_rank >= 1), so a gate on
            # every node works.
            await self._serve_dummy_health()
            if self.worker is not None:
                await self.worker.ready()
                self._worker_ready = True
                if self.faults.worker_crash_after_ready_s is not None:
                    asyncio.get_running_loop().call_later(self.faults.worker_crash_after_ready_s, self._worker_crash)
            await self.sleep(float("inf"))
        if self.head is not None:
            await self._until(self.head.wait_ready())

        for pre in self.heads:
            log.info(
                logs.capacity_line(
                    kv_total,
                    v["chunked_prefill_size"],
                    v["max_prefill_tokens"],
                    cap.max_running_requests,
                    int(v.get("context_length") or p.context_len),
                    mem["final"],
                ),
                pre,
            )
        spec = EngineSpec(
            k=self.k,
            topk=cfg.topk,
            verify_tokens=cfg.num_draft_tokens if cfg.spec_on else 1,
            max_running_requests=cap.max_running_requests,
            max_total_num_tokens=kv_total,
            chunked_prefill_size=v["chunked_prefill_size"],
            max_prefill_tokens=v["max_prefill_tokens"],
            prefill_input_cap_chunked=facts.prefill_input_cap_chunked,
            prefill_line=facts.prefill_line,
            decode_log_interval=v["decode_log_interval"],
            context_len=int(v.get("context_length") or p.context_len),
            state_slot_cap=cap.state_slot_cap,
            hybrid=p.hybrid_mamba,
            spec=cfg.spec_on,
            policy=None,  # each replica's own (dp.schedulers)
            k_max=cfg.adaptive.max_steps if cfg.adaptive is not None else None,
            accept_rate=facts.accept_rate,
            input_throughput=facts.input_throughput,
            cuda_graph_max_bs=0 if v.get("disable_cuda_graph") else min(self.graph_max_bs, cap.max_running_requests),
            cuda_graph_bs=model.capture_sizes(self.graph_bs, cap.max_running_requests),
            cuda_graph_exact=self.graph_exact(cap.max_running_requests),
        )
        noise_seed = cfg.noise_seed if cfg.noise_seed is not None else p.noise_seed
        if facts.stats_clock == "after-model-worker":
            stats_since = asyncio.get_running_loop().time()
        scheds = dp.schedulers(p, spec, policies, self.heads, v["random_seed"], noise_seed, log, stats_since)
        app = EmulatorApp(cfg, p, self.faults, log, scheds, cap, mem, emulator_version(facts.version), self.heads)
        app.driver.on_error = self._scheduler_error
        startup.record(app, phases, PHASE_GRAPH * S, PHASE_DRAFT * S * 0.6, time.monotonic() - t_start)
        self.app = app
        app.driver.start()

        # HTTP: uvicorn's lines, then the port is open (/v1/models answers, /health is 503)
        await self.sleep(PHASE_HTTP * S)
        UvicornAccessLogger.sink = log
        UvicornAccessLogger.exclude = tuple(v.get("uvicorn_access_log_exclude_prefixes") or ())
        self.runner = web.AppRunner(app.make_app(), handle_signals=False, access_log_class=UvicornAccessLogger)
        await self.runner.setup()
        log.uvicorn(f"Started server process [{os.getpid()}]")
        log.uvicorn("Waiting for application startup.")
        log.uvicorn("Application startup complete.")
        host, port = v["host"], v["port"]
        try:
            site = web.TCPSite(self.runner, host, port, backlog=1024, reuse_address=True)
            await site.start()
        except OSError as e:
            # as uvicorn does (uvicorn/server.py Server.startup: `logger.error(exc)`): asyncio's OSError
            # already reads "[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000):
            # address already in use", so wrapping it again said the address twice
            log.uvicorn(str(e), "ERROR")
            await app.driver.stop()
            _flush()
            os._exit(1)
        log.uvicorn(f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")

        if self.faults.hang_before_ready:
            await self.sleep(float("inf"))
        if not v["skip_server_warmup"]:
            await self._warmup(t_start)
        app.status = "up"
        log.info(logs.READY_LINE)
        if self.faults.crash_after_ready_s is not None:
            asyncio.get_running_loop().call_later(self.faults.crash_after_ready_s, self._crash)

    # ---- multi-node (multinode.py) -------------------------------------------------------------
    async def _until(self, aw: Any) -> Any:
        """Await `aw` unless SIGTERM comes first (then start-up stops, as in self.sleep)."""
        task = asyncio.ensure_future(aw)
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            raise _Stopped()
        stop.cancel()
        return task.result()

    async def _join_group(self) -> None:
        """Meet the other nodes at the dist-init address; a failure ends this node as SGLang's does."""
        lay = self.layout
        if lay is None:
            return
        try:
            if lay.is_head:
                self.head = multinode.Head(lay, self._group_lost)
                await self.head.listen()
                await self._until(self.head.wait_joined())
            else:
                if self.faults.worker_never_joins:
                    await self.sleep(float("inf"))
                self.worker = multinode.Worker(lay, self._group_lost, self._group_shutdown)
                await self._until(self.worker.join())
        except multinode.MultiNodeError as e:
            self.die(e.line, e.where)

    def _group_lost(self, e: multinode.MultiNodeError) -> None:
        """Another node left the group: this node's next collective fails (a collective failure)."""
        self.die(e.line, e.where)

    def _group_shutdown(self) -> None:
        """Rank 0 shut the group down: a worker node exits 0."""
        self.log.info(multinode.SHUTDOWN_LINE.format(rank=self.cfg.values["node_rank"]))
        self._exit_code = 0
        self._stop.set()

    def _worker_crash(self) -> None:
        """worker-crash-after-ready: a worker node's scheduler dies as a GPU fault would kill it."""
        self.die(
            "RuntimeError: CUDA error: an illegal memory access was encountered "
            "(emulated fault worker-crash-after-ready)",
            "event_loop_normal",
        )

    async def _serve_dummy_health(self) -> None:
        """The non-zero node ranks' HTTP server: /health, /health_generate and /ping, always 200."""

        async def ok(_request: web.Request) -> web.Response:
            return web.Response(status=200)

        async def no_metrics(_request: web.Request) -> web.Response:
            # SGLang adds its Prometheus middleware here with --enable-metrics; a worker node's
            # schedulers (TP ranks other than 0) report nothing of their own
            return web.Response(status=200, text="", content_type="text/plain")

        app = web.Application()
        for path in ("/health", "/health_generate", "/ping"):
            app.router.add_get(path, ok)
        if self.cfg.values.get("enable_metrics"):
            app.router.add_get("/metrics", no_metrics)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self.runner.setup()
        host, port = self.cfg.values["host"], self.cfg.values["port"]
        await web.TCPSite(self.runner, host, port, reuse_address=True).start()
        # launch_dummy_health_check_server (python/sglang/srt/utils/common.py, 0.5.9-0.5.23): SGLang's
        # own line, the address bracketed for IPv6 from 0.5.14 (NetworkAddress.to_host_port_str);
        # its uvicorn runs in a daemon thread at log_level="warning", so none of uvicorn's INFO lines follow
        bracket = ":" in host and release_key(self.cfg.facts.version) >= release_key("0.5.14")
        where = f"[{host}]:{port}" if bracket else f"{host}:{port}"
        self.log.info(f"Dummy health check server started in background thread at {where}")

    async def _warmup(self, t_start: float) -> None:
        """SGLang's warm-up: poll /model_info, send one short /generate (docs/reference/sglang.md §5.1),
        one text per DP rank, so round-robin gives each rank one (0.5.9/0.5.12 http_server.py
        `_execute_server_warmup`: `["The capital city of France is"] * server_args.dp_size`, a plain
        string at dp_size 1; 0.5.23 the same with `num_dp_ranks`)."""
        v = self.cfg.values
        remaining = self.startup_s - (time.monotonic() - t_start)
        host = v["host"]
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":  # an IPv6 socket listens on IPv6 only (asyncio and uvloop set IPV6_V6ONLY)
            host = "::1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        url = f"http://{host}:{v['port']}"
        headers = {"Authorization": f"Bearer {v['api_key']}"} if v.get("api_key") else {}
        await self.sleep(max(0.0, remaining * 0.5))
        text, n = "The capital city of France is", dp_rank_count(self.cfg.facts, v)
        try:
            async with ClientSession(timeout=ClientTimeout(total=600), headers=headers) as s:
                async with s.get(url + "/model_info") as r:
                    await r.read()
                payload = {
                    "text": text if n == 1 else [text] * n,
                    "sampling_params": {"temperature": 0, "max_new_tokens": 8},
                }
                async with s.post(url + "/generate", json=payload) as r:
                    await r.read()
                    ok = r.status == 200
        except Exception as e:  # noqa: BLE001 - any failure here is SGLang's "warmup error"
            ok = False
            err = repr(e)
        else:
            err = "" if ok else f"status {r.status}"
        if not ok:
            self.log.error(f"Initialization failed. warmup error: {err}")
            _kill_self()
        await self.sleep(max(0.0, self.startup_s - (time.monotonic() - t_start)))

    def _crash(self) -> None:
        """crash-after-ready: a scheduler fault kills the server, as a real GPU fault would."""
        self.die(
            "RuntimeError: CUDA error: an illegal memory access was encountered (emulated fault crash-after-ready)",
            "event_loop_normal",
        )

    # ---- shutdown --------------------------------------------------------------------------------
    def _on_signal(self, sig: int) -> None:
        """SIGTERM/SIGINT: drain in-flight requests, then exit 0; a second signal exits at once."""
        if self.worker is not None and self.cfg.facts.worker_sigterm_waits and self._worker_ready:
            # 0.5.23: a worker node cannot drain on its own; rank 0's shutdown (the link's
            # `shutdown`, its ShutdownReq broadcast) or its loss (EOF) ends it, and systemd's
            # TimeoutStopSec is the backstop (entrypoints/engine.py, node_rank >= 1). SGLang installs
            # that handler only once the node's schedulers are ready (`wait_for_ready` first): a
            # worker still joining or loading ends by the signal, as below
            self.log.warning(
                f"SIGTERM received on node_rank {self.cfg.values['node_rank']}; waiting for the rank-0 "
                "ShutdownReq broadcast to stop the schedulers."
            )
            return
        if self.worker is not None:
            # up to 0.5.20 (and on 0.5.23 before its schedulers are ready) a worker node has no
            # SIGTERM handler of SGLang's: its dummy health server's uvicorn
            # re-raises the signal once it has shut down (uvicorn >= 0.29 capture_signals; in a
            # background thread the default handler acts at once), and its schedulers follow their
            # parent (PR_SET_PDEATHSIG): the process ends by the signal, and a rank 0 still up
            # fails its next collective (multinode.py)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            return
        self._sigterm_count += 1
        if self._sigterm_count == 1:
            self.log.info("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
            if self.app is not None:
                # the emulator's own line (SGLang has none like it): whether this process kept the
                # model's clock, for benches that read the log after the server is gone
                c = self.app.clock()
                self.log.info(logs.CLOCK_LINE.format(**c))
        app = self.app
        drain = (
            self._sigterm_count == 1
            and app is not None
            and app.status == "up"
            and not os.environ.get("SGL_FORCE_SHUTDOWN")
        )
        if drain and app is not None:
            app.status = "draining"
        self._drain_needed = drain
        self._exit_code = 0
        self._stop.set()

    async def _shutdown(self) -> None:
        app = self.app
        if app is not None and self._drain_needed:
            # drain: poll until in-flight requests finish (docs/reference/sglang.md §7.2)
            last_log = -1e9
            while True:
                remaining = [r for r in app.in_flight.values() if not r.finished]
                now = time.monotonic()
                if not remaining or not self._drain_needed:
                    break
                if now - last_log >= 5.0:
                    rids = [r.rid for r in remaining[:16]]
                    self.log.info(
                        f"Gracefully exiting... Remaining number of requests {len(remaining)}. "
                        f"Remaining requests remaining_rids={rids}."
                    )
                    last_log = now
                await asyncio.sleep(0.05 if any(dp.busy(s) for s in app.scheds) else 0.01)
            self.log.info("Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].")
        if self.runner is not None:
            quiet = self.worker is not None  # a worker node's uvicorn runs at log_level="warning"
            if not quiet:
                self.log.uvicorn("Shutting down")
            try:
                await asyncio.wait_for(self.runner.cleanup(), 5.0)
            except (TimeoutError, Exception):
                pass
            if not quiet:
                self.log.uvicorn("Waiting for application shutdown.")
                self.log.uvicorn("Application shutdown complete.")
                self.log.uvicorn(f"Finished server process [{os.getpid()}]")
        if app is not None:
            await app.driver.stop()
        if self.head is not None:
            await self.head.close()
        if self.worker is not None:
            self.worker.close()


def _exception_line(e: BaseException) -> str:
    """`ValueError: message` / `AssertionError` as the last line of a Python traceback."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _graph_oom(facts: SGLangVersion) -> str:
    """SGLang's CUDA-graph capture failure: `raise Exception(f"Capture cuda graph failed: {e}\\n{hint}")`."""
    return (
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        + facts.graph_capture_failed_hint.rstrip("\n ")
    )


class _Stopped(Exception):
    """SIGTERM arrived during start-up."""


def _flush() -> None:
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:  # noqa: BLE001
            pass


def _kill_self() -> None:
    """SGLang's kill_process_tree includes the parent: the process ends by SIGKILL."""
    _flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
