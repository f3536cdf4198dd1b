"""Capture a baseline from a no-speculation server; run the gate on one configuration's server."""

from __future__ import annotations

from typing import Any

from sglang_utils import sglang_verify as rules

from ..run.client import BenchClient
from . import baseline as baseline_mod
from . import probe
from .prompts import PromptSet


async def capture(client: BenchClient, ps: PromptSet, tool: str) -> dict[str, Any]:
    """The baseline document of the server behind `client` (which must not speculate)."""
    ident = await probe.identity(client)
    if ident.get("speculative"):
        raise baseline_mod.BaselineError(
            f"{client.base} runs speculative decoding ({ident['speculative']}); "
            "capture the baseline from a deployment without it (spec_steps 0)"
        )
    got = await probe.outputs(client, ps, again=False, version=ident.get("server_version"))
    return baseline_mod.make(ident, ps, got, tool)


async def check(
    client: BenchClient,
    ps: PromptSet,
    base: dict[str, Any],
    measured_accept: float | None,
    where: str,
    acceptance: bool = True,
    floor: bool = True,
) -> dict[str, Any]:
    """The gate's verdict on the server behind `client` (sglang_verify.judge), with what it is.
    A baseline of another model, server version or prompt set raises BaselineError first.
    `acceptance` False: parity and loops only (the sweep's exact round; a server that does not
    speculate is held to its outputs only, as the role's module holds it); `floor` False: no
    acceptance floor or collapse rule (sglang_verify.judge)."""
    ident = await probe.identity(client)
    baseline_mod.check(base, ident, ps, where)
    got = await probe.outputs(client, ps, version=ident.get("server_version"))
    verdict = rules.judge(base, {**got, **ident}, measured_accept, acceptance and ident["speculates"], floor)
    verdict["server"] = {k: ident.get(k) for k in ("server_version", "model", "speculative", "deterministic")}
    verdict["baseline"] = {"prompt_set": base.get("prompt_set"), "deterministic": bool(base.get("deterministic"))}
    return dict(verdict)
