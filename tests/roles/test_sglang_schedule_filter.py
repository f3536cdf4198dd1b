"""spec_schedule (adaptive speculation): validation and flags (plugins/module_utils/sglang_spec.py).

The JSON forms are what `-e spec_schedule='...'` and `-e '{"spec_schedule": {...}}'` hand the filter;
the expected errors name `spec_schedule` and what is allowed, and the flags are checked against the
rules of SGLang 0.5.23 (`arg_groups/speculative_hook.py` `_init_adaptive_speculative_params`).
"""

from __future__ import annotations

import json

import pytest
import roles_testlib  # noqa: F401  (puts the collection on sys.path)
from sglang_utils import sglang_flags, sglang_spec
from test_sglang_flags_filter import base

NEW = "0.5.23"
PATH = "/etc/sglang/sglang-qwen.adaptive.json"


def sched(value, **kw):
    kw.setdefault("sglang_version", NEW)
    return sglang_spec.schedule_settings(value, **kw)


def flags_for(value, **kw):
    s = sched(value, **kw)
    assert s["errors"] == []
    spec = sglang_spec.spec_settings(kw.get("steps") or 3, kw.get("topk"), None, kw.get("algorithm"))
    return sglang_flags.server_flags(base(spec=spec, schedule=s, adaptive_config_path=PATH, sglang_version=NEW))


PINNED = {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}


@pytest.mark.parametrize(
    "value",
    [
        {"1": 4, "16": 3},
        {1: 4, 16: "3"},
        {"16": 3, "1": 4},
        '{"1": 4, "16": 3}',
        json.dumps(PINNED),
        PINNED,
        {"1": 4, "16": {"candidate_steps": [3]}},
    ],
)
def test_every_form_gives_the_same_canonical_json(value):
    s = sched(value)
    assert s["errors"] == [] and s["enabled"] and s["mode"] == "schedule"
    assert s["config"] == PINNED and list(s["config"]) == ["1", "16"]
    assert s["text"] == '{"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}\n'
    assert s["num_steps"] == 3  # the high-load bucket's


@pytest.mark.parametrize("value", [None, "", "  ", "none", "None", "null"])
def test_unset_means_static(value):
    s = sched(value)
    assert s == {
        "errors": [],
        "enabled": False,
        "mode": None,
        "config": None,
        "text": "",
        "num_steps": None,
        "algorithm": None,
        "draft_model_path": None,
    }


def test_unset_leaves_the_static_flags_byte_identical():
    spec = sglang_spec.spec_settings(3)
    before = sglang_flags.server_flags(base(spec=spec))
    after = sglang_flags.server_flags(base(spec=spec, schedule=sched(None), adaptive_config_path=PATH))
    assert before == after
    assert not any(line[0].startswith("--speculative-adaptive") for line in after)


