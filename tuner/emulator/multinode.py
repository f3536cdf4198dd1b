"""One SGLang server over several nodes: `--nnodes N --node-rank R --dist-init-addr HOST:PORT`.

What a real multi-node SGLang does, and what the emulator plays here:

* Every node runs the same launch command with its own `--node-rank`. Node 0 holds TP rank 0: it
  serves the HTTP API, the tokenizer and the detokenizer. The other nodes run schedulers only and,
  once their schedulers are ready, answer `/health`, `/health_generate` and `/ping` with a dummy
  200 (`launch_dummy_health_check_server`, sgl-project/sglang `python/sglang/srt/entrypoints/engine.py`
  under `if server_args.node_rank >= 1`, and `python/sglang/srt/utils/common.py`): a probe on a
  worker node proves only that its process is up.
* torch.distributed rendezvous: node 0 opens a TCP store on the dist-init port, every rank
  connects to it, and `Init torch distributed ends.` is logged on each rank only when the whole
  group is there. A rank that never comes ends node 0 with torch's
  `DistStoreError: Timed out after T+1 seconds waiting for clients. J/W clients joined.` after
  `--dist-timeout` seconds (SGLang's default None leaves torch's NCCL default, 10 minutes).
* A collective failure: once the group runs, every step is a collective (the scheduler broadcasts
  the requests from rank 0, sgl-project/sglang `managers/scheduler.py` `recv_requests` /
  `broadcast_pyobj`), so one rank leaving makes the others fail on their next collective; they
  log the scheduler exception and kill their process tree, as any scheduler crash does.
* Shutdown: up to 0.5.20 SIGTERM ends a worker node's process at once (0.5.23 logs it and waits
  for rank 0's ShutdownReq broadcast; SGLang up to 0.5.20 installs no handler there: the
  dummy health server's uvicorn re-raises the signal after its own shutdown, and the schedulers
  follow their parent), and a rank 0 still up then fails its next collective, as for any lost
  rank: the sglang_server role stops rank 0 first. When rank 0 shuts down, a real worker's
  schedulers fail their next collective and the process exits with an error; the emulator has
  rank 0 tell each worker on the link and the worker exits 0 (its own line), a simplification
  that keeps a group's ordered stop free of failed units (docs/emulator.md "Multi-node").

The link is one TCP connection per worker node to rank 0's dist-init address carrying
newline-separated JSON (`join`, `joined`, `ready`, `shutdown`); EOF on it is the collective
failure. Its contents are the emulator's; that it is TCP to the dist-init address, that a missing
rank times out at the dist timeout and that one rank's death ends the others is SGLang's.

Capacity and speed of a TP group split over nodes (docs/emulator.md "Multi-node"): the profile's
numbers are for `tp_size` GPUs (profile key `tp_size`, 0 = the server's own TP size, so no
rescaling). A server of another TP size holds per GPU weights_gb * tp_profile / tp and
kv_bytes_per_token * tp_profile / tp per token, and the memory a GPU frees goes to the KV pool, so
the token counts scale by (kv * bytes + freed) / (bytes * tp_profile / tp). Step times stay the
profile's, plus `t_cross_node_ms` (default 1.5 ms, a cross-node all-reduce per layer group on
InfiniBand) times ceil(log2(nnodes)) per decode or verify step when the group spans nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .profile import Profile

# torch's default process-group timeout for the NCCL backend (10 minutes), which SGLang leaves in
# force when --dist-timeout is not given (its ServerArgs.dist_timeout defaults to None).
DEFAULT_DIST_TIMEOUT_S = 600
# How often a worker retries its connection to rank 0 while rank 0 is not listening yet.
CONNECT_RETRY_S = 0.2
GIB = float(1 << 30)


class MultiNodeError(Exception):
    """A failure of the group, carrying the exception line the scheduler logs."""

    def __init__(self, line: str, where: str) -> None:
        super().__init__(line)
        self.line = line
        self.where = where


@dataclass(frozen=True)
class Layout:
    """Where this process sits in the group."""

    nnodes: int
    node_rank: int
    tp_size: int
    host: str
    port: int
    timeout_s: float

    @property
    def ranks_per_node(self) -> int:
        return self.tp_size // self.nnodes

    @property
    def is_head(self) -> bool:
        return self.node_rank == 0


def split_addr(addr: str) -> tuple[str, int]:
    """`HOST:PORT` or `[V6]:PORT` -> (host, port); ValueError otherwise."""
    text = addr.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"dist_init_addr must be [IPV6]:PORT; got {addr!r}")
        port_s = rest[1:]
    else:
        host, sep, port_s = text.rpartition(":")
        if not sep:
            raise ValueError(f"dist_init_addr must be HOST:PORT; got {addr!r}")
    try:
        port = int(port_s)
    except ValueError:
        raise ValueError(f"dist_init_addr has a bad port: {addr!r}") from None
    if not host or not 0 < port < 65536:
        raise ValueError(f"dist_init_addr must be HOST:PORT; got {addr!r}")
    return host, port


def layout(values: dict[str, Any]) -> Layout | None:
    """The group of these server args, or None for a single-node server."""
    nnodes = int(values.get("nnodes") or 1)
    if nnodes <= 1:
        return None
    addr = values.get("dist_init_addr")
    if not addr:
        # The emulator's words: without the address the ranks cannot find each other.
        raise ValueError("--dist-init-addr HOST:PORT is required when --nnodes > 1 (sglang-emulator)")
    host, port = split_addr(str(addr))
    timeout = values.get("dist_timeout")
    return Layout(
        nnodes=nnodes,
        node_rank=int(values.get("node_rank") or 0),
        tp_size=int(values["tp_size"]),
        host=host,
        port=port,
        timeout_s=float(timeout) if timeout else float(DEFAULT_DIST_TIMEOUT_S),
    )


def cross_node_step_ms(p: Profile, nnodes: int) -> float:
    """The per-step cost of all-reduces that cross nodes: t_cross_node_ms * ceil(log2(nnodes))."""
    if nnodes <= 1:
        return 0.0
    return p.t_cross_node_ms * math.ceil(math.log2(nnodes))


def scale_kv_tokens(p: Profile, tokens: int, tp_size: int) -> int:
    """KV tokens of the profile's pool at another TP size (module docstring's rule)."""
    tp0 = p.tp_size or tp_size
    if tp0 == tp_size or tokens <= 0 or p.kv_bytes_per_token <= 0:
        return tokens
    share = tp0 / tp_size
    freed = p.weights_gb * (1.0 - share) * GIB
    pool = tokens * p.kv_bytes_per_token + freed
    return max(0, int(pool / (p.kv_bytes_per_token * share)))


def adjust_profile(p: Profile, tp_size: int, nnodes: int) -> Profile:
    """The profile as this server's TP size and node count see it (module docstring's rules)."""
    tp0 = p.tp_size or tp_size
    extra = cross_node_step_ms(p, nnodes)
    if tp0 == tp_size and extra == 0.0:
        return p
    share = tp0 / tp_size
    # added by model.step_time_ms to every step, whichever form the profile's step cost has
    changes: dict[str, Any] = {"cross_node_step_ms": extra}
    if tp0 != tp_size:
        # kv_bytes_per_token 0 switches the memory rules off: the pool then keeps the profile's
        # tokens at any TP size (scale_kv_tokens), and so do its steps and its 0
        sized = p.kv_bytes_per_token > 0
        nospec = scale_kv_tokens(p, p.kv_tokens_nospec, tp_size)
        changes.update(
            kv_tokens_nospec=nospec,
            # the rule above applied to the line nospec - k * per_step: each step's tokens cost
            # bytes * share a token, so a step takes per_step / share of them (the memory a GPU frees
            # goes to the pool once, not to every step); the measured depths scale by the same rule
            kv_tokens_per_step=int(round(p.kv_tokens_per_step / share)) if sized else p.kv_tokens_per_step,
            kv_tokens_measured={k: scale_kv_tokens(p, v, tp_size) for k, v in p.kv_tokens_measured.items()},
            weights_gb=p.weights_gb * share,
            kv_bytes_per_token=max(1, int(round(p.kv_bytes_per_token * share))) if sized else 0,
            tp_size=tp_size,
        )
    return dataclasses.replace(p, **changes)


def _send(writer: asyncio.StreamWriter, op: str, **fields: Any) -> None:
    writer.write((json.dumps({"op": op, **fields}) + "\n").encode())


async def _recv(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One message, or None at EOF (or garbage: the link is then as good as closed)."""
    try:
        line = await reader.readline()
    except (ConnectionError, OSError):
        return None
    if not line:
        return None
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def _closed_by_peer(host: str, port: int) -> str:
    """What a rank's next collective raises when its peer is gone (gloo's TCP pair, as torch reports it)."""
    return (
        f"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [{host}]:{port}"
    )


