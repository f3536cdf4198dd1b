"""Cross-checks (tuner/decide/crosscheck.py): a disagreement over 1% is a warning, never a silent number."""

from __future__ import annotations

from tuner.data.records import LevelRecord
from tuner.decide.crosscheck import check_levels
from tuner.measure.metrics import LevelMetrics
from tuner.spec.configs import SpecConfig


def level(**m):
    base = dict(concurrency=4, requests=8, requests_ok=8, output_tokens=2048, output_tok_s=600.0, status="ok")
    return LevelRecord(config=SpecConfig(3, 1), concurrency=4, metrics=LevelMetrics(**{**base, **m}))


def test_agreeing_sources_give_no_warning():
    ck = check_levels(
        [level(stream_tokens=2048, metrics_tokens=2048.0, spec_verify_ct=512, metrics_verify_calls=512.0)]
    )
    assert ck.levels == 1 and ck.comparisons == 3 and ck.warnings == []
    assert ck.max_diff_pct == {
        "tokens: client stream vs server usage": 0.0,
        "tokens: server usage vs /metrics": 0.0,
        "acceptance: client spec_verify_ct vs /metrics": 0.0,
    }


def test_each_disagreement_over_one_percent_is_named():
    # /metrics saw 5% more tokens (someone else's traffic, or tokens of requests the client lost)
    ck = check_levels([level(metrics_tokens=2150.4, requests_failed=1)])
    (w,) = ck.warnings
    assert "k3-t1 C=4 T=0 rep 1" in w and "server usage vs /metrics disagree by 4.8%" in w and "1 failed" in w
    # the client's acceptance (4.0) against the server's counters (3.5)
    ck = check_levels([level(metrics_tokens=2048.0, spec_verify_ct=512, metrics_verify_calls=585.14)])
    assert len(ck.warnings) == 1 and "acceptance" in ck.warnings[0]
    # within 1%: no warning
    assert check_levels([level(stream_tokens=2060)]).warnings == []
    assert len(check_levels([level(stream_tokens=2100)]).warnings) == 1
