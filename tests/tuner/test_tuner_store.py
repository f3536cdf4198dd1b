"""records.jsonl, results.csv and resume state (tuner/data/store.py), plus the derived outputs."""

from __future__ import annotations

import csv
import json
import urllib.parse

import pytest

from tuner.data.records import DeployRecord, LevelRecord, SkipRecord, SweepState, parse_record
from tuner.data.redact import Redactor
from tuner.data.results import RESULT_COLUMNS, result_rows
from tuner.data.store import Store, read_records
from tuner.present import outputs
from tuner.spec.configs import SpecConfig
from tuner.spec.sweepspec import SweepSpec, WorkloadSpec

WORKLOAD = WorkloadSpec(concurrency=(1, 4), temperature=0.0, input_len=8, output_len=16, repeats=1)


def rows_of(records):
    return result_rows(SweepState.fold(records), WORKLOAD)


def cfg(k):
    return {
        "config_id": f"k{k}-t1",
        "spec_steps": k,
        "spec_topk": 1,
        "spec_draft_tokens": None,
        "spec_algorithm": "NEXTN",
    }


def deploy(k, status="ok", reason=None, host="h1"):
    return {
        "type": "deploy",
        "config": cfg(k),
        "host": host,
        "status": status,
        "reason": reason,
        "ready_s": 1.5,
        "capacity": {"max_total_num_tokens": 1000 - k, "max_running_requests": 20 - k},
        "speculative": {"num_draft_tokens": k + 1},
        "server": {"served_model_name": "m", "version": "x"},
    }


def level(k, c, tput, rep=1, failed=0, host="h1"):
    return {
        "type": "level",
        "config": cfg(k),
        "host": host,
        "repeat": rep,
        "concurrency": c,
        "temperature": 0.0,
        "input_len": 8,
        "output_len": 16,
        "metrics": {
            "concurrency": c,
            "requests": 4,
            "requests_ok": 4 - failed,
            "requests_failed": failed,
            "output_tokens": 64,
            "wall_s": 1.0,
            "output_tok_s": tput,
            "per_request_tok_s": tput / c,
            "ttft_ms_p50": 10.0,
            "accept_length": k + 0.5,
            "accept_length_source": "meta_info",
            "status": "ok" if not failed else "partial",
            "errors": {"HTTP 503: x": failed} if failed else {},
        },
    }


def test_append_is_durable_and_tolerates_a_torn_line(tmp_path):
    st = Store(tmp_path)
    st.append(deploy(1))
    with open(st.records_path, "a") as f:
        f.write('{"type": "level", "conf')  # the process died mid-write
    assert len(read_records(st.records_path)) == 1
    st.append(level(1, 1, 100.0))  # the next append closes the torn line
    recs = read_records(st.records_path)
    assert [r["type"] for r in recs] == ["deploy", "level"]
    assert all("time" in r for r in recs)


def test_redaction_everywhere(tmp_path):
    key = "sk-very-secret-123"
    st = Store(tmp_path, Redactor([key]))
    st.append({**deploy(1, "failed", f"401 with key {key}")})
    st.write_sweep({"params": {"x": key}})
    st.write_results_csv(rows_of(st.records()))
    for p in tmp_path.iterdir():
        assert key not in p.read_text()


def test_a_key_is_masked_in_every_spelling_a_server_may_echo_it_in(tmp_path):
    """A key with characters that a repr, JSON or a URL spell otherwise (a server's error body or a
    log line may carry it so) is masked in each of those spellings too, not only raw."""
    key = "sk-'q\"/+ä-0001"
    spellings = [key, "sk-\\'q\"/+ä-0001", json.dumps(key)[1:-1], urllib.parse.quote(key, safe="")]
    assert len(set(spellings)) == 4
    st = Store(tmp_path, Redactor([key]))
    st.append({**deploy(1, "failed", " | ".join(spellings))})
    text = st.records_path.read_text()
    for form in spellings:
        assert form not in text, form