@dataclass
class _Peer:
    node_rank: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    ready: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    addr: str = ""


class Head:
    """Rank 0's side: the TCP store on the dist-init port, the workers' links."""

    def __init__(self, lay: Layout, on_lost: Callable[[MultiNodeError], None]) -> None:
        self.lay = lay
        self.on_lost = on_lost
        self.peers: dict[int, _Peer] = {}
        self._all_joined = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self._closing = False
        self._failed = False

    async def listen(self) -> None:
        """Open the store's port on every interface, as torch's TCPStore server does."""
        try:
            self._server = await asyncio.start_server(self._accept, host=None, port=self.lay.port, reuse_address=True)
        except OSError as e:
            raise MultiNodeError(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {self.lay.port}, useIpv6: false, code: -{e.errno or 98}, "
                f"name: EADDRINUSE, message: {(e.strerror or str(e)).lower()}",
                "init_distributed_environment",
            ) from None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # rank 0 stopping cancels this handler while it waits on its peer: that is the stop, not a
        # failure (left to asyncio, the cancellation is printed as a traceback SGLang never prints)
        with contextlib.suppress(asyncio.CancelledError):
            await self._serve_peer(reader, writer)

    async def _serve_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        msg = await _recv(reader)
        rank = msg.get("node_rank") if msg and msg.get("op") == "join" else None
        if (
            not isinstance(rank, int)
            or not 0 < rank < self.lay.nnodes
            or rank in self.peers
            or self._all_joined.is_set()
        ):
            writer.close()
            return
        peer_addr = writer.get_extra_info("peername") or ("?", 0)
        peer = _Peer(rank, reader, writer, addr=str(peer_addr[0]))
        self.peers[rank] = peer
        if len(self.peers) == self.lay.nnodes - 1:
            self._all_joined.set()
        await self._all_joined.wait()
        _send(writer, "joined", world=self.lay.tp_size)
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()
        while True:
            m = await _recv(reader)
            if m is None:
                break
            if m.get("op") == "ready":
                peer.ready.set()
        if not self._closing and not self._failed:
            self._failed = True
            self.on_lost(MultiNodeError(_closed_by_peer(peer.addr, self.lay.port), "broadcast_pyobj"))

    def joined_ranks(self) -> int:
        return self.lay.ranks_per_node * (1 + len(self.peers))

    async def wait_joined(self) -> None:
        """Every node is there, or torch's store timeout after the dist timeout."""
        try:
            await asyncio.wait_for(self._all_joined.wait(), self.lay.timeout_s)
        except TimeoutError:
            raise MultiNodeError(
                f"torch.distributed.DistStoreError: Timed out after {int(self.lay.timeout_s) + 1} seconds "
                f"waiting for clients. {self.joined_ranks()}/{self.lay.tp_size} clients joined.",
                "init_distributed_environment",
            ) from None

    async def wait_ready(self) -> None:
        """Every worker's schedulers are ready (the collectives of the pool sizing and graph capture)."""
        await asyncio.gather(*(p.ready.wait() for p in self.peers.values()))

    async def close(self) -> None:
        """Rank 0 leaves: a graceful stop tells every worker first (the shutdown broadcast)."""
        self._closing = True
        for peer in self.peers.values():
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                _send(peer.writer, "shutdown")
                await asyncio.wait_for(peer.writer.drain(), 2.0)
            peer.writer.close()
        if self._server is not None:
            self._server.close()


