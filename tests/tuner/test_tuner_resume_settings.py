"""A `--resume` may change how levels are measured (the precision target, the caps, warm-up, the
request timeout); the levels measured before keep what they measured. That was silent, and the
report stated the last run's caps for every level (a demo run again with other DEMO_SWEEP_ARGS
reported its 10 s levels under a 120 s cap): the change is now said, kept and in the notes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tuner import cli
from tuner.data.store import Store
from tuner.present.outputs import write_all
from tuner.run.deploy import project_root
from tuner.spec.resume import measurement_changes
from tuner.spec.sweepspec import SweepSpec

ROOT = Path(__file__).resolve().parents[2]


def spec(*argv: str) -> SweepSpec:
    return SweepSpec.from_cli_args(cli.build_parser().parse_args(["sweep", "--out", "/tmp/x", *argv]), project_root())


def test_the_settings_a_resume_changes_are_named():
    before = spec("--max-level-s", "10").to_json()
    assert measurement_changes(spec("--max-level-s", "10"), before) == []
    assert measurement_changes(spec(), before) == ["--max-level-s was 10.0, now 120.0"]
    changed = measurement_changes(spec("--precision", "5", "--warmup-requests", "3"), before)
    assert any(c.startswith("--precision was ") and c.endswith("now 5.0") for c in changed)
    assert any(c.startswith("--warmup-requests was ") for c in changed)
    assert spec().identity_diff(before) == []  # still the same sweep: --resume goes on


def test_each_resumes_change_is_kept_and_reported(tmp_path):
    out = tmp_path / "seed"
    out.mkdir()
    kept = ROOT / "bench" / "schedule_vs_static" / "seed"
    shutil.copy(kept / "records.jsonl", out / "records.jsonl")
    store = Store(out)
    params = json.loads((kept / "sweep.json").read_text())["params"]
    first = SweepSpec.from_json(params)
    store.write_spec(first, "test")
    assert "resumes" not in json.loads((out / "sweep.json").read_text()) and store.resumes() == []
    store.write_spec(first, "test", changed=["--max-level-s was 10.0, now 120.0"])
    store.write_spec(first, "test", changed=[])  # a later resume that changed nothing keeps the record
    resumes = json.loads((out / "sweep.json").read_text())["resumes"]
    assert [r["changed"] for r in resumes] == [["--max-level-s was 10.0, now 120.0"]]
    assert store.resumes()[0].endswith("with --max-level-s was 10.0, now 120.0")
    write_all(store, first, plot=False)
    report = (out / "report.md").read_text()
    assert "--max-level-s was 10.0, now 120.0: the levels measured before it keep what they measured" in report
