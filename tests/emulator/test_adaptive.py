"""Adaptive speculation (--speculative-adaptive) as SGLang 0.5.11, 0.5.12 and 0.5.23 run it (issue #12)."""

from __future__ import annotations

import json
import re
import subprocess
import threading

import pytest
from emu_testlib import MODEL, ROOT, START_FAILURE_EXIT_S, Emulator, spec_flags
from emulator_proc import emulator_cmd
from sglang_utils import sglang_adaptive as schema

from tuner.emulator import adaptive
from tuner.emulator import parse as P
from tuner.emulator import resolve as R
from tuner.emulator.profile import load_profile
from tuner.emulator.simulate import SpecSetting, closed_loop, engine_spec

PROFILE = load_profile()
SCHEDULE = {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}


def resolve(version: str, *argv: str) -> R.ResolvedArgs:
    return R.resolve(P.parse_flags(["--model-path", MODEL, *argv], version=version), PROFILE)


def config(tmp_path, doc, name="adaptive.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def notes(cfg: R.ResolvedArgs) -> list[str]:
    return [n.message for n in cfg.notes]


# ---- the config, as 0.5.23 reads it (adaptive_spec_params.py _load_adaptive_config) -----------------


def test_without_a_file_sglangs_default_config_is_used():
    cfg = resolve("0.5.23", "--speculative-algorithm", "NEXTN", "--speculative-adaptive")
    ad = cfg.adaptive
    assert ad is not None and ad.kind == "per-bs" and ad.config_path is None
    assert ad.candidate_steps == [0, 1, 3, 5, 7]
    # the initial steps: the middle of the union; the draft width follows (topk 1)
    assert cfg.num_steps == 3 and cfg.num_draft_tokens == 4 and cfg.topk == 1
    assert sorted(ad.bs_entries) == [1, 8, 32, 64]
    assert ad.bs_entries[8]["candidate_steps"] == [0, 1, 3]


@pytest.mark.parametrize(
    ("doc", "exc", "message"),
    [
        (
            {"candidate_steps": [1, 3, 7]},
            ValueError,
            'speculative_adaptive_config must contain at least one integer-string BS key, e.g. {"1": '
            "{\"candidate_steps\": [1,3,7]}}. Got keys: ['candidate_steps']",
        ),
        (
            {"1": {"candidate_steps": []}},
            ValueError,
            "BS 1: candidate_steps must be a list of non-negative ints, got []",
        ),
        (
            {"1": {"candidate_steps": [2, -1]}},
            ValueError,
            "BS 1: candidate_steps must be a list of non-negative ints, got [2, -1]",
        ),
        (
            {"1": {"candidate_steps": 3}},
            ValueError,
            "BS 1: candidate_steps must be a list of non-negative ints, got 3",
        ),
        ({"1": [3]}, AttributeError, "'list' object has no attribute 'get'"),
        ([{"1": 3}], AttributeError, "'list' object has no attribute 'items'"),
        (
            "{not json",
            json.JSONDecodeError,
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
    ],
)
def test_bad_configs_fail_with_sglangs_own_errors(tmp_path, doc, exc, message):
    path = config(tmp_path, doc)
    with pytest.raises(exc) as ei:
        resolve(
            "0.5.23",
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            path,
        )
    assert str(ei.value) == message


def test_steps_outside_the_candidates_are_refused(tmp_path):
    path = config(tmp_path, SCHEDULE)
    with pytest.raises(ValueError) as ei:
        resolve(
            "0.5.23",
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-num-steps",
            "2",
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            path,
        )
    assert str(ei.value) == (
        "--speculative-num-steps=2 is not in the adaptive config candidate_steps [3, 4]. Pass one of those values."
    )
    ok = resolve(
        "0.5.23",
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        path,
    )
    assert ok.num_steps == 3 and ok.adaptive.max_steps == 4


def test_a_bad_config_ends_the_launch_before_the_first_line(tmp_path):
    path = config(tmp_path, {"candidate_steps": [1, 3]})
    r = subprocess.run(
        emulator_cmd(
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            path,
            "--emulator-sglang-version",
            "0.5.23",
            model=MODEL,
            served=None,
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "Traceback (most recent call last):" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1].startswith("ValueError: speculative_adaptive_config must contain")
    assert "server_args=" not in r.stderr


def test_schedule_config_is_sglangs_json():
    assert schema.schedule_config({16: 3, "1": 4}) == SCHEDULE
    cfg, entries = schema.load_per_bs(schema.schedule_config({"1": 4, "16": 3}))
    assert schema.union_candidate_steps(entries) == [3, 4]


# ---- compatibility fallbacks (adaptive_unsupported_reason) ----------------------------------------


@pytest.mark.parametrize(
    ("version", "extra", "reason"),
    [
        (
            "0.5.23",
            [
                "--speculative-algorithm",
                "EAGLE",
                "--speculative-num-steps",
                "2",
                "--speculative-eagle-topk",
                "2",
                "--speculative-num-draft-tokens",
                "4",
            ],
            "speculative_eagle_topk=2 (only topk=1 is supported)",
        ),
        (
            "0.5.23",
            ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "/d"],
            "speculative_algorithm=STANDALONE (only EAGLE/EAGLE3 are supported)",
        ),
        (
            "0.5.23",
            ["--speculative-algorithm", "NEXTN", "--attn-dp-size", "2", "--dp-size", "2"],
            "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)",
        ),
        ("0.5.23", [], "speculative_algorithm=None (only EAGLE/EAGLE3 are supported)"),
        (
            "0.5.23",
            ["--speculative-algorithm", "NEXTN", "--enable-two-batch-overlap"],
            "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)",
        ),
        (
            "0.5.12",
            ["--speculative-algorithm", "NEXTN", "--disable-radix-cache", "--enable-dp-attention", "--dp-size", "2"],
            "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)",
        ),
        (
            "0.5.11",
            ["--speculative-algorithm", "NEXTN", "--disable-radix-cache"],
            "the overlap scheduler (spec v2) is enabled (adaptive is only implemented for EAGLEWorker v1)",
        ),
    ],
)
def test_unsupported_settings_fall_back_to_static_with_sglangs_warning(version, extra, reason):
    cfg = resolve(version, "--speculative-adaptive", *extra)
    assert cfg.adaptive is None and cfg.values["speculative_adaptive"] is False
    assert f"speculative_adaptive disabled: {reason}. Falling back to static speculative params." in notes(cfg)


def test_flat_releases_start_from_the_static_steps():
    v12 = resolve("0.5.12", "--speculative-algorithm", "NEXTN", "--disable-radix-cache", "--speculative-adaptive")
    assert v12.adaptive.kind == "flat" and v12.num_steps == 3
    assert v12.adaptive.candidate_steps == [1, 3, 7]  # the default [1, 3, 7], the static 3 already in it
    v11 = resolve(
        "0.5.11",
        *spec_flags(4),
        "--disable-radix-cache",
        "--disable-overlap-schedule",
        "--speculative-adaptive",
    )
    assert v11.adaptive is not None and v11.adaptive.candidate_steps == [1, 3, 7]
    lines: list[str] = []
    p11 = adaptive.FlatPolicy(4, {}, "nearest", lines.append)  # 0.5.11: the nearest candidate, deeper on a tie
    assert p11.current_steps == 3 and lines == [
        "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 7]"
    ]
    lines.clear()
    p12 = adaptive.FlatPolicy(4, {}, "add", lines.append)  # 0.5.12 adds the static steps
    assert p12.candidate_steps == [1, 3, 4, 7] and p12.current_steps == 4
    assert lines[0] == (
        "Adding initial speculative_num_steps=4 to candidate_steps=[1, 3, 7] so the pre-built runtime state is reused."
    )


# ---- the policy: EMA, warm-up, hysteresis, probe, routing -------------------------------------------


def test_slot_waits_for_warm_up_and_decides_every_update_interval():
    lines: list[str] = []
    slot = adaptive._Slot(3, {"candidate_steps": [1, 3, 5, 7]}, lines.append)
    assert slot.ema_accept_len == 2.0  # steps - 1
    for _ in range(10):  # warm-up: ten batches, no decision however good acceptance is
        assert slot.update([3, 3]) is False
    ema = 2.0
    for _ in range(10):
        ema = 0.8 * ema + 0.2 * 3
    assert slot.ema_accept_len == pytest.approx(ema)
    for i in range(4):
        assert slot.update([3, 3]) is False, i  # decisions come every 5th batch after warm-up
    assert slot.update([3, 3]) is True  # EMA ~3.0 > 3 - 0.5: up to 5
    assert slot.current_steps == 5
    assert lines == [f"Adaptive spec params updated: steps 3 -> 5 (ema_accept_len={slot.ema_accept_len:.2f})"]


def test_slot_steps_down_with_hysteresis_and_not_up_in_the_same_decision():
    slot = adaptive._Slot(5, {"candidate_steps": [1, 3, 5, 7], "warmup_batches": 0, "update_interval": 1}, print)
    slot.ema_accept_len = 2.3  # drop threshold to 3: 3 - 0.5 - 0.25 = 2.25 -> stays
    assert slot._recompute() is False and slot.current_steps == 5
    slot.ema_accept_len = 2.2  # <= 2.25: down to 3; 1.25 not crossed
    assert slot._recompute() is True and slot.current_steps == 3


def test_a_zero_step_slot_probes_the_smallest_positive_candidate():
    slot = adaptive._Slot(0, {"candidate_steps": [0, 1, 3], "warmup_batches": 0, "update_interval": 1}, print)
    assert slot.current_steps == 0 and slot.ema_accept_len == -1.0
    assert slot.update([0, 0, 0]) is True  # no EMA update at 0 steps; the decision probes 1
    assert slot.current_steps == 1 and slot.ema_accept_len == 0.0
    assert slot.update([0, 0]) is True  # nothing accepted: EMA 0 <= 0.5 + 0 -> back to 0
    assert slot.current_steps == 0


def test_routing_pads_to_the_graph_batch_sizes_only_when_they_were_given():
    _, entries = schema.load_per_bs(None)
    bare = adaptive.PerBsPolicy(3, {}, entries, None)
    assert [bare.bucket(b) for b in (1, 7, 8, 31, 32, 63, 64, 200)] == [1, 1, 8, 8, 32, 32, 64, 64]
    padded = adaptive.PerBsPolicy(3, {}, entries, [1, 2, 4, 8, 16, 24, 32])
    assert padded.bucket(7) == 8 and padded.bucket(25) == 32 and padded.bucket(33) == 32
    assert padded.steps_for_batch(5) == 3  # bucket 8: [0, 1, 3], starts at the initial steps 3
    # bucket 32 ([0, 1]): the initial 3 is not a candidate, so AdaptiveStepSlot starts at
    # candidates[len // 2] = 1; a batch above the largest graph size is routed unpadded
    assert padded.steps_for_batch(40) == 1 and padded.steps_for_batch(70) == 0


# ---- the whole server in virtual time: steps by load, and the capacity of the initial steps ---------


def level(setting: SpecSetting, c: int):
    return closed_loop(
        PROFILE, setting, concurrency=c, n_requests=max(4, 2 * c), input_len=256, output_len=1000, seed=c
    )


def test_a_pinned_bucket_runs_like_the_static_depth():
    for k in (2, 4):
        static, pinned = level(SpecSetting(k), 4), level(SpecSetting(None, adaptive={"1": {"candidate_steps": [k]}}), 4)
        assert pinned.max_running_requests == static.max_running_requests
        assert pinned.aggregate_tok_s == pytest.approx(static.aggregate_tok_s, rel=0.03)


def test_a_schedule_runs_the_steps_of_the_running_batch_and_the_capacity_of_its_initial_steps():
    # SGLang starts at the middle of the candidates ([3, 4] -> 4), which sizes the pools: 13 requests
    # run at once on the seed machine, so the "16" bucket is never reached.
    mid = engine_spec(PROFILE, SpecSetting(None, adaptive=SCHEDULE))
    assert mid.k == 4 and mid.max_running_requests == 13
    # with --speculative-num-steps 3 the pools are those of depth 3 (17 requests) and the high-load
    # bucket runs 3 steps
    init3 = SpecSetting(3, adaptive=SCHEDULE)
    assert engine_spec(PROFILE, init3).max_running_requests == 17
    low, high = level(init3, 1), level(init3, 64)
    assert low.accept_length == pytest.approx(level(SpecSetting(4), 1).accept_length, rel=0.03)
    assert high.accept_length < 4.3  # mostly 3 steps (tau 3.9) at 16+ running; 4 steps only while ramping
    assert high.aggregate_tok_s > 0.97 * level(SpecSetting(3), 64).aggregate_tok_s


# ---- a process: lines, /server_info, /metrics ---------------------------------------------------------


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adaptive")
    path = tmp / "schedule.json"
    path.write_text(json.dumps(SCHEDULE))
    e = Emulator(
        tmp,
        [
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-num-steps",
            "3",
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            str(path),
            "--enable-metrics",
            "--decode-log-interval",
            "10",
            "--emulator-sglang-version",
            "0.5.23",
            "--emulator-startup-s",
            "0.3",
        ],
    )
    try:
        yield e.wait_ready()
    finally:
        e.kill()


def gen(e: Emulator, n: int, i: int = 0) -> dict:
    body = {
        "input_ids": [1000 + 7 * j + i for j in range(64)],
        "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True},
    }
    status, out = e.post_json("/generate", body)
    assert status == 200, out
    return out


def steps_now(e: Emulator) -> int:
    return e.get_json("/server_info")["internal_states"][0]["speculative_num_steps"]


def test_startup_lines_and_capacity_of_the_initial_steps(srv):
    log = srv.log()
    assert "AdaptiveSpeculativeParams initialized: steps=4, candidate_steps=[4]" in log
    assert re.search(r"Built adaptive runtime state steps=4: elapsed=[\d.]+s, mem=[\d.]+GB", log)
    assert "max_running_requests=17," in log  # the pools of --speculative-num-steps 3
    info = srv.get_json("/server_info")
    assert info["speculative_num_steps"] == 3 and info["speculative_adaptive"] is True


def test_one_request_runs_the_low_load_bucket_and_many_the_high_load_one(srv):
    out = gen(srv, 200)
    assert out["meta_info"]["spec_verify_ct"] <= 200 / 4.5  # ~5 tokens per step: 4 steps
    assert steps_now(srv) == 4
    assert "Switch adaptive runtime state: steps 3 -> 4, draft_tokens 4 -> 5" in srv.log()
    results: list[dict] = []
    threads = [threading.Thread(target=lambda i=i: results.append(gen(srv, 300, i))) for i in range(17)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 17
    log = srv.log()
    assert "Switch adaptive runtime state: steps 4 -> 3, draft_tokens 5 -> 4" in log
    hist = srv.get_json("/server_info")["emulator"]["steps_histogram"]
    assert set(hist) == {"3", "4"} and hist["3"] > 20
    text = srv.get("/metrics")[1].decode()
    assert re.search(r"^sglang:spec_num_steps\{[^}]*\} [34]\.0$", text, re.M)
    # the batch sizes the server ran: decode lines, and verify calls per decode pass
    sizes = [int(x) for x in re.findall(r"Decode batch, #running-req: (\d+),", log)]
    assert 17 in sizes
    passes = float(
        re.search(r'^sglang:cuda_graph_passes_total\{[^}]*mode="decode_cuda_graph"\} ([\d.]+)$', text, re.M).group(1)
    )
    calls = float(re.search(r"^sglang:spec_verify_calls_total\{[^}]*\} ([\d.]+)$", text, re.M).group(1))
    assert 1.0 < calls / passes < 17.0


def test_0523_widest_candidate_buffers_cost_memory_not_pool_tokens(emulator, tmp_path):
    """Pools budgeted for the initial steps; the hybrid state's intermediate caches for the widest."""
    path = config(tmp_path, {"1": {"candidate_steps": [3, 7]}})
    static = emulator(*spec_flags(3), "--emulator-sglang-version", "0.5.23", "--emulator-startup-s", "0.2")
    wide = emulator(
        *spec_flags(3),
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        path,
        "--emulator-sglang-version",
        "0.5.23",
        "--emulator-startup-s",
        "0.2",
    )
    static.wait_ready()
    wide.wait_ready()

    def figures(e):
        log = e.log()
        cap = re.search(r"max_total_num_tokens=(\d+),.*max_running_requests=(\d+),.*available_gpu_mem=([\d.]+) GB", log)
        inter = float(re.search(r"intermediate_ssm_state_cache size: ([\d.]+)GB", log).group(1))
        return int(cap.group(1)), int(cap.group(2)), float(cap.group(3)), inter

    s_tok, s_mrr, s_mem, s_inter = figures(static)
    w_tok, w_mrr, w_mem, w_inter = figures(wide)
    assert (w_tok, w_mrr) == (s_tok, s_mrr)
    assert w_inter > s_inter and w_mem < s_mem - (w_inter - s_inter) + 0.01


def test_0512_reads_the_config_in_the_scheduler_and_dies_there(emulator, tmp_path):
    path = config(tmp_path, [1, 3])
    e = emulator(
        *spec_flags(3),
        "--disable-radix-cache",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        path,
        "--emulator-sglang-version",
        "0.5.12",
        "--emulator-startup-s",
        "0.2",
    )
    e.wait_exit(START_FAILURE_EXIT_S)
    log = e.log()
    assert "server_args=ServerArgs(" in log and "Scheduler hit an exception" in log
    assert "ValueError: speculative_adaptive_config must be a JSON object, got list" in log
    assert "Received sigquit from a child process" in log


def test_memory_keys_that_do_not_describe_the_gpu_decide_nothing(emulator, tmp_path):
    """The memory figures are for the log lines: a profile of another GPU that leaves out
    `weights_gb` (default 30) with a 24 GB `gpu_mem_gb` died at every start with a CUDA-graph
    out-of-memory that no key of it meant, statically and with adaptive speculation alike."""
    import yaml

    raw = yaml.safe_load((ROOT / "tuner/emulator/profiles/seed-qwen35-122b-4x-rtxpro6000.yaml").read_text())
    raw.pop("weights_gb")
    raw["gpu_mem_gb"] = 24.0
    prof = tmp_path / "small-gpu.yaml"
    prof.write_text(yaml.safe_dump(raw))
    path = config(tmp_path, {"1": {"candidate_steps": [3, 7]}})
    common = ("--emulator-profile", str(prof), "--emulator-sglang-version", "0.5.23", "--emulator-startup-s", "0.2")
    started = [
        emulator(*common),
        emulator(*spec_flags(3), *common),
        emulator(*spec_flags(3), "--speculative-adaptive", "--speculative-adaptive-config", path, *common),
    ]
    for e in started:
        e.wait_ready()
        assert "Capture cuda graph failed" not in e.log()
