"""The metric definitions are written once (tuner/measure/definitions.py) and every place that shows
them is generated from it: report.md's definitions, docs/tuner.md's block; and every column a
definition names is one the tuner writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tuner.data.results import RESULT_COLUMNS
from tuner.measure import definitions
from tuner.measure.metrics import LevelMetrics
from tuner.present import report

ROOT = Path(__file__).resolve().parents[2]


def test_docs_block_is_generated_from_the_definitions() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    docs = (ROOT / "docs" / "tuner.md").read_text(encoding="utf-8")
    for d in (*definitions.PER_REQUEST, *definitions.PER_LEVEL):
        assert d.bullet() in docs


def test_report_carries_every_definition_once() -> None:
    for d in (*definitions.PER_REQUEST, *definitions.PER_LEVEL):
        assert report.METRIC_DEFINITIONS.count(d.bullet()) == 1
        assert report.METRIC_DEFINITIONS.count(f"**{d.title}**") == 1


def test_a_stale_block_is_found(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs
    finally:
        sys.path.pop(0)
    text = "x\n<!-- metric-definitions:begin: generated -->\nold text\n<!-- metric-definitions:end -->\ny\n"
    new = gen_docs.render(text, "metric-definitions", definitions.markdown())
    assert "old text" not in new and definitions.PER_LEVEL[0].bullet() in new
    assert new.startswith("x\n") and new.endswith("-->\ny\n")


def test_named_columns_are_written_by_the_tuner() -> None:
    per_request = {"ttft_ms", "e2e_ms", "tpot_ms", "itl_ms", "output_tokens"}  # per-request samples
    level_fields = set(LevelMetrics.__dataclass_fields__)
    for d in (*definitions.PER_REQUEST, *definitions.PER_LEVEL):
        for col in filter(None, (c.strip() for c in d.columns.split(","))):
            assert col in RESULT_COLUMNS or col in level_fields or col in per_request, (d.title, col)