@pytest.mark.parametrize(
    ("value", "kw", "needle"),
    [
        ({"16": 3}, {}, 'spec_schedule must have bucket "1"'),
        ({"1": 99}, {}, "spec_schedule: bucket '1' must have steps from 0 to 16"),
        (
            {"1": 4, "abc": 3},
            {},
            "spec_schedule: keys are batch-size lower bounds, whole numbers of at least 1; got 'abc'",
        ),
        ({"0": 4, "1": 3}, {}, "got '0'"),
        ({"-4": 4, "1": 3}, {}, "got '-4'"),
        ({"1": 4, "01": 3}, {}, "bucket 1 is given twice"),
        ({"1": -1}, {}, "must have steps from 0 to 16"),
        ({"1": 2.5}, {}, "must have steps from 0 to 16"),
        ({"1": True}, {}, "must have steps from 0 to 16"),
        ({"1": 5}, {"max_steps": 4}, "steps from 0 to 4"),
        ({"1": {"candidate_steps": []}}, {}, "needs candidate_steps, a non-empty list"),
        ({"1": {"candidate_steps": [2, 99]}}, {}, "candidate_steps must be steps from 0 to 16"),
        ({"1": {"candidate_step": [2]}}, {}, "unknown keys candidate_step"),
        ({"1": {"candidate_steps": [2], "ema_alpha": "x"}}, {}, "ema_alpha must be a number in (0, 1]"),
        ({"1": {"candidate_steps": [2], "ema_alpha": 0}}, {}, "bucket '1' ema_alpha must be a number in (0, 1]"),
        ({"1": {"candidate_steps": [2], "ema_alpha": 1.5}}, {}, "ema_alpha must be a number in (0, 1]; got 1.5"),
        (
            {"1": {"candidate_steps": [2], "update_interval": 0}},
            {},
            "update_interval must be a whole number of at least 1",
        ),
        ({"1": {"candidate_steps": [2], "update_interval": 2.5}}, {}, "update_interval must be a whole number"),
        (
            {"1": {"candidate_steps": [2], "warmup_batches": -1}},
            {},
            "warmup_batches must be a whole number of at least 0",
        ),
        ({"1": {"candidate_steps": [2], "ceiling_coeff": -0.5}}, {}, "ceiling_coeff must be a number of at least 0"),
        # hysteresis of the wrong type: SGLang adds it to a threshold at run time
        ({"1": {"candidate_steps": [2], "up_hysteresis": True}}, {}, "bucket '1' up_hysteresis must be a number"),
        ({"1": {"candidate_steps": [2], "down_hysteresis": "low"}}, {}, "down_hysteresis must be a number"),
        (
            {"1": 4, "8": {"candidate_steps": [2], "down_hysteresis": [0.1]}},
            {},
            "bucket '8' down_hysteresis must be a number",
        ),
        ({"1": {"candidate_steps": [-1, 2]}}, {}, "bucket '1' candidate_steps must be steps from 0 to 16"),
        ({"1": {"candidate_steps": [3, 17]}}, {}, "bucket '1' candidate_steps must be steps from 0 to 16"),
        ({"1": 4, "2.5": 3}, {}, "whole numbers of at least 1; got '2.5'"),
        ({"candidate_steps": [1, 3, 7]}, {}, "got 'candidate_steps'"),  # the flat form 0.5.23 rejects
        ({"1": 0, "16": 0}, {}, "drafts in no bucket"),
        ([4, 3], {}, "spec_schedule must be a mapping"),
        ("4", {}, "spec_schedule must be a mapping"),
        ('{"1": 4,', {}, "spec_schedule must be a JSON object such as"),
        ("adaptive", {}, "it is not valid JSON"),
        ({"1": 4}, {"topk": 2}, "spec_schedule needs spec_topk 1"),
        ({"1": 4}, {"topk": "2"}, "got spec_topk='2'"),
        ({"1": 4}, {"algorithm": "NGRAM"}, "spec_schedule needs spec_algorithm EAGLE, EAGLE3, NEXTN"),
        ({"1": 4}, {"algorithm": "STANDALONE"}, "spec_schedule needs spec_algorithm"),
        ({"1": 4}, {"sglang_version": "0.5.9"}, "spec_schedule needs SGLang 0.5.13 or later"),
        ({"1": 4}, {"sglang_version": "0.5.12"}, "sglang_server_sglang_version is '0.5.12'"),
        ("default", {"sglang_version": "0.5.10"}, "spec_schedule=default needs SGLang 0.5.11 or later"),
        ({"1": 4, "16": 3}, {"steps": "2"}, "spec_steps='2' with spec_schedule"),
        ({"1": 4, "16": 3}, {"steps": 0}, "spec_steps=0 with spec_schedule"),
        ({"1": 4}, {"draft_tokens": 4}, "spec_draft_tokens=4 contradicts spec_schedule"),
    ],
)
def test_bad_schedules_fail_naming_spec_schedule(value, kw, needle):
    s = sched(value, **kw)
    assert not s["enabled"] and s["config"] is None
    assert any(needle in e for e in s["errors"]), s["errors"]
    assert all("spec_schedule" in e for e in s["errors"]), s["errors"]


@pytest.mark.parametrize("version", ["0.5.13", "0.5.23", "0.5.23.post1", "0.6.0"])
def test_per_batch_size_releases(version):
    assert sched({"1": 4}, sglang_version=version)["errors"] == []


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.23"])
def test_default_from_0_5_11(version):
    s = sched("default", sglang_version=version)
    assert s["errors"] == [] and s["mode"] == "default" and s["config"] is None
    # before 0.5.14 launched as a chain at 3 steps (SGLang's own pick may be a topk-4 tree there)
    assert s["num_steps"] == (None if version == "0.5.23" else 3)


