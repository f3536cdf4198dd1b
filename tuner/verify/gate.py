"""Capture a baseline from a no-speculation server; run the gate on one configuration's server."""

from __future__ import annotations

from typing import Any

from sglang_utils import sglang_verify as rules
from sglang_utils.sglang_flags import decode_graph_bs

from ..run.client import BenchClient
from ..spec.configs import SpecConfig
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


def measured_accept(levels: list[Any], config_id: str) -> float | None:
    """The acceptance length the sweep measured for a configuration: the token-weighted mean over
    its measured greedy levels (each level's own `accept_length`, tuner/measure/metrics.py). The
    gate sends at temperature 0, so only temperature-0 levels are its reference: a sampled level
    accepts less, and with `--temperature 1` it let the gate's greedy acceptance fall 24% below a
    healthy server's before the 95% rule fired. None when no greedy level was measured."""
    num = den = 0.0
    for lv in levels:
        if lv.config_id != config_id or float(getattr(lv, "temperature", 0.0) or 0.0) != 0.0:
            continue
        acc = getattr(lv.metrics, "accept_length", None)
        tok = getattr(lv.metrics, "output_tokens", None) or 1
        if acc:
            num += float(acc) * float(tok)
            den += float(tok)
    return num / den if den else None


ADAPTIVE_ACCEPT_NOTE = rules.ADAPTIVE_ACCEPT_NOTE  # the one sentence, with the rule (sglang_verify.judge)


def floor_exemption(cfg: SpecConfig, extra_flags: dict[str, Any] | None = None) -> str | None:
    """Why the floor does not apply to `cfg` (an adaptive config pinning 0 steps where the gate's
    requests run, after the padding to a `--cuda-graph-bs-decode` list in the user's
    `sglang_server_extra_flags`), else None: the rule shared with the role's sglang_verify module."""
    return rules.floor_exemption(cfg.adaptive_document(), probe.CONCURRENCY, decode_graph_bs(extra_flags))


def reference_accept(cfg: SpecConfig, levels: list[Any]) -> tuple[float | None, str | None]:
    """What the gate's acceptance is held to (95% of it, plugins/module_utils/sglang_verify.py):
    the sweep's measured value for a static depth; nothing for an adaptive config (SGLang's default
    or a tuned ladder), whose acceptance on the gate's few short requests is not the one its levels
    measured, with the sentence that says so."""
    if cfg.is_schedule:
        return None, ADAPTIVE_ACCEPT_NOTE
    return measured_accept(levels, cfg.config_id), None
