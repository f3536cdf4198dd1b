"""The sweep's exact round (tuner/verify/phase.py `VerifyPhase.exact_round`) where it must not
deploy anything: a release without --enable-deterministic-inference, --no-verify-exact, a sweep
that already runs deterministic. The report and recommendation.json then say which rule judged
each configuration. (The round that deploys is tests/tuner/test_verify_sweep_local.py's.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sglang_utils import sglang_verify as rules

from tuner.data.records import SweepState, VerifyRecord
from tuner.present.verify_text import exact_json, judged_by, report_section
from tuner.spec.configs import SpecConfig
from tuner.verify.phase import VerifyPhase, exact_baseline_path
from tuner.verify.prompts import prompt_set, settings


class _Log:
    def __init__(self) -> None:
        self.state = SweepState()

    def append(self, record: Any) -> dict[str, Any]:
        self.state.add(record)
        return {}


class _Progress:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


def _no_deploy(*_a: Any, **_k: Any) -> Any:
    raise AssertionError("the exact round must not deploy here")


def _phase(
    tmp_path: Path, version: str, deterministic: bool, exact: bool = True
) -> tuple[VerifyPhase, _Log, _Progress]:
    log, progress = _Log(), _Progress()
    phase = VerifyPhase(
        baseline_path=tmp_path / "verify_baseline.json",
        prompts=prompt_set(None, settings()),
        log=log,
        progress=progress,
        api_key=None,
        tool="test",
        exact=exact,
    )
    phase.baseline = {"server_version": version, "deterministic": deterministic, "model": "m"}
    k2 = SpecConfig(spec_steps=2)
    # k2 passed its per-deployment check by the threshold rule
    log.append(
        VerifyRecord(
            config=k2,
            host="h",
            passed=True,
            verdict={"rule": rules.rule_for(version, deterministic, deterministic)},
        )
    )
    return phase, log, progress


def _run(phase: VerifyPhase, log: _Log) -> None:
    import asyncio

    asyncio.run(
        phase.exact_round(
            _no_deploy,
            "h",
            lambda: [SpecConfig(spec_steps=2)],
            lambda: (set(log.state.verify_exact), set(log.state.verify)),
        )
    )


@pytest.mark.parametrize(
    ("version", "deterministic", "exact", "said", "rule"),
    [
        ("0.5.2", False, True, "SGLang 0.5.2 has no --enable-deterministic-inference (since 0.5.3)", "threshold"),
        ("0.5.9", False, False, "--no-verify-exact", "threshold"),
        ("0.5.9", True, True, "already run with --enable-deterministic-inference", "exact (its measurement"),
    ],
)
def test_no_redeploy_and_the_report_says_which_rule(tmp_path, version, deterministic, exact, said, rule):
    phase, log, progress = _phase(tmp_path, version, deterministic, exact)
    _run(phase, log)
    assert any(said in ln for ln in progress.lines), progress.lines
    st = log.state
    assert st.verify_exact == {} and st.verify_exact_cost == {"deploys": 0, "seconds": 0.0}
    assert said in (st.verify_exact_round.verdict.get("why") or "")
    assert judged_by(st, "k2-t1").startswith(rule)
    js = exact_json(st)
    assert js["ran"] is False and js["deploys"] == 0 and said in js["why"]
    text = "\n".join(report_section(st, True, True))
    assert "### Exact round (deterministic inference)" in text and "Not run: " in text and said in text
    assert f"judged by: {rule}" in text
    assert not exact_baseline_path(phase.path).exists()