class Worker:
    """A node above 0: joins rank 0's store, reports ready, follows rank 0's fate."""

    def __init__(
        self,
        lay: Layout,
        on_lost: Callable[[MultiNodeError], None],
        on_shutdown: Callable[[], None],
    ) -> None:
        self.lay = lay
        self.on_lost = on_lost
        self.on_shutdown = on_shutdown
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.head_alive = False
        self._watch: asyncio.Task[None] | None = None

    async def join(self) -> None:
        """Connect (retrying while rank 0 is not up) and wait until the whole group is there."""
        lay = self.lay
        deadline = time.monotonic() + lay.timeout_s
        timeout_line = (
            f"torch.distributed.DistNetworkError: The client socket has timed out after {int(lay.timeout_s)}s "
            f"while trying to connect to ({lay.host}, {lay.port})."
        )
        while True:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(lay.host, lay.port), max(0.05, deadline - time.monotonic())
                )
            except (OSError, TimeoutError):
                if time.monotonic() >= deadline:
                    raise MultiNodeError(timeout_line, "init_distributed_environment") from None
                await asyncio.sleep(CONNECT_RETRY_S)
                continue
            _send(writer, "join", node_rank=lay.node_rank, ranks=lay.ranks_per_node)
            try:
                await writer.drain()
                msg = await asyncio.wait_for(_recv(reader), max(0.05, deadline - time.monotonic()))
            except TimeoutError:
                raise MultiNodeError(timeout_line, "init_distributed_environment") from None
            except (ConnectionError, OSError):
                msg = None
            if msg is not None and msg.get("op") == "joined":
                self.reader, self.writer = reader, writer
                self.head_alive = True
                self._watch = asyncio.create_task(self._follow())
                return
            writer.close()
            if time.monotonic() >= deadline:
                raise MultiNodeError(timeout_line, "init_distributed_environment")
            await asyncio.sleep(CONNECT_RETRY_S)

    async def _follow(self) -> None:
        assert self.reader is not None
        while True:
            msg = await _recv(self.reader)
            if msg is None:
                break
            if msg.get("op") == "shutdown":
                self.head_alive = False
                self.on_shutdown()
                return
        self.head_alive = False
        self.on_lost(MultiNodeError(_closed_by_peer(self.lay.host, self.lay.port), "broadcast_pyobj"))

    async def ready(self) -> None:
        if self.writer is not None:
            _send(self.writer, "ready")
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.drain()

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self.writer is not None:
            self.writer.close()


SHUTDOWN_LINE = "Rank 0 shut the group down; node_rank={rank} exiting."
