"""results.csv rows from the folded records (tuner/data/results.py)."""

from __future__ import annotations


def test_a_configuration_whose_benchmark_never_started_has_its_rows_with_the_reason():
    """Deployed, then every warm-up request failed: results.csv still shows its planned points."""
    from tuner.data.records import BenchFailedRecord, DeployRecord, LevelRecord, SweepState
    from tuner.data.results import result_rows
    from tuner.measure.metrics import LevelMetrics
    from tuner.spec.configs import SpecConfig
    from tuner.spec.sweepspec import WorkloadSpec

    k1, k2 = SpecConfig(1, 1, None, "NEXTN"), SpecConfig(2, 1, None, "NEXTN")
    recs = [
        DeployRecord(config=k1, host="h"),
        LevelRecord(
            config=k1, host="h", concurrency=4, metrics=LevelMetrics(concurrency=4, status="ok", output_tok_s=1.0)
        ),
        DeployRecord(config=k2, host="h"),
        BenchFailedRecord(config=k2, host="h", reason="every warm-up request failed: HTTP 500", kind="warmup"),
    ]
    rows = result_rows(SweepState.fold(r.to_json() for r in recs), WorkloadSpec(concurrency=(4, 16)))
    k2_rows = [r for r in rows if r["config_id"] == "k2-t1"]
    assert [(r["concurrency"], r["status"]) for r in k2_rows] == [(4, "bench_failed"), (16, "bench_failed")]
    assert k2_rows[0]["error"] == "every warm-up request failed: HTTP 500"
