"""The confirmation round's plan (tuner/decide/confirm.py) on hand-made records: what is in doubt."""

from __future__ import annotations

import pytest

from tuner.data.records import BenchFailedRecord, DeployRecord, LevelRecord, Record, SweepState, VerifyRecord
from tuner.decide import confirm
from tuner.measure.metrics import LevelMetrics
from tuner.spec.configs import SpecConfig
from tuner.spec.sweepspec import WorkloadSpec

W = WorkloadSpec(concurrency=(4,), input_len=256, output_len=256)


def cell(k: int, tok_s: float, rel: float = 0.02, c: int = 4, failed: int = 0) -> list[Record]:
    """One deployment of depth k measured at C=c within +-rel, `failed` of its 16 requests lost."""
    cfg = SpecConfig(k)
    m = LevelMetrics(
        concurrency=c,
        requests=16,
        requests_ok=16 - failed,
        requests_failed=failed,
        output_tokens=4096,
        output_tok_s=tok_s,
        output_tok_s_ci_low=tok_s * (1 - rel),
        output_tok_s_ci_high=tok_s * (1 + rel),
        windows=8,
        samples=16,
        status="ok" if not failed else "partial",
    )
    return [DeployRecord(config=cfg, host="h"), LevelRecord(config=cfg, host="h", concurrency=c, metrics=m)]


MEASURED = cell(2, 1000) + cell(3, 1010) + cell(4, 900)


def test_the_closest_pair_is_in_doubt():
    plans, _ = confirm.next_confirmations(SweepState.fold(MEASURED), W, 3)
    assert {p.config.config_id for p in plans} >= {"k2-t1", "k3-t1"}


@pytest.mark.parametrize(
    "failure",
    [
        VerifyRecord(config=SpecConfig(3), host="h", passed=False, reasons=["its outputs differ"]),
        BenchFailedRecord(config=SpecConfig(3), host="h", kind="server_lost", reason="the server went away twice"),
    ],
    ids=["failed-the-gate", "lost-its-server-twice"],
)
def test_a_configuration_that_failed_is_in_doubt_nowhere(failure):
    """The fastest depth failed (its gate, or its server twice): no start is spent confirming it, and
    the others are judged among themselves."""
    plans, _ = confirm.next_confirmations(SweepState.fold([*MEASURED, failure]), W, 3)
    ids = {p.config.config_id for p in plans}
    assert "k3-t1" not in ids and "k2-t1" in ids


def test_a_verdict_in_doubt_at_a_later_temperature_is_confirmed_too():
    """At temperature 0 k2 beats k4 far beyond noise (k2 and k3 tied); at 0.7 k4 and k2 are tied: k4's
    verdict is in doubt there, so the round confirms it whatever the order of --temperature (it read
    the first temperature's verdicts alone)."""
    hot = cell(2, 800) + cell(3, 700) + cell(4, 805)
    for rec in hot:
        if isinstance(rec, LevelRecord):
            rec.temperature = 0.7
    records = [*MEASURED, *(r for r in hot if isinstance(r, LevelRecord))]
    for temps in ((0.0, 0.7), (0.7, 0.0)):
        w = WorkloadSpec(concurrency=(4,), input_len=256, output_len=256, temperature=temps)
        plans, _ = confirm.next_confirmations(SweepState.fold(records), w, 4)
        ids = {p.config.config_id for p in plans}
        assert {"k2-t1", "k3-t1", "k4-t1"} <= ids, (temps, ids)
        (k4,) = [p for p in plans if p.config.config_id == "k4-t1"]
        assert "at temperature 0.7" in k4.why


def test_a_cell_that_lost_requests_keeps_its_configuration_in_doubt_at_the_other_levels():
    """k3 lost requests at C=16 only: it does not compete there, but at C=4 it is as close to k2 as
    before, so the round still confirms it (a level's choice excludes cells, not configurations)."""
    w = WorkloadSpec(concurrency=(4, 16), input_len=256, output_len=256)
    records = [*MEASURED, *cell(2, 3000, c=16), *cell(3, 2000, c=16, failed=4), *cell(4, 2500, c=16)]
    plans, _ = confirm.next_confirmations(SweepState.fold(records), w, 3)
    assert {"k2-t1", "k3-t1"} <= {p.config.config_id for p in plans}


