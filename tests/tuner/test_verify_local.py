"""`python -m tuner verify` against real emulator processes over HTTP: a baseline captured from a
no-speculation server, a correct configuration passing, each emulator fault of the realism issue
(spec-diverge, spec-repeat, accept-drift, accept-collapse) caught with its reason, and bad input
(another model's baseline, a speculative server as baseline, bad flag values) refused with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tuner_testlib import ROOT, emulator


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", "verify", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("verify") / "baseline.json"
    with emulator(steps=0) as url:
        r = verify("--url", url, "--baseline", str(path), "--capture")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "24 short + 4 long greedy outputs" in r.stdout
        # a second capture from the same server reuses the file (the baseline is deployed once)
        again = verify("--url", url, "--baseline", str(path), "--capture")
        assert again.returncode == 0 and "kept" in again.stdout
    return path


def test_help_names_the_flags():
    r = verify("--help")
    assert r.returncode == 0
    for flag in ("--url", "--baseline", "--capture", "--measured-accept", "--dataset"):
        assert flag in r.stdout


def test_baseline_file_says_what_it_is(baseline):
    doc = json.loads(baseline.read_text())
    assert doc["model"] == "/models/x" and doc["server_version"].startswith("0.5.9")
    assert doc["speculative"] is None and doc["deterministic"] is False
    assert doc["prompt_set"] == "sgt-mixed-v1.jsonl" and len(doc["prompt_set_sha256"]) == 64
    assert doc["settings"] == {"short_tokens": 48, "short_prompts": 24, "long_tokens": 384, "long_prompts": 4}
    assert all(isinstance(r["prompt"], str) and r["text"] for r in doc["short"] + doc["long"])
    # greedy to the end of sequence or the limit; /generate's body carries the ids, streams the text
    assert all(1 <= len(r["output_ids"]) <= 48 for r in doc["short"])
    assert all(1 <= len(r["text"].split()) <= 384 for r in doc["long"])


def test_correct_configuration_passes(baseline, tmp_path):
    with emulator(steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline), "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed" in r.stdout and "exact match: 24/24" in r.stdout
    v = json.loads((tmp_path / "verify.json").read_text())[0]
    assert v["passed"] and v["rule"]["mode"] == "threshold" and v["accept"]["gate"] > 1.05
    assert v["requests"] == 32 and v["seconds"] > 0  # 24 short, 4 long, the 4 long again (the drift pairs)
    # the second sends are outputs the rules read too (compared, checked for loops), not only drift pairs
    assert v["again"]["prompts"] == 4 and v["again"]["missing"] == [] and v["degenerate"] == []


@pytest.mark.parametrize(
    ("fault", "expect"),
    [
        ("spec-diverge=10", ["outputs differ from the no-speculation baseline", "first divergence at token 10"]),
        ("spec-repeat=100", ["end in a repeated cycle", "from token 100"]),
        ("accept-drift=30", ["acceptance drifts over the gate's run"]),
        # every draft rejected from the 10th request served on: the long prompts' second sends read
        # 1.00; their first sends collapse part-way, so either rule names it (a drop beyond their noise,
        # or the collapse when the first sends' own spread is wide)
        ("accept-collapse=10", [("1.00 when they were sent again", "collapsed to 1.00 on the long prompts' second")]),
    ],
)
def test_each_fault_is_caught(baseline, tmp_path, fault, expect):
    with emulator("--emulator-fault", fault, steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    v = json.loads(r.stdout)[0]
    assert not v["passed"]
    for words in expect:
        assert any(w in v["reasons"][0] for w in ((words,) if isinstance(words, str) else words)), v["reasons"]
    if fault.startswith("spec-diverge"):
        ex = v["short"]["example"]
        assert ex["position"] == 10 and ex["prompt_id"].startswith("sgt-mixed-v1.jsonl:")
        assert ex["baseline"] != ex["candidate"]


@pytest.mark.parametrize("fault", [None, "spec-repeat=100"])
def test_a_server_streaming_incrementally_is_read_by_its_joined_chunks(baseline, fault):
    """0.5.9's --stream-output: each streamed chunk carries only its new ids (the text stays whole),
    the way the gate's long outputs come from such a server; joined, a correct one passes and a
    loop is still caught."""
    args = ("--stream-output", *(("--emulator-fault", fault) if fault else ()))
    with emulator(*args, steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline), "--json")
    v = json.loads(r.stdout)[0]
    if fault is None:
        assert r.returncode == 0 and v["passed"] and v["again"]["missing"] == [] and v["degenerate"] == [], v
    else:
        assert r.returncode == 1 and "end in a repeated cycle" in v["reasons"][0], v["reasons"]


def test_acceptance_below_the_sweeps_measurement_fails(baseline):
    with emulator(steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline), "--measured-accept", "6.5")
    assert r.returncode == 1
    assert "below 95% of the 6.50 the sweep measured" in r.stdout


def test_baseline_of_another_model_is_refused(baseline):
    with emulator("--model-path", "/models/other", steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline))
    assert r.returncode == 2
    assert "--baseline" in r.stderr and "model: the baseline is of '/models/x'" in r.stderr


def test_other_prompt_settings_are_refused(baseline):
    with emulator(steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline), "--long-tokens", "128")
    assert r.returncode == 2 and "setting long_tokens" in r.stderr


def test_a_capture_does_not_keep_a_baseline_made_under_another_parity_rule(baseline, tmp_path):
    """The no-speculation server restarted with --enable-deterministic-inference: the file of its
    earlier capture fits its model and release, but kept, every later check fell to the 60% rule
    while the capture said it "holds this server's outputs". Refused (exit 2), the file untouched."""
    path = tmp_path / "b.json"
    path.write_bytes(baseline.read_bytes())
    with emulator("--enable-deterministic-inference", steps=0) as url:
        r = verify("--url", url, "--baseline", str(path), "--capture")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--enable-deterministic-inference off there, on here" in r.stderr and "kept" not in r.stdout
    assert path.read_bytes() == baseline.read_bytes()


def test_a_speculative_server_is_no_baseline(tmp_path):
    with emulator(steps=2) as url:
        r = verify("--url", url, "--baseline", str(tmp_path / "b.json"), "--capture")
    assert r.returncode == 2 and "--url" in r.stderr and "speculative" in r.stderr
    assert not (tmp_path / "b.json").exists()


def test_bad_flags_exit_2_naming_them(baseline, tmp_path):
    r = verify("--url", "nonsense", "--baseline", str(baseline))
    assert r.returncode == 2 and "--url" in r.stderr
    # the same URL check as bench's: a port past 65535 is bad input, not a server that did not answer
    r = verify("--url", "http://127.0.0.1:99999", "--baseline", str(baseline), "--capture")
    assert r.returncode == 2 and "has no valid host and port" in r.stderr, r.stderr
    r = verify("--url", "http://127.0.0.1:9", "--baseline", str(baseline), "--measured-accept", "abc")
    assert r.returncode == 2 and "--measured-accept" in r.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": 1}')
    r = verify("--url", "http://127.0.0.1:9", "--baseline", str(broken))
    assert r.returncode == 2 and "--baseline" in r.stderr and "not a baseline file" in r.stderr


def _gate_on_a_crashing_server(baseline: Path, then: list[str] | None):
    """The sweep's gate (VerifyPhase.check) on a server that dies half a second after it is ready,
    restarted by a supervisor as systemd restarts the unit; `then`: the restarted server's flags."""
    import asyncio

    from tuner_testlib import supervised_emulator, verify_phase

    from tuner.spec.configs import SpecConfig

    phase, log, progress = verify_phase(baseline, recover_timeout=30)
    assert phase.load() and phase.baseline is not None
    with supervised_emulator(["--emulator-fault", "crash-after-ready=0.5"], then) as (url, exits):
        rec = asyncio.run(phase.check(SpecConfig(spec_steps=3), "h", url, "qwen3.5-122b", []))
        assert exits, "the emulator never crashed"
    return rec, log, progress


