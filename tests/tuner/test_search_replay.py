"""bench/search_replay.py replays the model-guided search on a kept grid sweep as the live sweep
runs it: each configuration it predicts before deploying is then checked against what the grid
measured of it, so a misfit widens the later intervals as it would live. (Without the check, the
search of code bb6eb2f replayed on the eight bench machines' kept grids deployed 36 configurations;
with it, 41; its live sweeps deployed 45.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tuner.data.store import Store
from tuner.decide import analysis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from search_replay import replay  # noqa: E402

# the bench's machine whose step time is not linear in depth (the emulator's t_draft_quad_ms): its
# live model sweep measured levels outside their predicted intervals (bench/search_cost.md)
BENT = ROOT / "bench" / "search_cost" / "bent-step" / "grid"


def test_the_replay_checks_each_prediction_against_the_grid_as_the_live_sweep_does():
    r = replay(BENT)
    # the first round (the anchors of 1-8) is measured, everything after it predicted first
    assert set(r.deployed) - set(r.predicted) == {"k3-t1", "k6-t1"}
    assert r.predicted and set(r.predicted) <= set(r.deployed)
    assert r.misfits
    grid = analysis.aggregate(Store(BENT).state().levels())
    for m in r.misfits:
        assert m.config.config_id in r.predicted
        assert m.measured == pytest.approx(grid[(m.config.config_id, m.concurrency)].mean)
        assert not m.predicted.contains(m.measured)
    assert len(r.rows) == 5 and r.planned == 8


def test_the_unseen_machines_are_what_their_seeds_draw_and_the_emulator_takes_them():
    """bench/search_unseen.py names a machine by its seed: the profile kept beside each grid is
    exactly what `draw` makes of that seed (a change to the generator would silently rename every
    kept machine), and the emulator starts on it (tuner/emulator/profile.py `load_profile`)."""
    import search_unseen

    from tuner.emulator.profile import load_profile

    kept = sorted((ROOT / "bench" / "search_unseen").glob("unseen-*/profile.yaml"))
    assert kept
    for path in kept:
        seed = int(path.parent.name.removeprefix("unseen-"))
        assert path.read_text() == search_unseen.profile_text(seed)
        prof = load_profile(path)
        assert prof.name == f"unseen-{seed}"
    # different seeds, different machines
    assert search_unseen.profile_text(1) != search_unseen.profile_text(2)


def test_the_multiplexed_replay_probes_drafting_depths_only_each_cell_once():
    """bench/search_multiplex_replay.py (an experiment for issue #18): after the search's own first
    round, each probe is one deployment measuring at most one configuration per level, never the
    baseline (a bucket pinned to 0 steps is not a server without speculation: the kept schedule
    sweeps' pinned cells below), and every cell at most once."""
    import search_multiplex_replay as mux

    grid = ROOT / "bench" / "search_cost" / "h200-steep-acceptance" / "grid"
    r = mux.replay(grid)
    assert r.first_round == ["k0", "k3-t1", "k6-t1"]
    assert r.probes and r.deployments == len(r.first_round) + len(r.probes)
    cells = [(cid, c) for probe in r.probes for c, cid in probe.items()]
    assert len(cells) == len(set(cells)) and all(cid != "k0" for cid, _ in cells)
    assert not set(cells) & {(cid, c) for cid in r.first_round for c, *_ in r.rows}
    assert [c for c, *_ in r.rows] == [1, 4, 16, 32, 64]
    # what its docstring says of the kept schedule sweeps
    pinned = mux.pinned_cells(ROOT / "bench" / "schedule_vs_static")
    drafting = [p / s for *_, k, p, s in pinned if k > 0]
    zero = [p / s for *_, k, p, s in pinned if k == 0]
    assert len(drafting) == 17 and 0.96 <= min(drafting) and max(drafting) <= 1.025
    assert zero and max(zero) < 0.9