@pytest.mark.parametrize(
    ("value", "steps"),
    [
        ({"1": 4, "16": 3}, 3),
        ({"1": 3, "16": 4}, 4),
        ({"1": 4, "8": 2, "32": 1}, 1),
        ({"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [1, 2, 3]}}, 2),  # its middle candidate
        ({"1": 4, "64": 0}, 4),  # 0 at high load: the smallest positive steps of the schedule
        ({"1": 5, "8": 2, "64": 0}, 2),
        ({"1": 4, "64": {"candidate_steps": [0, 1]}}, 1),
        ({"1": 4}, 4),
    ],
)
def test_launch_steps(value, steps):
    s = sched(value)
    assert s["num_steps"] == steps
    # SGLang requires it to be one of the schedule's candidates
    assert steps in {c for e in s["config"].values() for c in e["candidate_steps"]}


def test_explicit_spec_steps_must_be_a_candidate_and_wins():
    assert sched({"1": 4, "16": 3}, steps="4")["num_steps"] == 4
    assert sched("default", steps=5)["num_steps"] == 5  # 0.5.23's default has 1, 3, 5, 7
    assert sched("default", steps=2)["errors"]


def test_flags_for_a_schedule():
    lines = flags_for({"1": 4, "16": 3})
    spec_lines = [line for line in lines if line[0].startswith("--speculative")]
    assert spec_lines == [
        ["--speculative-algorithm", "NEXTN"],
        ["--speculative-num-steps", "3"],
        ["--speculative-eagle-topk", "1"],
        ["--speculative-num-draft-tokens", "4"],
        ["--speculative-adaptive"],
        ["--speculative-adaptive-config", PATH],
    ]
    assert ["--emulator-sglang-version", NEW] in lines


def test_flags_for_sglangs_default_config_leave_the_steps_to_sglang():
    lines = flags_for("default", algorithm="EAGLE")
    spec_lines = [line for line in lines if line[0].startswith("--speculative")]
    # SGLang asserts steps, topk and draft tokens come together (or none): none here.
    assert spec_lines == [["--speculative-algorithm", "EAGLE"], ["--speculative-adaptive"]]


def test_adaptive_flags_are_managed():
    errors = sglang_flags.server_errors(
        base(extra_flags={"speculative-adaptive": True, "speculative-adaptive-config": "/x"})
    )
    assert any("--speculative-adaptive: use spec_schedule" in e for e in errors)
    assert any("--speculative-adaptive-config: use spec_schedule" in e for e in errors)


def test_a_schedule_carries_the_draft_model_when_the_static_depth_is_off():
    """With sglang_server_spec_steps_default 0 and no spec_steps (the tuner's schedule runs), the
    static spec is off and held no draft model: the schedule carries its own, and an algorithm that
    needs one is refused without it (SGLang fills it in only for targets with a built-in MTP head:
    0.5.23 arg_groups/speculative_hook.py), as a static server is."""
    off = sglang_spec.spec_settings(0, None, None, "EAGLE3", draft_model_path="/m/eagle3")
    assert off["errors"] == [] and not off["enabled"]
    s = sched({"1": 4, "16": 3}, algorithm="EAGLE3", draft_model_path="/m/eagle3")
    assert s["errors"] == [] and s["draft_model_path"] == "/m/eagle3"
    flags = sglang_flags.server_flags(base(spec=off, schedule=s, adaptive_config_path=PATH, sglang_version=NEW))
    assert ["--speculative-draft-model-path", "/m/eagle3"] in flags
    assert ["--speculative-num-steps", "3"] in flags
    missing = sched({"1": 4, "16": 3}, algorithm="EAGLE3", draft_model_path="")["errors"]
    assert missing == ["spec_algorithm=EAGLE3 needs a draft model: set sglang_server_spec_draft_model_path"]
    # NEXTN reads the target's own head: no draft model needed
    assert sched({"1": 4, "16": 3}, algorithm="NEXTN", draft_model_path="")["errors"] == []
    # a caller that does not pass the path (None) is not held to it here
    assert sched({"1": 4, "16": 3}, algorithm="EAGLE3")["errors"] == []
