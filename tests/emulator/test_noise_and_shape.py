"""Noise of a known size (issue #11) and a step time that is not linear in depth (issue #13)."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest
import yaml
from emu_testlib import spec_flags

from tuner.emulator import model
from tuner.emulator.engine import Scheduler
from tuner.emulator.noise import Noise, lognormal_mean_one
from tuner.emulator.profile import ProfileError, load_profile, profile_from_mapping
from tuner.emulator.simulate import SpecSetting, closed_loop, engine_spec

SEED_PROFILE = load_profile()
RAW = yaml.safe_load(Path(SEED_PROFILE.path).read_text())


def profile(**over):
    return profile_from_mapping({**RAW, **over}, name="test")


def test_noise_is_off_by_default():
    p = SEED_PROFILE
    assert p.noise_run_cv == 0.0 and p.noise_restart_cv == 0.0
    n = Noise(p.noise_run_cv, p.noise_restart_cv)
    assert not n.enabled and n.factor(0.0) == 1.0 and n.factor(100.0) == 1.0


def test_lognormal_draws_have_mean_one_and_the_asked_cv():
    rng = random.Random(4)
    xs = [lognormal_mean_one(rng, 0.1) for _ in range(40000)]
    assert statistics.fmean(xs) == pytest.approx(1.0, abs=0.003)
    assert statistics.pstdev(xs) / statistics.fmean(xs) == pytest.approx(0.1, rel=0.03)
    assert lognormal_mean_one(rng, 0.0) == 1.0


def test_run_noise_changes_per_busy_period_and_window_restart_noise_per_start():
    n = Noise(run_cv=0.2, restart_cv=0.1, seed=11, idle_gap_s=0.5)
    f1 = n.factor(0.0)
    n.ended(0.02)
    assert n.factor(0.03) == f1  # the same busy period
    n.ended(0.05)
    f2 = n.factor(2.0)  # after an idle gap: a new level, a new draw
    assert f2 != f1 and n.draws == 2
    w = Noise(run_cv=0.2, seed=11, window_s=1.0)
    g1 = w.factor(0.0)
    w.ended(0.01)
    assert w.factor(0.5) == g1
    w.ended(0.51)
    assert w.factor(1.2) != g1  # a busy period longer than the window redraws
    # restart noise: fixed within a start, reproduced by its seed, different for another seed
    assert Noise(restart_cv=0.1, seed=5).restart_factor == Noise(restart_cv=0.1, seed=5).restart_factor
    assert Noise(restart_cv=0.1, seed=5).restart_factor != Noise(restart_cv=0.1, seed=6).restart_factor
    assert Noise(restart_cv=0.1).restart_factor != Noise(restart_cv=0.1).restart_factor  # no seed: entropy


def levels_on_one_server(p, n_levels: int, seed: int) -> list[float]:
    setting = SpecSetting(3)
    sched = Scheduler(
        p,
        engine_spec(p, setting),
        random.Random(seed),
        noise=Noise(p.noise_run_cv, p.noise_restart_cv, seed=seed, idle_gap_s=p.noise_idle_gap_s),
    )
    out, t = [], 0.0
    for _ in range(n_levels):
        r = closed_loop(p, setting, concurrency=4, n_requests=8, input_len=64, output_len=200, scheduler=sched, start=t)
        out.append(r.aggregate_tok_s)
        t = r.end + 2.0  # the benchmark idles between levels
    return out


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs)


def test_level_to_level_throughput_varies_by_the_profiles_run_cv():
    quiet = levels_on_one_server(SEED_PROFILE, 12, 1)
    assert cv(quiet) < 0.02  # acceptance draws only
    noisy = levels_on_one_server(profile(noise_run_cv=0.08), 40, 1)
    assert 0.055 < cv(noisy) < 0.11


def test_start_to_start_throughput_varies_by_the_profiles_restart_cv():
    p = profile(noise_restart_cv=0.08)
    firsts = [levels_on_one_server(p, 1, seed)[0] for seed in range(40)]
    assert 0.055 < cv(firsts) < 0.11
    same_start = levels_on_one_server(p, 8, 3)
    assert cv(same_start) < 0.02  # within one start the restart draw is shared


def test_noise_seed_flag_reproduces_a_start(emulator, tmp_path):
    path = tmp_path / "noisy.yaml"
    path.write_text(Path(SEED_PROFILE.path).read_text() + "\nnoise_restart_cv: 0.1\nnoise_run_cv: 0.05\n")
    args = ("--emulator-profile", str(path), "--emulator-startup-s", "0.2", *spec_flags(2))
    a = emulator(*args, "--emulator-noise-seed", "7")
    b = emulator(*args, "--emulator-noise-seed", "7")
    c = emulator(*args, "--emulator-noise-seed", "8")
    facts = []
    for e in (a, b, c):
        e.wait_ready()
        facts.append(e.get_json("/server_info")["emulator"]["noise"])
    assert facts[0]["restart_factor"] == facts[1]["restart_factor"] != facts[2]["restart_factor"]
    assert facts[0]["seed"] == 7 and facts[0]["run_cv"] == 0.05


# ---- step time not linear in depth ---------------------------------------------------------------


def test_non_linear_terms_are_off_by_default_and_add_per_depth():
    p = SEED_PROFILE
    assert model.step_time_ms(p, 8, 3) == pytest.approx(p.t_spec_ms + 3 * p.t_draft_ms + p.c_verify_ms * 8 * 4)
    q = profile(t_draft_quad_ms=0.5, t_step_extra_ms={5: 4.0, 6: 9.0})
    base = model.step_time_ms(p, 8, 5)
    assert model.step_time_ms(q, 8, 5) == pytest.approx(base + 0.5 * 25 + 4.0)
    assert model.step_time_ms(q, 8, 4) == pytest.approx(model.step_time_ms(p, 8, 4) + 0.5 * 16)
    assert model.step_time_ms(q, 8, 0) == model.step_time_ms(p, 8, 0)  # no speculation: untouched
    # a bucket at 0 steps under adaptive speculation still verifies: the spec formula at k = 0
    assert model.step_time_ms(q, 8, 0, spec=True) == pytest.approx(p.t_spec_ms + p.c_verify_ms * 8)


def test_a_convex_depth_cost_moves_the_best_depth_down():
    def best(p) -> int:
        rates = {
            k: closed_loop(
                p, SpecSetting(k), concurrency=1, n_requests=4, input_len=64, output_len=400, seed=2
            ).aggregate_tok_s
            for k in range(1, 7)
        }
        return max(rates, key=rates.__getitem__)

    assert best(SEED_PROFILE) == 6
    assert best(profile(t_draft_quad_ms=1.0)) <= 3


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"t_step_extra_ms": {"x": 1}}, "t_step_extra_ms keys must be steps (whole numbers >= 0), got 'x'"),
        ({"noise_run_cv": -0.1}, "noise_run_cv must be a number >= 0"),
        ({"noise_seed": 1.5}, "noise_seed must be a whole number"),
        ({"noise_rnu_cv": 0.1}, "unknown key(s): noise_rnu_cv"),
    ],
)
def test_bad_profile_keys_name_the_key(over, message):
    with pytest.raises(ProfileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        profile(**over)