def test_result_rows_join_and_terminal_rows():
    recs = [
        deploy(1),
        level(1, 1, 100.0),
        level(1, 4, 300.0, failed=1),
        deploy(2, "failed", "Not enough memory"),
        {"type": "skip", "kind": "early_stop", "config": cfg(3), "reason": "past peak"},
    ]
    rows = rows_of(recs)
    assert [(r["config_id"], r["concurrency"], r["status"]) for r in rows] == [
        ("k1-t1", 1, "ok"),
        ("k1-t1", 4, "partial"),
        ("k2-t1", 1, "deploy_failed"),
        ("k2-t1", 4, "deploy_failed"),
        ("k3-t1", 1, "skipped"),
        ("k3-t1", 4, "skipped"),
    ]
    assert rows[0]["max_total_num_tokens"] == 999 and rows[0]["ready_s"] == 1.5
    assert rows[1]["error"] == "1x HTTP 503: x"
    assert rows[2]["error"] == "Not enough memory"


def test_results_csv_columns(tmp_path):
    st = Store(tmp_path)
    for r in (deploy(1), level(1, 1, 100.0), level(1, 4, 300.0)):
        st.append(r)
    st.write_results_csv(rows_of(st.records()))
    with open(tmp_path / "results.csv") as f:
        rd = csv.DictReader(f)
        assert rd.fieldnames == RESULT_COLUMNS
        rows = list(rd)
    for col in (
        "spec_steps",
        "spec_topk",
        "spec_draft_tokens",
        "temperature",
        "concurrency",
        "requests_ok",
        "requests_failed",
        "output_tok_s",
        "per_request_tok_s",
        "ttft_ms_p50",
        "ttft_ms_p99",
        "tpot_ms_p50",
        "accept_length",
        "max_total_num_tokens",
        "max_running_requests",
        "ready_s",
        "status",
    ):
        assert col in rows[0]
    assert rows[1]["output_tok_s"] == "300"


def test_resume_state():
    recs = [
        deploy(1),
        level(1, 1, 100.0),
        level(1, 4, 300.0),
        deploy(2, "failed", "boom"),
        deploy(3),
        level(3, 1, 50.0),
        {"type": "skip", "config": cfg(4), "reason": "r"},
    ]
    st = SweepState.fold(recs)
    assert st.done == {("k1-t1", 0.0, 1, 1, 1), ("k1-t1", 0.0, 4, 1, 1), ("k3-t1", 0.0, 1, 1, 1)}
    assert {cid: r.reason for cid, r in st.failed.items()} == {"k2-t1": "boom"}
    assert {cid: r.reason for cid, r in st.skipped.items()} == {"k4-t1": "r"}
    assert st.deployed_hosts == {"h1"}
    # a later successful deploy clears an earlier failure
    assert SweepState.fold(recs + [deploy(2)]).failed == {}


def test_levels_join_the_deployment_they_ran_on():
    recs = [deploy(1), level(1, 1, 100.0), {**deploy(1), "capacity": {"max_total_num_tokens": 5}}, level(1, 4, 1.0)]
    rows = rows_of(recs)
    assert [r["max_total_num_tokens"] for r in rows] == [999, 5]


def test_records_round_trip_and_unknown_kinds():
    for raw in (deploy(1), level(1, 4, 300.0, failed=1), {"type": "skip", "kind": "capacity", "config": cfg(5)}):
        rec = parse_record(raw)
        again = rec.to_json()
        assert parse_record(again).to_json() == again
        for k, v in raw.items():
            if k == "metrics":
                assert {kk: again[k][kk] for kk in v} == v
            else:
                assert again[k] == v, k
    assert isinstance(parse_record(deploy(1)), DeployRecord)
    assert isinstance(parse_record(level(1, 1, 1.0)), LevelRecord)
    assert isinstance(parse_record({"type": "skip", "config": cfg(2)}), SkipRecord)
    # a record kind from another version is skipped, not fatal; so are unknown fields
    assert parse_record({"type": "from_the_future", "config": cfg(1)}) is None
    st = SweepState.fold([{"type": "from_the_future"}, {**level(1, 1, 7.0), "new_field": 1}])
    assert [lv.metrics.output_tok_s for lv in st.levels()] == [7.0]


