"""Every bench page is its kept data: rebuilt from what its script kept (`--render`, measuring
nothing), each page must come out exactly as committed.

A page edited by hand, a page left behind when its script's wording or judging changed, a note that
lived only on the command line of the run that wrote it, or a machine name read at render time all
fail here. Each script writes to a temporary --out and reads its kept data from the repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

# page -> the script and arguments that rebuild it from its kept data alone
PAGES: dict[str, list[str]] = {
    "client_accuracy.md": ["client_accuracy.py", "--render"],
    "connection_cost.md": ["connection_cost.py", "--render"],
    "coverage.md": ["coverage.py", "--render"],
    "drift_rule.md": ["drift_rule.py", "--render"],
    "emulator_calibration.md": ["emulator_calibration.py", "--render"],
    "emulator_speed.md": ["emulator_speed.py", "--render"],
    "lost_level.md": ["lost_level.py", "--render"],
    "noise.md": ["noise.py", "--render"],
    "peer_clients.md": ["peer_clients.py", "--render"],
    "ready_gate.md": ["ready_gate.py", "--render"],
    "schedule_vs_static.md": ["schedule_vs_static.py", "--render", "--keep", str(BENCH / "schedule_vs_static")],
    "search_cost.md": ["search_cost.py", "--render", "--keep", str(BENCH / "search_cost")],
    "search_cost_grid_again.md": [
        "search_cost_grid_again.py",
        "--render",
        "--keep",
        str(BENCH / "search_cost_grid_again"),
    ],
    "search_cost_precision.md": [
        "search_cost.py",
        "--render",
        "--machines",
        "h200-8b-1b-draft",
        "--requests-per-level",
        "auto",
        "--keep",
        str(BENCH / "search_cost_precision"),
    ],
    "search_unseen.md": ["search_unseen.py", "--keep", str(BENCH / "search_unseen")],
    "sweep_overhead.md": ["sweep_overhead.py", "--render"],
    "tuner_seed_sweep.md": ["tuner_seed_sweep.py", "--render", "--keep", str(BENCH / "tuner_seed_sweep")],
    "verify_cost.md": ["verify_cost.py", "--render"],
}


def test_every_page_has_a_way_back_to_its_data():
    assert sorted(p.name for p in BENCH.glob("*.md")) == sorted(PAGES)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_page_is_what_its_kept_data_renders(page, tmp_path):
    script, *args = PAGES[page]
    out = tmp_path / page
    res = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # 1 is a script's verdict (a target missed), which the page states; anything else is a failure
    assert res.returncode in (0, 1), res.stderr[-3000:]
    assert out.exists(), f"{script} wrote no page: {res.stderr[-2000:]}"
    assert out.read_text() == (BENCH / page).read_text(), (
        f"bench/{page} differs from what `python bench/{script} {' '.join(args)}` renders from its kept data"
    )


# A kept sweep's report.md and recommendation.json are what the tuner concludes from its records
# today: a page that quotes them (bench/schedule_vs_static.md reads recommendation.json) must not
# rest on a rule since changed. `python -m tuner report DIR` rebuilds a kept sweep's outputs; the
# plots are left out here (matplotlib, and they carry nothing the two files do not).
KEPT_SWEEPS = sorted(p.parent for p in BENCH.rglob("records.jsonl") if (p.parent / "report.md").is_file())


def test_kept_sweeps_are_found():
    # the benches that keep whole sweeps: schedule_vs_static, search_cost (grid and model),
    # search_cost_grid_again, search_cost_precision, search_unseen, verify_cost
    assert len(KEPT_SWEEPS) >= 30, KEPT_SWEEPS


@pytest.mark.parametrize("kept", KEPT_SWEEPS, ids=lambda p: str(p.relative_to(BENCH)))
def test_a_kept_sweeps_report_is_what_its_records_conclude_today(kept, tmp_path):
    from tuner.data.store import Store
    from tuner.present.outputs import write_all
    from tuner.spec.sweepspec import SweepSpec

    for name in ("records.jsonl", "sweep.json"):
        if (kept / name).is_file():
            (tmp_path / name).write_bytes((kept / name).read_bytes())
    store = Store(tmp_path)
    write_all(store, store.read_spec() or SweepSpec(), plot=False)
    for name in ("report.md", "recommendation.json"):
        assert (tmp_path / name).read_text() == (kept / name).read_text(), (
            f"bench/{kept.relative_to(BENCH)}/{name} is not what its records conclude today: "
            f"`python -m tuner report bench/{kept.relative_to(BENCH)}` rebuilds it (then re-render the pages)"
        )


# A GPU's measured step cost (scripts/device_step_cost.py, run on a lent GPU) -> its page, rendered
# from the kept run, and the emulator profile whose step table it is: one set of numbers.
GPU_RUNS = {"gpu-step-cost-h100.md": ("h100-2026-12-07", {"qwen2.5-14b": "h100-qwen2.5-14b.yaml"})}


@pytest.mark.parametrize("page", sorted(GPU_RUNS))
def test_a_gpu_step_cost_page_and_its_profiles_are_the_kept_run(page, tmp_path):
    import json

    import yaml

    run_dir, profiles = GPU_RUNS[page]
    run_json = Path("docs") / "device-runs" / run_dir / "step-cost.json"
    out = tmp_path / page
    res = subprocess.run(
        [sys.executable, "scripts/device_step_cost.py", "--render", str(run_json), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.read_text() == (ROOT / "docs" / page).read_text(), f"docs/{page} is not its kept run's page"
    run = json.loads((ROOT / run_json).read_text())
    for shape, profile in profiles.items():
        table = yaml.safe_load((BENCH / "profiles" / profile).read_text().split("\n---\n", 1)[1])["step_time_ms"]
        measured = run["shapes"][shape]
        assert table["batch"] == run["batch"] and table["tokens_per_request"] == run["tokens_per_request"]
        assert table["ms"] == [[round(v, 2) for v in row] for row in measured["ms"]], profile
        assert table["draft_ms"] == [round(v, 3) for v in measured["draft_ms"]], profile
        assert table["kv_read_ns_per_token"] == measured["kv_read"]["ns_per_cached_token"], profile
