"""Data parallelism as SGLang serves `--dp-size N` without DP attention: N scheduler replicas.

Each DP rank is a whole replica (the model on its own tp_size x pp_size GPUs: 0.5.9-0.5.23
managers/data_parallel_controller.py `launch_dp_schedulers`, base_gpu_id += tp_size * pp_size *
gpu_id_step), with its own scheduler, batches, KV pool, log lines (`DPn` prefix) and gauges, so
each rank here gets its own `Scheduler` and `RealtimeDriver` built like the one of a single
replica. The DataParallelController hands each generation request to one rank by
`--load-balance-method`, whose default `auto` resolves to `round_robin` outside PD disaggregation
(0.5.9-0.5.12 server_args.py `_handle_load_balance_method`, 0.5.23
arg_groups/serving_hook.py `handle_load_balance_method`); `round_robin_scheduler` sends to
`workers[round_robin_counter]` and advances the counter (skipping inactive ranks, which the
emulator never has). Up to 0.5.12 a health check is a generate request like any other, so it takes
its turn in the same rotation (`dispatching_with_trace`); 0.5.23 routes health checks on their own
counter (`dispatch_health_check`, `health_round_robin_counter`). Attention DP (--enable-dp-attention,
0.5.23 --attn-dp-size) keeps one scheduler: its ranks share one TP group and batch (docs/emulator.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from . import adaptive
from .engine import EngineSpec, Scheduler
from .logs import Logger
from .noise import Noise
from .profile import Profile
from .realtime import RealtimeDriver
from .request import Request


def replica_count(values: dict[str, Any]) -> int:
    """The scheduler replicas a launch runs: --dp-size when each DP rank is a whole TP group, 1
    under attention DP (its DP ranks live inside one TP group: one scheduler here)."""
    dp = int(values.get("dp_size") or 1)
    attn_dp = bool(values.get("enable_dp_attention")) or int(values.get("attn_dp_size") or 1) > 1
    return dp if dp > 1 and not attn_dp else 1


def rank_seed(seed: int | None, rank: int) -> int | None:
    """A replica's own seed: rank 0 keeps `seed` (a single replica runs as before); the others draw
    theirs from it, so two replicas do not repeat each other's draws."""
    if seed is None or rank == 0:
        return seed
    return random.Random(f"dp{rank}:{seed}").getrandbits(62)


def schedulers(
    p: Profile,
    spec: EngineSpec,
    policies: list[adaptive.Policy | None],
    prefixes: list[str],
    random_seed: int | None,
    noise_seed: int | None,
    log: Logger,
    stats_since: float | None = None,
) -> list[Scheduler]:
    """One scheduler per replica (`prefixes`: each one's TP0 log prefix), as a single replica's:
    the same pool and step costs, its own adaptive policy (each replica's EAGLE worker builds one),
    its own sampling and noise draws (a replica is its own GPUs); `stats_since`: when the
    schedulers started their prefill-stats clock (engine.Scheduler)."""
    out = []
    for d, (policy, pre) in enumerate(zip(policies, prefixes, strict=True)):
        noise = Noise(
            run_cv=p.noise_run_cv,
            restart_cv=p.noise_restart_cv,
            seed=rank_seed(noise_seed, d),
            window_s=p.noise_window_s,
            idle_gap_s=p.noise_idle_gap_s,
        )
        rng = random.Random(rank_seed(random_seed, d))
        out.append(
            Scheduler(p, replace(spec, policy=policy), rng, log=_say(log, pre), noise=noise, stats_since=stats_since)
        )
    return out


def _say(log: Logger, prefix: str) -> Callable[[str], None]:
    return lambda line: log.info(line, prefix)


class DataParallelDriver:
    """The RealtimeDriver interface (submit, abort, start, stop, on_error, lag) over one driver per
    DP rank, dispatching each request as SGLang's round-robin DataParallelController does."""

    def __init__(self, drivers: list[RealtimeDriver], health_own_counter: bool) -> None:
        self.drivers = drivers
        self.health_own_counter = health_own_counter
        self._counter = 0
        self._health_counter = 0
        for d in drivers:
            d.s.served = self.served  # accept-collapse counts the requests the server served

    def served(self) -> int:
        return sum(d.s.num_requests_total for d in self.drivers)

    def pick(self, req: Request) -> int:
        """The rank `round_robin_scheduler` (or 0.5.23's `dispatch_health_check`) sends `req` to."""
        n = len(self.drivers)
        if req.internal and self.health_own_counter:
            rank, self._health_counter = self._health_counter, (self._health_counter + 1) % n
        else:
            rank, self._counter = self._counter, (self._counter + 1) % n
        return rank

    def submit(self, req: Request, arrival: float | None = None) -> None:
        req.dp_rank = self.pick(req)
        self.drivers[req.dp_rank].submit(req, arrival)

    def abort(self, req: Request) -> None:
        """An abort reaches every rank (the controller broadcasts it); only the request's own acts."""
        self.drivers[req.dp_rank].abort(req)

    def start(self) -> None:
        for d in self.drivers:
            d.start()

    async def stop(self) -> None:
        for d in self.drivers:
            await d.stop()

    @property
    def on_error(self) -> Callable[[BaseException], None] | None:
        return self.drivers[0].on_error

    @on_error.setter
    def on_error(self, fn: Callable[[BaseException], None] | None) -> None:
        for d in self.drivers:
            d.on_error = fn

    @property
    def max_lag(self) -> float:
        return max(d.max_lag for d in self.drivers)

    @property
    def lag_resets(self) -> int:
        return sum(d.lag_resets for d in self.drivers)


def total(scheds: list[Scheduler], attr: str) -> int:
    """A tokenizer-side count (requests, tokens) over the replicas: the tokenizer sees them all."""
    return sum(getattr(s, attr) for s in scheds)


def busy(s: Scheduler) -> bool:
    return bool(s.running or s.waiting)