def test_a_server_lost_during_the_gate_is_checked_again_once_it_is_back(baseline):
    """A crash during the gate is not the configuration's wrong answer: as for a lost level, the
    gate waits for /health and checks the same deployment again (it had crashed the whole sweep
    with aiohttp's ServerDisconnectedError)."""
    rec, log, progress = _gate_on_a_crashing_server(baseline, [])
    assert rec.passed, rec.reasons
    said = "\n".join(progress.lines)
    assert "verify: the server went away during the gate" in said and "checking again" in said
    assert log.state.records == [rec]


def test_a_server_lost_twice_during_the_gate_fails_the_configuration_with_the_reason(baseline):
    rec, log, _progress = _gate_on_a_crashing_server(baseline, None)  # every start dies
    assert not rec.passed
    assert len(rec.reasons) == 1 and "the server went away during the gate twice" in rec.reasons[0]
    assert log.state.records == [rec]


def test_the_command_says_when_the_server_goes_away_during_the_gate(baseline):
    with emulator("--emulator-fault", "crash-after-ready=0.5") as url:
        r = verify("--url", url, "--baseline", str(baseline))
    assert r.returncode == 1
    # on stderr: stdout is the verdicts' (with --json, a JSON document)
    assert "the server did not answer the gate" in r.stderr and "Traceback" not in r.stderr
    assert "did not answer" not in r.stdout


