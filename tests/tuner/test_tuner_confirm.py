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


def test_a_cell_that_lost_requests_keeps_its_configuration_in_doubt_at_the_other_levels():
    """k3 lost requests at C=16 only: it does not compete there, but at C=4 it is as close to k2 as
    before, so the round still confirms it (a level's choice excludes cells, not configurations)."""
    w = WorkloadSpec(concurrency=(4, 16), input_len=256, output_len=256)
    records = [*MEASURED, *cell(2, 3000, c=16), *cell(3, 2000, c=16, failed=4), *cell(4, 2500, c=16)]
    plans, _ = confirm.next_confirmations(SweepState.fold(records), w, 3)
    assert {"k2-t1", "k3-t1"} <= {p.config.config_id for p in plans}
