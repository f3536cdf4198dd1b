"""The gate's report of adaptive speculation: `speculative.adaptive` and `speculative.schedule`.

SGLang 0.5.23's /server_info carries the resolved `speculative_adaptive` (False after its fallback
to static) and the `speculative_adaptive_config` path (utils/common.py build_server_info ->
server_args.resolved_dict()), not the buckets; the module reads the file the server read, here a
real file, through real loopback HTTP (tests/module/ready_testlib.py FakeSGLang).
"""

from __future__ import annotations

import json

import pytest
from sglang_utils import sglang_adaptive as A
from sglang_utils import sglang_server_info as S
from test_sglang_ready_module import base_args

INFO_0523 = {
    "version": "0.5.23",
    "served_model_name": "qwen3.5-122b",
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "speculative_adaptive": True,
    "speculative_adaptive_config": None,
    "max_running_requests": 48,
    "max_total_num_tokens": 295931,
    "internal_states": [{"effective_max_running_requests_per_dp": 17, "speculative_num_steps": 4}],
}
PINNED = {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}


def info(**over):
    body = dict(INFO_0523)
    body.update(over)
    return body


def run_gate(fake, run_module, body):
    fake.server_info = body
    res, failed = run_module(base_args(fake))
    assert not failed, res.get("msg")
    return res["speculative"]


def test_reports_the_schedule_from_the_file_the_server_read(fake_sglang, run_module, tmp_path):
    path = tmp_path / "sglang-qwen.adaptive.json"
    path.write_text(json.dumps(PINNED) + "\n")
    spec = run_gate(fake_sglang, run_module, info(speculative_adaptive_config=str(path)))
    assert spec["adaptive"] is True
    assert spec["schedule"] == PINNED
    assert spec["num_steps"] == 3  # the launch value; internal_states has the depth in use


def test_sglangs_default_config_when_there_is_no_file(fake_sglang, run_module):
    spec = run_gate(fake_sglang, run_module, info())
    assert spec["adaptive"] is True
    assert spec["schedule"] == A.DEFAULT_ADAPTIVE_CONFIG
    assert list(spec["schedule"]) == ["1", "8", "32", "64"]


def test_null_after_sglangs_fallback_to_static(fake_sglang, run_module, tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(PINNED))
    spec = run_gate(fake_sglang, run_module, info(speculative_adaptive=False, speculative_adaptive_config=str(path)))
    assert spec["adaptive"] is False and spec["schedule"] is None


def test_static_server_without_the_fields(fake_sglang, run_module):
    body = {k: v for k, v in INFO_0523.items() if not k.startswith("speculative_adaptive")}
    body["version"] = "0.5.9"
    spec = run_gate(fake_sglang, run_module, body)
    assert spec["adaptive"] is False and spec["schedule"] is None


