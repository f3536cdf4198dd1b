"""The gate as a phase of `sweep` (on unless `--no-verify`; docs/tuner.md "Verify").

Once per campaign, before the first configuration, the no-speculation configuration (`k0`) is
deployed and its greedy outputs become the baseline (`--verify-baseline FILE`, default
`<out>/verify_baseline.json`; a file that exists is reused, so a later sweep or `--resume`
deploys nothing for it). Then every speculative configuration is checked on its own measurement
deployment right after its levels, before the next configuration replaces it: no extra deploy,
and a cost of a few dozen requests that bench/verify_cost.py keeps at or below 10% of the
configuration's measurement time. A configuration that fails is excluded from the
recommendation (and so from --deploy-best): the summary reads the `verify` records. cli.py hands
this object to run/sweep.py, which calls it through its `Gate` protocol.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from sglang_utils import sglang_verify as rules  # type: ignore[import-not-found]

from ..data.records import VerifyRecord
from ..run.client import BenchClient, ClientOptions, ServerError
from ..spec.configs import SpecConfig
from . import baseline as baseline_mod
from . import gate, probe
from .prompts import PromptSet


class _Log(Protocol):
    def append(self, record: Any) -> dict[str, Any]: ...


class _Progress(Protocol):
    def line(self, text: str) -> None: ...


BASELINE_ID = "k0"


def measured_accept(levels: list[Any], config_id: str) -> float | None:
    """The acceptance length the sweep measured for a configuration: the token-weighted mean over
    its measured levels (each level's own `accept_length`, tuner/measure/metrics.py)."""
    num = den = 0.0
    for lv in levels:
        if lv.config_id != config_id:
            continue
        acc = getattr(lv.metrics, "accept_length", None)
        tok = getattr(lv.metrics, "output_tokens", None) or 1
        if acc:
            num += float(acc) * float(tok)
            den += float(tok)
    return num / den if den else None


class VerifyPhase:
    def __init__(
        self,
        *,
        baseline_path: Path,
        prompts: PromptSet,
        log: _Log,
        progress: _Progress,
        api_key: str | None,
        tool: str,
    ):
        self.path = baseline_path
        self.prompts = prompts
        self.log = log
        self.progress = progress
        self.api_key = api_key
        self.tool = tool
        self.baseline: dict[str, Any] | None = None
        self.unusable: str | None = None  # why no configuration can be checked (said in every verdict)

    def _client(self, url: str, model: str | None) -> BenchClient:
        return BenchClient(ClientOptions(url=url, api_key=self.api_key, model=model, request_timeout=300.0))

    def load(self) -> bool:
        """The stored baseline, when there is one (a broken file is refused with its reason)."""
        if not self.path.exists():
            return False
        try:
            self.baseline = baseline_mod.read(self.path)
        except baseline_mod.BaselineError as exc:
            self.unusable = str(exc)
            return True
        self.progress.line(
            f"[verify] reusing the baseline {self.path} ({self.baseline['model']}, SGLang "
            f"{self.baseline['server_version']}): no no-speculation deploy"
        )
        return True

    async def capture(self, deploy: Any, host: str) -> None:
        """Deploy `k0` on `host` once and keep its greedy outputs as the baseline."""
        cfg = SpecConfig(spec_steps=0)
        self.progress.line(f"[verify] deploying the no-speculation baseline on {host}")
        res = await asyncio.to_thread(deploy, cfg, host, label="verify-baseline")
        if not res.ok or not res.client_url:
            self.unusable = f"the no-speculation baseline did not deploy on {host}: {res.reason}"
            self.progress.line(f"[verify] {self.unusable}")
            self.log.append(VerifyRecord(config=cfg, host=host, passed=False, role="baseline", reasons=[self.unusable]))
            return
        served = ((res.report or {}).get("server") or {}).get("served_model_name")
        try:
            async with self._client(res.client_url, served) as c:
                doc = await gate.capture(c, self.prompts, self.tool)
        except (baseline_mod.BaselineError, probe.ProbeError, ServerError, OSError, ValueError) as exc:
            self.unusable = f"the no-speculation baseline could not be captured: {exc}"
            self.progress.line(f"[verify] {self.unusable}")
            self.log.append(VerifyRecord(config=cfg, host=host, passed=False, role="baseline", reasons=[self.unusable]))
            return
        baseline_mod.write(self.path, doc)
        self.baseline = doc
        self.log.append(
            VerifyRecord(
                config=cfg,
                host=host,
                passed=True,
                role="baseline",
                requests=doc["requests"],
                seconds=doc["seconds"],
                deploy_s=round(res.elapsed_s, 3),
                verdict={"baseline": str(self.path), "deterministic": doc["deterministic"]},
            )
        )
        self.progress.line(
            f"[verify] baseline: {len(doc['short'])} short + {len(doc['long'])} long outputs of {doc['model']} "
            f"(SGLang {doc['server_version']}) in {doc['seconds']:.1f} s -> {self.path}"
        )

    async def check(
        self, cfg: SpecConfig, host: str, url: str, model: str | None, levels: list[Any], deployment: int = 1
    ) -> VerifyRecord:
        """The gate on one configuration's running deployment (its acceptance judged against what its
        `levels` measured); the record is appended and returned."""
        measured = measured_accept(levels, cfg.config_id)
        if self.baseline is None:
            why = self.unusable or "no baseline"
            rec = VerifyRecord(
                config=cfg, host=host, passed=False, reasons=[f"not checked: {why}"], deployment=deployment
            )
            self.log.append(rec)
            return rec
        try:
            async with self._client(url, model) as c:
                v = await gate.check(c, self.prompts, self.baseline, measured, f"the baseline {self.path}")
        except baseline_mod.BaselineError as exc:
            v = {"passed": False, "reasons": [f"not checked: {exc}"]}
        except (probe.ProbeError, ServerError, OSError, ValueError) as exc:
            v = {"passed": False, "reasons": [f"the server did not answer the gate: {exc}"]}
        rec = VerifyRecord(
            config=cfg,
            host=host,
            passed=bool(v["passed"]),
            reasons=list(v.get("reasons") or []),
            requests=v.get("requests"),
            seconds=v.get("seconds"),
            deployment=deployment,
            verdict={k: x for k, x in v.items() if k not in ("passed", "reasons", "requests", "seconds")},
        )
        self.log.append(rec)
        self.progress.line(f"[{cfg.label}] verify: {rules.verdict_line(v)}")
        return rec
