# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""The gate's report, typed: what a started SGLang server says it can hold (capacity) and how it
resolved its speculative settings, merged from its start-up log and its ``/server_info``.

One place for that merge, used by the ``sglang_ready`` module (``build_report``: the ``capacity``,
``speculative`` and ``server`` return keys) and by the tuner (``sglang_utils.sglang_gate_report``:
reading the module's report back into typed values, and building the same report from
``/server_info`` alone for ``bench --url``, where there is no log). The JSON form (``to_json``) is
the module's documented return contract; ``from_json`` reads it back, ignoring keys it does not know.

The rule: the log's capacity line is what the scheduler printed for this start, so it wins; the
server info fills the fields older builds do not print. Speculative settings come from
``/server_info`` when it has them (resolved values), else from the ``server_args=`` line.
Standard library only, no imports from this package but ``sglang_server_info``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping

from .sglang_server_info import draft_tokens_adjusted, requested_speculative

__all__ = ["Capacity", "Speculative", "ServerIdent", "GateReport"]


def _known(cls: Any, data: Mapping[str, Any] | None) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in (data or {}).items() if k in names}


@dataclass(frozen=True)
class Capacity:
    """SGLang's capacity line (``max_total_num_tokens=...``), completed from ``/server_info``."""

    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    max_prefill_tokens: int | None = None
    chunked_prefill_size: int | None = None
    context_len: int | None = None
    available_gpu_mem_gb: float | None = None
    available_cpu_mem_gb: float | None = None  # only where the log printed it
    # data-parallel ranks (DP attention, --dp-size): max_running_requests is each rank's, so the
    # server admits dp_size times as many (SGLang's bench_one_batch_server multiplies the same way)
    dp_size: int | None = None

    @classmethod
    def merge(
        cls, log: Mapping[str, Any] | None, info: Mapping[str, Any] | None, models: Mapping[str, Any] | None = None
    ) -> Capacity:
        """The log's capacity fields (``log``: sglang_log's ``capacity``), each missing one taken
        from the parsed ``/server_info`` (``info``) or ``/v1/models`` (``models``)."""
        log = log or {}
        info = info or {}
        models = models or {}
        fallback = {
            "max_total_num_tokens": info.get("max_total_num_tokens"),
            "max_running_requests": info.get("max_running_requests"),
            "max_prefill_tokens": info.get("max_prefill_tokens"),
            "chunked_prefill_size": info.get("chunked_prefill_size"),
            "context_len": info.get("context_length") or models.get("max_model_len"),
            "available_gpu_mem_gb": None,
        }
        values = {k: log.get(k) if log.get(k) is not None else v for k, v in fallback.items()}
        dp = info.get("dp_size")
        return cls(
            **values,
            available_cpu_mem_gb=log.get("available_cpu_mem_gb"),
            dp_size=dp if isinstance(dp, int) and dp > 1 else None,  # said only where there are ranks
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Capacity:
        return cls(**_known(cls, data))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("available_cpu_mem_gb", "dp_size"):
            if out[key] is None:
                del out[key]  # nothing said it: the key stays out, as before
        return out

    @property
    def ranks(self) -> int:
        """Data-parallel ranks (1 where nothing said more)."""
        return max(1, self.dp_size or 1)

    @property
    def admits(self) -> int | None:
        """How many requests the whole server runs at once: each DP rank's limit times the ranks."""
        if self.max_running_requests is None:
            return None
        return self.max_running_requests * self.ranks


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding as the server resolved it (each field None when nothing said)."""

    enabled: bool | None = None
    algorithm: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    draft_tokens_adjusted: bool | None = None
    max_running_requests_reset: bool | None = None
    max_running_requests_reset_to: int | None = None
    adaptive: bool | None = None
    schedule: dict[str, Any] | None = None

    @classmethod
    def merge(
        cls, log: Mapping[str, Any] | None, info: Mapping[str, Any] | None, schedule: dict[str, Any] | None = None
    ) -> Speculative:
        """``/server_info``'s resolved values (``info``: parsed) over the log's ``server_args=``
        line (``log``: sglang_log's ``speculative``); ``schedule``: the adaptive config read on the
        host, kept only when the server runs adaptive."""
        log = log or {}
        info = info or {}
        spec_info = info.get("speculative") or {}
        values: dict[str, Any] = {}
        for key in ("enabled", "algorithm", "num_steps", "eagle_topk", "num_draft_tokens"):
            value = spec_info.get(key) if info else None
            values[key] = value if value is not None else log.get(key)
        adjusted = log.get("draft_tokens_adjusted")
        if adjusted is None and info.get("launch_command"):
            adjusted = draft_tokens_adjusted(requested_speculative(info["launch_command"]), values)
        adaptive = spec_info.get("adaptive") if info else None
        return cls(
            **values,
            draft_tokens_adjusted=adjusted,
            max_running_requests_reset=log.get("max_running_requests_reset"),
            max_running_requests_reset_to=log.get("max_running_requests_reset_to"),
            adaptive=adaptive,
            schedule=schedule if adaptive else None,
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Speculative:
        return cls(**_known(cls, data))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ServerIdent:
    """Which server answered: its version and served model name."""

    version: str | None = None
    served_model_name: str | None = None
    server_info_path: str | None = None
    avg_spec_accept_length: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ServerIdent:
        return cls(**_known(cls, data))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GateReport:
    """The ``sglang_ready`` module's report of a server that came up."""

    capacity: Capacity = field(default_factory=Capacity)
    speculative: Speculative = field(default_factory=Speculative)
    server: ServerIdent = field(default_factory=ServerIdent)
    kv_pools: list[dict[str, Any]] = field(default_factory=list)
    mamba_cache: dict[str, Any] | None = None
    sglang_warnings: list[str] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        summary: Mapping[str, Any] | None,
        info: Mapping[str, Any] | None,
        models: Mapping[str, Any] | None,
        info_path: str | None = None,
        schedule: dict[str, Any] | None = None,
    ) -> GateReport:
        """From sglang_log's summary of the start-up log, the parsed ``/server_info`` and
        ``/v1/models`` (either may be empty: a server that did not answer them)."""
        summary = summary or {}
        info = info or {}
        models = models or {}
        served = info.get("served_model_name") or summary.get("served_model_name") or models.get("served_model_name")
        return cls(
            capacity=Capacity.merge(summary.get("capacity"), info, models),
            speculative=Speculative.merge(summary.get("speculative"), info, schedule),
            server=ServerIdent(
                version=info.get("version"),
                served_model_name=served,
                server_info_path=info_path,
                avg_spec_accept_length=info.get("avg_spec_accept_length"),
            ),
            kv_pools=list(summary.get("kv_pools") or []),
            mamba_cache=summary.get("mamba_cache"),
            sglang_warnings=list(summary.get("warnings") or []),
        )

    @classmethod
    def from_server_info(cls, info: Mapping[str, Any], served: str | None = None) -> GateReport:
        """What a running server's ``/server_info`` alone says (``bench --url``: no log to read)."""
        rep = cls.build({}, info, {})
        if served:
            rep = replace(rep, server=replace(rep.server, served_model_name=served))
        return rep

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> GateReport:
        """The module's return keys read back (a report from another version keeps what it has)."""
        data = data or {}
        return cls(
            capacity=Capacity.from_json(data.get("capacity")),
            speculative=Speculative.from_json(data.get("speculative")),
            server=ServerIdent.from_json(data.get("server")),
            kv_pools=list(data.get("kv_pools") or []),
            mamba_cache=data.get("mamba_cache"),
            sglang_warnings=list(data.get("sglang_warnings") or []),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity.to_json(),
            "speculative": self.speculative.to_json(),
            "server": self.server.to_json(),
            "kv_pools": list(self.kv_pools),
            "mamba_cache": self.mamba_cache,
            "sglang_warnings": list(self.sglang_warnings),
        }