def test_no_speculation_reports_null(fake_sglang, run_module):
    spec = run_gate(fake_sglang, run_module, info(speculative_algorithm=None))
    assert spec["adaptive"] is None and spec["schedule"] is None


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"candidate_steps": [1, 3]}'])
def test_an_unreadable_file_gives_no_schedule(fake_sglang, run_module, tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    spec = run_gate(fake_sglang, run_module, info(speculative_adaptive_config=str(path)))
    assert spec["adaptive"] is True and spec["schedule"] is None


def test_parse_server_info_adaptive_fields():
    out = S.parse_server_info(info(speculative_adaptive_config="/etc/sglang/x.adaptive.json"))
    assert out["speculative"]["adaptive"] is True
    assert out["speculative"]["adaptive_config"] == "/etc/sglang/x.adaptive.json"


def test_resolved_schedule_merges_top_level_defaults_like_sglangs_slots():
    cfg = {"ema_alpha": 0.5, "16": {"candidate_steps": [2, 3]}, "1": {"candidate_steps": [4], "ema_alpha": 0.1}}
    assert A.resolved_schedule(cfg, "per-bs") == {
        "1": {"ema_alpha": 0.1, "candidate_steps": [4]},
        "16": {"ema_alpha": 0.5, "candidate_steps": [2, 3]},
    }
    assert A.resolved_schedule(None, "flat") == {"candidate_steps": [1, 3, 7]}
    assert A.resolved_schedule({"candidate_steps": [2, 4]}, "flat") == {"candidate_steps": [2, 4]}
    assert A.resolved_schedule(PINNED, None) is None
    # no file: the release's own default table (0.5.14-0.5.19 start the first bucket at [1, 3, 7],
    # 0.5.13 drafts in every bucket and refuses a 0-step one)
    assert A.resolved_schedule(None, "per-bs", "0.5.17")["1"]["candidate_steps"] == [1, 3, 7]
    assert A.resolved_schedule(None, "per-bs", "0.5.23")["1"]["candidate_steps"] == [1, 3, 5, 7]
    assert A.resolved_schedule(None, "per-bs", "0.5.13") == {
        "1": {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
        "8": {"candidate_steps": [1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
        "32": {"candidate_steps": [1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    }
    assert (
        A.resolved_schedule({"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}}, "per-bs", "0.5.13") is None
    )


@pytest.mark.parametrize(
    ("version", "steps", "expected"),
    [
        # 0.5.12 adds the launch depth to the candidates (adaptive_spec_params.py: "Adding initial
        # speculative_num_steps=4 to candidate_steps=[1, 3, 7] so the pre-built runtime state is reused.")
        ("0.5.12", 4, [1, 3, 4, 7]),
        ("0.5.12", 3, [1, 3, 7]),
        # 0.5.11 starts at the nearest candidate and keeps the list as it is
        ("0.5.11", 4, [1, 3, 7]),
    ],
)
def test_a_flat_release_reports_the_candidates_its_policy_runs(fake_sglang, run_module, version, steps, expected):
    body = info(version=version, speculative_num_steps=steps, speculative_num_draft_tokens=steps + 1)
    spec = run_gate(fake_sglang, run_module, body)
    assert spec["adaptive"] is True
    assert spec["schedule"] == {"candidate_steps": expected}


def test_resolved_schedule_adds_the_launch_depth_only_where_the_release_does():
    assert A.resolved_schedule({"candidate_steps": [2, 5]}, "flat", "0.5.12", 3) == {"candidate_steps": [2, 3, 5]}
    assert A.resolved_schedule({"candidate_steps": [2, 5]}, "flat", "0.5.11", 3) == {"candidate_steps": [2, 5]}
    assert A.resolved_schedule({"candidate_steps": [2, 5]}, "flat", "0.5.12") == {"candidate_steps": [2, 5]}


def test_a_flat_schedule_is_reported_as_its_policy_runs_it_sorted_and_once():
    """The flat policy runs `sorted(set(candidates))` (0.5.12 adaptive_spec_params.py), with the
    launch depth added on 0.5.12: the file's own order and repeats are not what runs."""
    assert A.resolved_schedule({"candidate_steps": [7, 3, 1]}, "flat", "0.5.12", 3) == {"candidate_steps": [1, 3, 7]}
    assert A.resolved_schedule({"candidate_steps": [3, 3, 7]}, "flat", "0.5.12", 3) == {"candidate_steps": [3, 7]}
    assert A.resolved_schedule({"candidate_steps": [7, 1]}, "flat", "0.5.11", 3) == {"candidate_steps": [1, 7]}


def test_bench_url_names_a_0512_server_after_the_candidates_it_runs(tmp_path):
    """`bench --url` reads the file the server read: on 0.5.12 the launch depth is one of the
    candidates that run (tuner/run/sweep.py adaptive_server_config), as the gate reports it."""
    from tuner.run.sweep import adaptive_server_config
    from tuner.spec.configs import SpecConfig

    f = tmp_path / "a.json"
    f.write_text(json.dumps({"candidate_steps": [1, 3]}))
    info = {"speculative": {"adaptive_config": str(f), "num_steps": 5}}
    cfg = adaptive_server_config(SpecConfig(5, 1, None, "EAGLE"), info, "0.5.12")
    assert json.loads(cfg.ladder) == {"1": {"candidate_steps": [1, 3, 5]}}
    cfg = adaptive_server_config(SpecConfig(5, 1, None, "EAGLE"), info, "0.5.11")
    assert json.loads(cfg.ladder) == {"1": {"candidate_steps": [1, 3]}}