def test_the_round_spends_no_start_on_a_configuration_that_misses_the_slo():
    """k4 is fastest but misses the TTFT SLO, so it competes nowhere; k2 and k3 meet it and are
    close: the round confirms k2 against k3, not k3 against k4."""
    from tuner.measure.metrics import LevelSamples
    from tuner.spec.slo import parse_slo

    def cell(k: int, tok_s: float, ttft_ms: float) -> list[Record]:
        cfg = SpecConfig(k)
        m = LevelMetrics(
            concurrency=4,
            requests=16,
            requests_ok=16,
            output_tokens=4096,
            output_tok_s=tok_s,
            output_tok_s_ci_low=tok_s * 0.98,
            output_tok_s_ci_high=tok_s * 1.02,
            windows=8,
            samples=16,
            status="ok",
        )
        s = LevelSamples(
            ttft_ms=[ttft_ms] * 16, tpot_ms=[10.0] * 16, e2e_ms=[ttft_ms + 2550.0] * 16, output_tokens=[256] * 16
        )
        return [
            DeployRecord(config=cfg, host="h"),
            LevelRecord(config=cfg, host="h", concurrency=4, metrics=m, samples=s),
        ]

    state = SweepState.fold(cell(2, 1000, 100) + cell(3, 1010, 100) + cell(4, 1030, 900))
    w = WorkloadSpec(concurrency=(4,), input_len=256, output_len=256, slo=parse_slo("ttft_p99_ms=500"))
    plans, _ = confirm.next_confirmations(state, w, 2)
    assert sorted(p.config.config_id for p in plans) == ["k2-t1", "k3-t1"]


def test_the_rounds_cost_leaves_out_the_sweeps_own_repeat_deploys():
    """With --repeat-deploys 3 the round does not run: deployments 2 and 3 are the sweep's own,
    and the notes credited the round with them (4 starts against a --confirm 2 budget)."""
    from tuner.data.records import SweepState, TimingRecord
    from tuner.decide import confirm
    from tuner.spec.configs import SpecConfig

    st = SweepState()
    for cfg in (SpecConfig(3), SpecConfig(4)):
        for dep in (1, 2, 3):
            st.add(TimingRecord(config=cfg, host="h", total_s=10.0, deployment=dep))
    assert confirm.cost(st, repeat_deploys=3)["starts"] == 0
    assert confirm.cost(st)["starts"] == 4  # without repeats, deployments 2 and 3 are the round's
    st.add(TimingRecord(config=SpecConfig(3), host="h", total_s=10.0, deployment=4))
    assert confirm.cost(st, repeat_deploys=3) == {"starts": 1, "seconds": 10.0, "share_pct": round(100 / 6, 1)}


def test_a_redeploy_stopped_before_its_level_ended_is_made_again_under_its_number():
    """A run stopped while the round's redeploy of k3 was up (its deploy record, nothing after it):
    that start is not spent, and on --resume the round makes it again as deployment 2, not 3."""
    from tuner.data.records import TimingRecord

    done = [*MEASURED, *(TimingRecord(config=SpecConfig(k), host="h", total_s=10.0) for k in (2, 3, 4))]
    stopped = [*done, DeployRecord(config=SpecConfig(3), host="h", deployment=2)]
    state = SweepState.fold(stopped)
    assert confirm.spent(state) == 0
    plans, _ = confirm.next_confirmations(state, W, 3)
    assert {p.config.config_id: p.deployment for p in plans}["k3-t1"] == 2
    # once it finished (its timing), it is spent and the next start of k3 is its third
    finished = [*stopped, *cell(3, 1005)[1:], TimingRecord(config=SpecConfig(3), host="h", total_s=10.0, deployment=2)]
    finished[-2].deployment = 2
    state = SweepState.fold(finished)
    assert confirm.spent(state) == 1
    plans, _ = confirm.next_confirmations(state, W, 3)
    assert {p.config.config_id: p.deployment for p in plans}.get("k3-t1", 3) == 3