def test_outputs_from_records(tmp_path):
    st = Store(tmp_path)
    data = {1: {1: 120.0, 4: 450.0}, 2: {1: 180.0, 4: 540.0}, 3: {1: 230.0, 4: 520.0}}
    for k, per in data.items():
        st.append(deploy(k))
        for c, v in per.items():
            st.append(level(k, c, v))
    st.append(deploy(4, "failed", "RuntimeError: Not enough memory"))
    st.append({"type": "skip", "kind": "capacity", "config": cfg(5), "reason": "deeper needs more"})
    s = outputs.write_all(st, SweepSpec(workload=WORKLOAD, steps=(1, 2, 3, 4, 5)))
    rec = json.loads((tmp_path / "recommendation.json").read_text())
    assert rec["by_concurrency"]["1"]["spec_steps"] == 3
    assert rec["by_concurrency"]["4"]["spec_steps"] == 2
    assert rec["by_concurrency"]["4"]["runner_up"]["spec_steps"] == 3
    assert rec["recommended"]["spec_steps"] in (2, 3)
    assert rec["failed"][0]["config_id"] == "k4-t1"
    assert any("Not enough memory" in n for n in rec["notes"])
    png = tmp_path / "throughput_vs_steps.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (tmp_path / "report.md").read_text()
    assert "## Recommendation" in report and "throughput_vs_steps.png" in report
    assert "deeper needs more" in report and "TPOT" in report
    assert s.choices[1].chosen.spec_steps == 3


def test_the_state_is_live_records_jsonl_is_read_once(tmp_path, monkeypatch):
    """One live state (docs/architecture.md "The tuner's stages"): the Store folds records.jsonl
    the first time it is asked, then each record as it is appended; the file is not read again
    unless something else wrote to it."""
    from tuner.data import store as store_mod
    from tuner.data.records import DeployRecord, SkipRecord
    from tuner.spec.configs import SpecConfig

    s = store_mod.Store(tmp_path)
    s.append(DeployRecord(config=SpecConfig(1), host="h", status="ok"))
    reads = []
    real = store_mod.read_records
    monkeypatch.setattr(store_mod, "read_records", lambda p, *a: reads.append(p) or real(p, *a))
    first = s.state()
    assert len(reads) == 1 and set(first.deploys) == {"k1-t1"}
    s.append(SkipRecord(config=SpecConfig(3), kind="early_stop", reason="past the peak"))
    s.append(DeployRecord(config=SpecConfig(2), host="h", status="failed", reason="no"))
    live = s.state()
    assert len(reads) == 1, "the appended records are folded in, not re-read"
    again = SweepState.fold(real(s.records_path))
    assert set(live.skipped) == set(again.skipped) == {"k3-t1"} and set(live.failed) == {"k2-t1"}
    assert [r.to_json() for r in live.records] == [r.to_json() for r in again.records]
    # something else appends to the file: the Store notices and folds it again
    with open(s.records_path, "a") as f:
        f.write(json.dumps(SkipRecord(config=SpecConfig(4), kind="early_stop", reason="x").to_json()) + "\n")
    assert "k4-t1" in s.state().skipped and len(reads) == 2


def test_deploy_best_reports_every_host(tmp_path):
    """`--deploy-best` deploys the recommendation on every host of the sweep: the report and
    recommendation.json name each host's outcome, and one host's failure is not hidden by another's
    success (the state once kept only the last host's record, so the host that ended last spoke for all)."""
    st = Store(tmp_path)
    for host in ("h1", "h2"):
        st.append(deploy(2, host=host))
        for c, v in ((1, 180.0), (4, 540.0)):
            st.append(level(2, c, v, host=host))
    best = {**deploy(2, host="h2"), "type": "deploy_best", "status": "failed", "reason": "not healthy after deploy"}
    st.append(best)
    st.append({**deploy(2, host="h1"), "type": "deploy_best", "verified": True})
    outputs.write_all(st, SweepSpec(workload=WORKLOAD, steps=(2,)))
    rec = json.loads((tmp_path / "recommendation.json").read_text())["deploy_best"]
    assert rec["status"] == "failed" and rec["verified"] is False
    assert rec["host"] == "h1" and rec["reason"] == "h2: not healthy after deploy"
    assert [(h["host"], h["status"], h["verified"]) for h in rec["hosts"]] == [
        ("h1", "ok", True),
        ("h2", "failed", False),
    ]
    report = (tmp_path / "report.md").read_text()
    assert "(`--deploy-best`) on h1: ok; on h2: failed, not healthy after deploy." in report

    # one host: as before, that host's outcome in its own words
    one = Store(tmp_path / "one")
    one.append(deploy(2))
    one.append(level(2, 1, 180.0))
    one.append({**deploy(2), "type": "deploy_best", "status": "failed", "reason": "probe request failed: x"})
    outputs.write_all(one, SweepSpec(workload=WORKLOAD, steps=(2,)))
    rec = json.loads((tmp_path / "one" / "recommendation.json").read_text())["deploy_best"]
    assert (rec["host"], rec["status"], rec["reason"]) == ("h1", "failed", "probe request failed: x")
    assert "(`--deploy-best`) on h1: failed, probe request failed: x." in (tmp_path / "one" / "report.md").read_text()

    # a later run that recommends another configuration replaces the earlier deploys
    st.append({**deploy(3, host="h1"), "type": "deploy_best", "verified": True})
    assert list(SweepState.fold(read_records(tmp_path / "records.jsonl")).deploy_best) == ["h1"]