def test_a_server_that_sheds_a_few_requests_is_not_a_wrong_one(baseline):
    """A 5xx now and then (http-5xx=0.05) is a busy server, not wrong outputs: the gate sends such a
    request again (twice at most), and the correct configuration passes."""
    import asyncio

    from tuner_testlib import verify_phase

    from tuner.spec.configs import SpecConfig

    phase, _log, _progress = verify_phase(baseline, recover_timeout=30)
    assert phase.load()
    with emulator("--emulator-fault", "http-5xx=0.05", steps=3) as url:
        rec = asyncio.run(phase.check(SpecConfig(spec_steps=3), "h", url, "qwen3.5-122b", []))
    assert rec.passed, rec.reasons


def test_a_stream_cut_before_done_is_no_output_to_the_role_s_module_either(baseline, tmp_path):
    """Every long answer dropped mid-stream (cut-stream=1): the role's module, like the tuner's
    gate, says the server did not answer; it compared the cut text and passed before."""
    import os

    coll = tmp_path / "coll" / "ansible_collections" / "sglang_tune"
    coll.mkdir(parents=True)
    (coll / "serving").symlink_to(ROOT)
    args = tmp_path / "args.json"
    with emulator("--emulator-fault", "cut-stream=1", steps=3) as url:
        r = verify("--url", url, "--baseline", str(baseline))
        assert r.returncode == 1 and "did not answer the gate" in r.stderr, r.stderr
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"url": url, "baseline": json.loads(baseline.read_text())}}))
        out = subprocess.run(
            [sys.executable, str(ROOT / "plugins" / "modules" / "sglang_verify.py"), str(args)],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(tmp_path / "coll")),
            timeout=300,
        )
    res = json.loads(out.stdout)
    assert res.get("failed") and "the stream ended before [DONE]" in res["msg"], res.get("msg")


def test_a_server_without_speculation_is_held_to_its_outputs_only(baseline):
    """`verify` on a spec_steps 0 server whose outputs are the baseline's: the tuner's gate judged
    the acceptance of a server that has none ('no acceptance length') and failed it, where the
    role's module (plugins/modules/sglang_verify.py) holds such a server to its outputs only."""
    with emulator(steps=0) as url:
        r = verify("--url", url, "--baseline", str(baseline))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed" in r.stdout and "no acceptance length" not in r.stdout