def test_a_redeploy_stopped_after_its_level_counts_as_spent():
    """Stopped after the redeploy's level was recorded but before its timing record (the
    correctness check runs between them): its measurement is kept and pooled, so the start is
    spent; `--resume --confirm 1` made a second one and said "1 extra start(s)" and "2" in a line."""
    from tuner.data.records import TimingRecord

    done = [*MEASURED, *(TimingRecord(config=SpecConfig(k), host="h", total_s=10.0) for k in (2, 3, 4))]
    again = cell(3, 1005)
    for rec in again:
        rec.deployment = 2
    state = SweepState.fold([*done, *again])
    assert confirm.spent(state) == 1 and confirm.cost(state)["starts"] == 1


def test_a_failed_redeploy_of_a_measured_configuration_does_not_fail_it():
    """k3 came up and was measured; its redeploy (deployment 2) did not start. Its measurements stand
    (it may still be recommended, so it must not also be listed as failed); the report says the
    start failed."""
    from tuner.present.summary import recommendation_json, summarize
    from tuner.spec.sweepspec import SweepSpec

    recs = [
        *MEASURED,
        DeployRecord(config=SpecConfig(3), host="h", status="failed", reason="gate timed out", deployment=2),
    ]
    state = SweepState.fold(recs)
    assert "k3-t1" not in state.failed and [r.config_id for r in state.redeploy_failures] == ["k3-t1"]
    s = summarize(state, SweepSpec(workload=W, steps=(2, 3, 4)))
    rec = recommendation_json(s)
    assert rec["failed"] == []
    assert any("failed to start again on h (deployment 2): gate timed out" in n for n in rec["notes"])
    # a configuration whose first start failed is failed, as before
    first = SweepState.fold([*cell(2, 1000), DeployRecord(config=SpecConfig(3), host="h", status="failed", reason="x")])
    assert "k3-t1" in first.failed


def test_a_resumed_start_that_fails_keeps_what_an_earlier_process_measured():
    """`--resume` starts a configuration an interrupted run measured part of again as its first
    deployment; that start failed. It was listed failed and still recommended (its levels counted):
    now its measurements stand, as for a later start that fails, and the report says the start
    failed instead of calling it both failed and the best."""
    from tuner.present.summary import recommendation_json, summarize
    from tuner.spec.sweepspec import SweepSpec

    recs = [
        *MEASURED,
        DeployRecord(config=SpecConfig(3), host="h", status="failed", reason="CUDA out of memory", deployment=1),
    ]
    state = SweepState.fold(recs)
    assert "k3-t1" not in state.failed and [r.config_id for r in state.redeploy_failures] == ["k3-t1"]
    rec = recommendation_json(summarize(state, SweepSpec(workload=W, steps=(2, 3, 4))))
    assert rec["failed"] == []
    assert any("failed to start again on h (deployment 1): CUDA out of memory" in n for n in rec["notes"])


def test_a_report_of_a_crawling_server_shows_its_numbers_not_zeros():
    """Throughputs under 0.05 tok/s printed as 0.0 with a 23% margin between them: a number that
    would read 0 keeps two significant figures, so the table's margins follow from what it shows."""
    from tuner.present.report import render
    from tuner.present.summary import summarize
    from tuner.spec.sweepspec import SweepSpec

    state = SweepState.fold(cell(2, 0.013) + cell(3, 0.024))
    text = render(summarize(state, SweepSpec(workload=W, steps=(2, 3))))
    assert "0.024" in text and "0.013" in text, text
    # the recommendation's sentence and the envelope's too
    assert "0.0 tok/s" not in text and "(0 tok/s)" not in text, text