def test_a_broken_record_is_named_not_lost_unseen_and_never_a_traceback(tmp_path, capsys):
    """A line cut short anywhere in records.jsonl, or valid JSON that is not a readable record (a
    hand edit: `config` not an object), is skipped with its line named on stderr; the rest folds."""
    st = Store(tmp_path)
    st.append(DeployRecord(config=SpecConfig(2), host="h1", status="ok"))
    st.append(DeployRecord(config=SpecConfig(3), host="h1", status="ok"))
    lines = st.records_path.read_text().splitlines()
    lines[0] = lines[0][: len(lines[0]) // 2]
    lines.append(json.dumps({"type": "deploy", "config": "k3"}))
    st.records_path.write_text("\n".join(lines) + "\n")
    state = Store(tmp_path).state()
    assert list(state.deploys) == ["k3-t1"]
    err = capsys.readouterr().err
    assert "skipped 2 unreadable record(s)" in err and "line 1 is not a whole JSON record" in err
    assert "line 3: a 'deploy' record this version cannot read" in err, err


def test_a_record_of_an_unknown_kind_or_without_its_keys_is_named_not_read_as_data(tmp_path, capsys):
    """A record of a kind this version does not know vanished unseen, one with no configuration
    became a made-up k0 row of results.csv, and a level whose concurrency is no number (or a deploy
    whose capacity is no object) ended the report with a traceback: each is skipped, named with its line."""
    st = Store(tmp_path)
    st.append(DeployRecord(config=SpecConfig(2), host="h1", status="ok"))
    st.append(level(2, 1, 180.0))
    lines = st.records_path.read_text().splitlines()
    lines.append(json.dumps({"type": "levle", "config": {"config_id": "k1-t1"}}))
    lines.append(json.dumps({"type": "level"}))
    lines.append(json.dumps({"type": "level", "config": {"spec_steps": 9}, "metrics": {"concurrency": "x"}}))
    lines.append(json.dumps({"type": "deploy", "config": {"spec_steps": 4}, "capacity": "x"}))
    st.records_path.write_text("\n".join(lines) + "\n")
    state = Store(tmp_path).state()
    assert [(lv.config_id, lv.concurrency) for lv in state.levels()] == [("k2-t1", 1)]
    assert list(state.deploys) == ["k2-t1"]
    err = capsys.readouterr().err
    assert "skipped 4 unreadable record(s)" in err, err
    assert "line 3: a record of a kind this version does not know: 'levle'" in err
    assert "line 4: a 'level' record this version cannot read: it names no configuration" in err
    assert "line 5: a 'level' record this version cannot read" in err
    assert "line 6: a 'deploy' record this version cannot read" in err


def test_nan_or_infinity_in_a_hand_edited_record_is_named_and_skipped(tmp_path, capsys):
    """Python's json reads NaN and Infinity, which are not JSON: a record holding one (a hand edit)
    is skipped with its line named, so the outputs written from the rest stay strict JSON."""
    st = Store(tmp_path)
    st.append(DeployRecord(config=SpecConfig(2), host="h1", status="ok"))
    st.append(level(2, 1, 180.0))
    st.append(level(2, 4, 600.0))
    lines = st.records_path.read_text().splitlines()
    lines[2] = lines[2].replace('"output_tok_s": 600.0', '"output_tok_s": NaN')
    assert "NaN" in lines[2]
    st.records_path.write_text("\n".join(lines) + "\n")
    state = Store(tmp_path).state()
    assert [m.level.concurrency for m in state.measured] == [1]
    err = capsys.readouterr().err
    assert "line 3 holds NaN, which JSON has no number for" in err, err
    outputs.write_all(Store(tmp_path), SweepSpec(workload=WORKLOAD, steps=(2,)), plot=False)
    text = (tmp_path / "recommendation.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"recommendation.json holds {c}"))


def test_a_report_of_an_unfinished_sweep_names_what_it_did_not_measure(tmp_path):
    """An interrupted sweep's report recommends among what was measured: it must say which planned
    configurations are missing, and say nothing once every one is measured or decided."""
    from tuner.present.summary import summarize

    spec = SweepSpec(steps=(1, 2))
    st = Store(tmp_path)
    st.append(DeployRecord(config=SpecConfig(1), host="h1", status="ok"))
    notes = summarize(st.state(), spec).notes
    assert any(n.startswith("The sweep is not finished: 1 planned configuration(s)") and "(k2-t1)" in n for n in notes)
    st.append(SkipRecord(config=SpecConfig(2), kind="early_stop", reason="past the peak"))
    notes = summarize(st.state(), spec).notes
    assert not any("neither measured nor decided" in n for n in notes)
    # k1 was deployed and nothing of it measured (stopped in its warm-up): its levels are the gap
    assert any("lack levels (k1-t1: C=1" in n for n in notes), notes


def test_a_report_names_the_levels_an_interrupted_sweep_did_not_reach(tmp_path):
    """Killed during k1's levels: k1 counted as done because it had one, the report recommended
    k0 for the stated workload without a word, and `--resume` then measured C=2 and flipped it."""
    from tuner.present.summary import summarize

    spec = SweepSpec(steps=(0, 1), workload=WorkloadSpec(concurrency=(1, 2)))
    st = Store(tmp_path)
    for rec in (deploy(0), level(0, 1, 100.0), level(0, 2, 180.0), deploy(1), level(1, 1, 150.0)):
        st.append(rec)
    notes = summarize(st.state(), spec).notes
    assert any(n.startswith("The sweep is not finished: 1 configuration(s) lack levels (k1-t1: C=2)") for n in notes), (
        notes
    )
    st.append(level(1, 2, 200.0))
    assert not any("not finished" in n for n in summarize(st.state(), spec).notes)
    # stopped during the warm-up: deployed, no level yet
    spec3 = SweepSpec(steps=(0, 1, 2), workload=WorkloadSpec(concurrency=(1, 2)))
    st.append(deploy(2))
    notes = summarize(st.state(), spec3).notes
    assert any("lack levels (k2-t1: C=1, C=2)" in n for n in notes), notes


def test_an_open_capacity_band_is_strict_json_and_said_in_words(tmp_path):
    """A capacity band the fit leaves open on one side (one depth measured there) is written as
    null, not `Infinity` (which jq and most JSON readers refuse), read back open, and said as
    "at most" in the report and a misfit's words, not as `-inf`."""
    import math

    from tuner.data.prediction import Band, Prediction
    from tuner.decide.search.model import Misfit
    from tuner.decide.search.text import misfit_text
    from tuner.present import report
    from tuner.present.summary import summarize

    pool = Band(0.0, -math.inf, 1200.0)
    pred = Prediction(can_run=False, reason="KV pool predicted empty", max_total_num_tokens=pool)
    st = Store(tmp_path)
    st.append(DeployRecord.from_json(deploy(1)))
    st.append(SkipRecord(config=SpecConfig(5), kind="predicted", reason="not deployed: KV pool empty", prediction=pred))

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    docs = [json.loads(line, parse_constant=refuse) for line in lines]
    assert docs[-1]["prediction"]["max_total_num_tokens"] == {"mean": 0.0, "lo": None, "hi": 1200.0}
    state = SweepState.fold(read_records(tmp_path / "records.jsonl"))
    back = state.skipped["k5-t1"].prediction
    assert back is not None and back.max_total_num_tokens == pool
    # an older record without an end still reads as the value itself
    assert Band.from_json({"mean": 3.0}) == Band(3.0, 3.0, 3.0)

    text = report.render(summarize(state, SweepSpec(workload=WORKLOAD, steps=(1, 5), search="model")))
    assert "max_total_num_tokens 0 (at most 1,200)" in text and "inf" not in text.lower().replace("info", "")
    words = misfit_text(Misfit(SpecConfig(5), "max_total_num_tokens", None, pool, 1500.0))
    assert "outside its predicted interval at most 1,200" in words and "inf" not in words


def test_deploy_best_names_what_it_deployed_when_the_report_recommends_another(tmp_path):
    """`report DIR --target-concurrency 1` may recommend k2 where the sweep deployed its own pick,
    k1, with --deploy-best: the report said 'Deployed the recommendation', naming k2 by implication."""
    from tuner.present import report
    from tuner.present.summary import summarize

    st = Store(tmp_path)
    for k, vals in ((1, ((1, 150.0), (4, 700.0))), (2, ((1, 200.0), (4, 500.0)))):
        st.append(deploy(k))
        for c, v in vals:
            st.append(level(k, c, v))
    st.append({**deploy(1), "type": "deploy_best", "verified": True})
    state = SweepState.fold(read_records(tmp_path / "records.jsonl"))
    spec = SweepSpec(workload=WORKLOAD, steps=(1, 2))
    at1 = summarize(state, spec, [1])
    assert at1.recommendation.chosen is not None and at1.recommendation.chosen.config_id == "k2-t1"
    text = report.render(at1)
    assert "Deployed the sweep's recommendation at the time (k1-t1) at the end (`--deploy-best`) on h1: ok." in text
    both = report.render(summarize(state, spec, [4]))
    assert "Deployed the recommendation at the end (`--deploy-best`) on h1: ok." in both


def test_a_sweep_where_every_deploy_failed_links_no_plot_and_says_nothing_was_measured(tmp_path):
    st = Store(tmp_path)
    for k in (1, 2, 3):
        st.append(deploy(k, status="failed", reason="KV cache pool is empty"))
    written = outputs.write_all(st, SweepSpec(workload=WORKLOAD, steps=(1, 2, 3)))
    assert not (tmp_path / "throughput_vs_steps.png").exists(), written
    text = (tmp_path / "report.md").read_text()
    assert "![throughput vs steps]" not in text and "No plot: no configuration started." in text
    assert "covering ." not in text and "Nothing was measured: no cell has an interval" in text


def test_several_temperatures_the_notes_speak_for_each(tmp_path):
    """Temperatures 0 and 0.7: the precision note took the first temperature's cells only (its
    'worst' beside a wider cell at 0.7 in the same report), and the 'deepest swept' note read
    temperature 0's picks for both."""
    st = Store(tmp_path)
    wl = WorkloadSpec(concurrency=(1, 4), temperature=(0.0, 0.7), input_len=8, output_len=16, repeats=1)
    for k in (1, 2):
        st.append(deploy(k))
    cells = {(1, 0.0): (100, 200), (2, 0.0): (120, 260), (1, 0.7): (110, 240), (2, 0.7): (90, 180)}
    for (k, t), vals in cells.items():
        for c, v in zip((1, 4), vals, strict=True):
            rec = level(k, c, float(v))
            rec["temperature"] = t
            half = 0.01 if t == 0.0 else 0.05
            rec["metrics"].update(output_tok_s_ci_low=v * (1 - half), output_tok_s_ci_high=v * (1 + half), samples=40)
            st.append(rec)
    outputs.write_all(st, SweepSpec(workload=wl, steps=(1, 2)))
    text = (tmp_path / "report.md").read_text()
    assert "worst +-5.0%" in text, text
    assert "At concurrency 1, 4 (temperature 0) the best setting is the deepest swept (spec_steps 2)" in text
    assert "(temperature 0.7) the best setting is the deepest" not in text


def test_outputs_get_the_mode_a_plain_write_would(tmp_path):
    """mkstemp's 0600 made report.md, results.csv and recommendation.json readable by their owner
    only, beside plots and records.jsonl the rest of a team (or a web server publishing the results)
    could read: a new file gets 0666 less the umask, a rewritten one keeps its own mode."""
    import os

    from tuner.data.store import atomic_write

    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "report.md", "x\n")
        assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        atomic_write(tmp_path / "private.md", "x\n")
        assert (tmp_path / "private.md").stat().st_mode & 0o777 == 0o600
        (tmp_path / "report.md").chmod(0o640)
        atomic_write(tmp_path / "report.md", "y\n")
        assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o640
        assert (tmp_path / "report.md").read_text() == "y\n"
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    finally:
        os.umask(old)
