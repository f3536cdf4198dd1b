"""What the report and recommendation.json say of a model-guided search (tuner/present/search_report.py,
the "Model-guided search" section of tuner/present/report.py), from the records alone."""

from __future__ import annotations

import json

from test_tuner_search import LEVELS, Machine, W, run_search

from tuner.data.records import SweepState
from tuner.present import report
from tuner.present.summary import recommendation_json, summarize
from tuner.spec.configs import SpecConfig
from tuner.spec.sweepspec import SweepSpec

SPEC = SweepSpec(workload=W, steps=tuple(range(1, 9)), search="model")


def bent_machine() -> Machine:
    """Step time bends with depth: the first prediction past the anchors misses, by more than a
    start's draw (a bend of 0.45 ms x k^2 misses by under 3%: within it)."""
    return Machine(accept=[0.97], tk_ms=0.0, tkk_ms=0.6, kv0=900_000, kv_per_step=30_000, mrr0=60, mrr_per_step=0)


def test_report_shows_predicted_vs_measured_every_skip_and_the_misfits():
    st, _ = run_search(bent_machine(), range(1, 9))
    # what `report DIR` does: fold the records as written, then summarize
    st = SweepState.fold([r.to_json() for r in st.records])
    s = summarize(st, SPEC)
    assert s.search is not None
    text = report.render(s)
    section = text.split("## Model-guided search", 1)[1].split("\n## ", 1)[0]
    assert "### Predicted vs measured" in section
    for cid in st.predictions:
        for c in LEVELS:
            assert f"| {cid} | {c} |" in section
    # every skip is listed (a misfit model skips nothing: none come after the first misfit)
    if st.skipped:
        assert "### Not deployed, on the model's prediction" in section
        assert all(f"| {cid} |" in section for cid in st.skipped)
    assert "### Misfits" in section and "outside its predicted interval" in section
    assert "from the first of them on nothing was skipped on a prediction" in section
    assert "**NO: misfit**" in section
    assert f"deployed {len(s.search.deployed)} of 8 planned" in section
    rec = recommendation_json(s)["search"]
    json.dumps(rec)
    assert rec["mode"] == "model" and rec["planned"] == 8
    assert {x["config_id"] for x in rec["skipped"]} == set(st.skipped)
    assert all(x["prediction"]["levels"] for x in rec["skipped"])
    assert any(not x["inside"] for x in rec["predicted_vs_measured"])
    assert any("Misfit" in n for n in s.notes)
    if st.skipped:
        assert any("did not deploy" in n and "--resume --search grid" in n for n in s.notes)


def test_a_grid_sweep_has_no_search_section():
    m = bent_machine()
    st = SweepState.fold([r for k in (1, 2) for r in m.measure(SpecConfig(k))])
    s = summarize(st, SweepSpec(workload=W, steps=(1, 2), search="grid"))
    assert s.search is None
    assert "Model-guided search" not in report.render(s)
    assert recommendation_json(s)["search"] is None


def test_report_lists_every_skip_with_its_prediction():
    """A machine of the model's own family: no misfit, so the search skips on its predictions, and
    the report and recommendation.json list each skip with what was predicted for it."""
    st, _ = run_search(Machine(accept=[0.97], kv0=900_000, kv_per_step=30_000, mrr0=60, mrr_per_step=0), range(1, 9))
    st = SweepState.fold([r.to_json() for r in st.records])
    s = summarize(st, SPEC)
    assert s.search is not None and st.skipped and not s.search.misfits
    section = report.render(s).split("## Model-guided search", 1)[1].split("\n## ", 1)[0]
    assert "### Not deployed, on the model's prediction" in section
    assert all(f"| {cid} |" in section for cid in st.skipped)
    rec = recommendation_json(s)["search"]
    assert {x["config_id"] for x in rec["skipped"]} == set(st.skipped)
    assert all(x["prediction"]["levels"] for x in rec["skipped"])
    assert any("did not deploy" in n and "--resume --search grid" in n for n in s.notes)


def test_an_interrupted_search_counts_the_plan_not_what_the_records_reached():
    """Steps 1-8 with only the first deployments recorded: 'deployed 2 of 8 planned', not '2 of 2'."""
    st, _ = run_search(bent_machine(), range(1, 9))
    first_two = [cid for cid in st.order if cid in st.deploys][:2]
    recs = [r for r in st.records if getattr(r, "config_id", None) in first_two and r.TYPE in ("deploy", "level")]
    part = SweepState.fold([r.to_json() for r in recs])
    s = summarize(part, SPEC)
    assert s.search is not None and s.search.planned == 8
    assert "deployed 2 of 8 planned" in report.render(s)


def test_depths_the_inventorys_limit_set_aside_are_not_counted_as_planned():
    """The sweep's plan read the inventory's sglang_server_spec_max_steps (6 here) and recorded
    depths 7 and 8 as infeasible; the report, which rebuilds the plan from the flags alone, counted
    them as planned again ("2 of 8 planned" for a plan of 6)."""
    from tuner.data.records import SkipRecord

    st, _ = run_search(bent_machine(), range(1, 9))
    first_two = [cid for cid in st.order if cid in st.deploys][:2]
    recs = [r for r in st.records if getattr(r, "config_id", None) in first_two and r.TYPE in ("deploy", "level")]
    aside = [
        SkipRecord(config=SpecConfig(k), kind="infeasible", reason="above sglang_server_spec_max_steps") for k in (7, 8)
    ]
    s = summarize(SweepState.fold([r.to_json() for r in [*aside, *recs]]), SPEC)
    assert s.search is not None and s.search.planned == 6


def test_a_sweep_recorded_before_a_misfit_stopped_the_skips_is_not_said_to_have_skipped_nothing():
    """A kept sweep of 2026-12-02 (bench/schedule_vs_static/h200-llama3-8b, code 69a2bb2) skipped
    k1, k5 and k6 on the model's predictions right after k2's five levels had all landed outside
    their bands; today's rule would have measured them. Rendered today, its report must say what its
    records show, not today's rule."""
    from pathlib import Path

    kept = Path(__file__).resolve().parents[2] / "bench" / "schedule_vs_static" / "h200-llama3-8b"
    lines = (kept / "records.jsonl").read_text().splitlines()
    st = SweepState.fold([json.loads(x) for x in lines if x.strip()])
    s = summarize(st, SweepSpec(workload=W, steps=tuple(range(1, 7)), search="model"))
    assert s.search is not None and {m.config.config_id for m in s.search.misfits} == {"k2-t1"}
    assert s.search.vouched is None and s.search.skipped_unproven == ["k1-t1", "k5-t1", "k6-t1"]
    section = report.render(s).split("### Misfits", 1)[1]
    assert "nothing was skipped" not in section
    assert "from the first of them on k1-t1, k5-t1, k6-t1 were still skipped on the model's predictions" in section
    assert not any("skipped nothing" in n for n in s.notes)
    # a sweep under today's rule has none (test_report_shows_predicted_vs_measured_every_skip_and_the_misfits)
    st2, _ = run_search(bent_machine(), range(1, 9))
    assert summarize(SweepState.fold([r.to_json() for r in st2.records]), SPEC).search.skipped_unproven == []
