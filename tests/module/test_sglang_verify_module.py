"""The sglang_verify module run for real by ansible-playbook (the collection's FQCN, the repo's
ansible.cfg) against real emulator processes on loopback, SGLang 0.5.23 (per-batch-size adaptive
configs): an adaptive server that speculates at batch 1 only (``{"1": [3], "2": [0]}``) is held to
parity, loops and drift but not to the acceptance floor when the module is given its
``adaptive_config``, as the tuner's gate holds it (issue 20): the role's own check
(tasks/verify_outputs.yml, spec_schedule as --deploy-best passes it) gives it; without it the floor
applies and fails it. A wrong output still fails the exempt server; a config SGLang would refuse
fails naming ``adaptive_config``. ``python -m tuner verify --adaptive-config`` asks the same rule of the
same server. The decision itself (a config that drafts at every batch the
check reaches is held to the floor) is pinned in tests/tuner/test_verify_rules.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from emulator_proc import ROOT, emulator, free_port

VERSION = "0.5.23"
# speculates (3 steps) at batch 1 only: from batch 2 on SGLang routes to a 0-step bucket
PINNED_FROM_2 = {"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [0]}}
VENV_BIN = ROOT / ".venv" / "bin"


def adaptive_server(config_file: Path, *extra: str):
    """The adaptive emulator launched as the role launches a spec_schedule (launch depth 3, the
    smallest drafting step: sglang_adaptive.launch_steps)."""
    return emulator(
        "--emulator-sglang-version",
        VERSION,
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(config_file),
        *extra,
    )


def run_play(tmp: Path, task: dict[str, Any], **extravars: Any) -> dict[str, Any]:
    """One ansible-playbook run of `task` on localhost with `extravars` (-e as JSON, as the tuner
    passes them); the task's result."""
    play = tmp / f"verify-{free_port()}.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    extravars["ansible_python_interpreter"] = sys.executable
    r = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", json.dumps(extravars), str(play)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        tasks = json.loads(r.stdout)["plays"][0]["tasks"]
        return dict(tasks[-1]["hosts"]["localhost"])
    except (ValueError, KeyError, IndexError):
        raise AssertionError(f"ansible-playbook gave no result:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}") from None


def run_module(tmp: Path, url: str, baseline: Path, **args: Any) -> dict[str, Any]:
    """The module alone, the baseline read on the controller as the role reads it."""
    lookup = "{{ lookup('ansible.builtin.file', '" + str(baseline) + "') | from_json }}"
    return run_play(tmp, {"sglang_tune.serving.sglang_verify": {"url": url, "baseline": lookup, **args}})


def run_role_check(tmp: Path, url: str, baseline: Path, schedule: str) -> dict[str, Any]:
    """The role's own check (roles/sglang_server/tasks/verify_outputs.yml) with `spec_schedule` as
    the tuner's --deploy-best passes it (a JSON string), on SGLang 0.5.23."""
    task = {
        "ansible.builtin.include_role": {"name": "sglang_tune.serving.sglang_server", "tasks_from": "verify_outputs"}
    }
    return run_play(
        tmp,
        task,
        spec_schedule=schedule,
        sglang_server_sglang_version=VERSION,
        sglang_server_gate_url=url,
        sglang_server_verify_baseline=str(baseline),
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """The no-speculation server's greedy outputs (python -m tuner verify --capture), 0.5.23."""
    path = tmp_path_factory.mktemp("verify-module") / "baseline.json"
    with emulator("--emulator-sglang-version", VERSION, steps=0) as url:
        r = subprocess.run(
            [sys.executable, "-m", "tuner", "verify", "--url", url, "--baseline", str(path), "--capture"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    return path


@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("verify-module-config") / "adaptive.json"
    path.write_text(json.dumps(PINNED_FROM_2))
    return path


def verify_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", "verify", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.cost(55)  # seconds, measured: started first (tests/conftest.py)
def test_a_config_that_pins_0_steps_where_the_check_runs_is_not_held_to_the_floor(baseline, config_file, tmp_path):
    with adaptive_server(config_file) as url:
        # the role passes its spec_schedule's config to the module (option adaptive_config)
        exempt = run_role_check(tmp_path, url, baseline, '{"1": 3, "2": 0}')
        # what the role did before it passed its config: the floor failed a correct server
        plain = run_module(tmp_path, url, baseline)
        # the tuner's command, given the file the server was started with, and without it
        cli = verify_cli("--url", url, "--baseline", str(baseline), "--adaptive-config", str(config_file), "--json")
        cli_plain = verify_cli("--url", url, "--baseline", str(baseline))

    assert cli.returncode == 0, cli.stdout + cli.stderr
    got = json.loads(cli.stdout)[0]
    assert got["passed"] and got["accept"]["floor_judged"] is False
    assert got["acceptance_vs_sweep"].startswith("the floor and the collapse rule do not apply")
    assert cli_plain.returncode == 1 and "speculation accepts (almost) nothing" in cli_plain.stdout, cli_plain.stdout

    assert not exempt.get("failed"), exempt.get("msg")
    v = exempt["verdict"]
    # it ran 0 steps at most of the check's batch sizes: acceptance 1.0 by design, below the floor
    assert v["accept"]["gate"] <= 1.05 and v["accept"]["floor_judged"] is False
    assert v["short"]["exact"] == v["short"]["prompts"] == 24 and v["degenerate"] == []
    assert v["acceptance_vs_sweep"] == (
        "the floor and the collapse rule do not apply: it runs no speculative step at batch 8, "
        "the gate's 8 requests in flight, routed to its 0-step bucket from 2"
    )
    assert "floor not applied: 0 steps where it ran" in exempt["msg"]

    assert plain.get("failed") and plain["verdict"]["accept"]["floor_judged"] is True
    assert "speculation accepts (almost) nothing" in plain["msg"], plain["msg"]
    assert "acceptance_vs_sweep" not in plain["verdict"]


def test_a_wrong_output_still_fails_a_config_exempt_from_the_floor(baseline, config_file, tmp_path):
    with adaptive_server(config_file, "--emulator-fault", "spec-diverge=5") as url:
        res = run_module(tmp_path, url, baseline, adaptive_config=PINNED_FROM_2)
    assert res.get("failed") and res["verdict"]["accept"]["floor_judged"] is False
    assert res["msg"].startswith("output check failed: outputs differ from the no-speculation baseline"), res["msg"]
    assert "first divergence at token 5" in res["msg"]


def test_a_config_sglang_would_refuse_fails_naming_adaptive_config(baseline, tmp_path):
    # no server at the URL: the config is refused before any request is sent
    res = run_module(
        tmp_path, f"http://127.0.0.1:{free_port()}", baseline, adaptive_config={"1": {"candidate_steps": []}}
    )
    assert res.get("failed")
    assert res["msg"] == (
        "adaptive_config is not a per-batch-size config SGLang accepts: "
        "BS 1: candidate_steps must be a list of non-negative ints, got []"
    )


def test_the_commands_adaptive_config_is_checked_before_any_request(baseline, tmp_path):
    """Exit 2 naming --adaptive-config: one file per --url, a file SGLang would refuse, no file."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: bad input is found first
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"1": {"candidate_steps": []}}))
    cases = {
        "one file (or 'none') per --url (2), got 1": ["--url", url, "--url", url, "--adaptive-config", "none"],
        "SGLang would refuse it": ["--url", url, "--adaptive-config", str(bad)],
        "No such file": ["--url", url, "--adaptive-config", str(tmp_path / "missing.json")],
    }
    for words, args in cases.items():
        r = verify_cli(*args, "--baseline", str(baseline))
        assert r.returncode == 2 and "--adaptive-config" in r.stderr and words in r.stderr, (words, r.stderr)


def test_a_server_without_speculation_is_held_to_its_outputs_only(baseline, tmp_path):
    """spec_steps 0 with verify_outputs: no verify pass to judge, and it is the reference itself; the
    acceptance rules failed it ("no acceptance length") and the role rolled back a correct server."""
    with emulator("--emulator-sglang-version", VERSION, steps=0) as url:
        res = run_module(tmp_path, url, baseline)
    assert not res.get("failed"), res.get("msg")
    assert res["verdict"]["passed"] and res["verdict"]["accept"]["judged"] is False


@pytest.mark.cost(45)
def test_a_schedule_drafting_deeper_at_larger_batches_keeps_its_drift_and_floor_honest(baseline, tmp_path):
    """Both sends of a long prompt run at the gate's batch size (the load holds 8 in flight to the
    end: sglang_verify.request_order). A correct server whose schedule drafts 3 steps at batches 1-3
    and 4 from 4 passed the first sends at 4 steps and ran the second ones, alone at the end, at 3:
    "acceptance drifts" failed it in the module and in the tuner's command alike. And a config with
    0 steps below the gate's batch only speculates where the gate runs: a drafter that accepts
    nothing there fails the floor (it was exempt, "no speculative step from batch 1 on")."""
    rising = tmp_path / "rising.json"
    rising.write_text(json.dumps({"1": {"candidate_steps": [3]}, "4": {"candidate_steps": [4]}}))
    with adaptive_server(rising) as url:
        module = run_module(tmp_path, url, baseline, adaptive_config=json.loads(rising.read_text()))
        cli = verify_cli("--url", url, "--baseline", str(baseline), "--adaptive-config", str(rising), "--json")
    assert not module.get("failed"), module.get("msg")
    assert module["verdict"]["drift"]["judged"] and not module["verdict"]["drift"]["drifted"]
    assert cli.returncode == 0, cli.stdout + cli.stderr
    got = json.loads(cli.stdout)[0]
    assert got["passed"] and got["drift"]["judged"] and not got["drift"]["drifted"], got["drift"]
    # the load is part of the cost, beside the 32 judged requests
    for verdict in (module["verdict"], got):
        assert verdict["requests"] == 32 and verdict["load_requests"] > 0, verdict
    assert f"32 requests (+{module['verdict']['load_requests']} load) in" in module["msg"], module["msg"]

    below = {"1": {"candidate_steps": [0]}, "4": {"candidate_steps": [3]}}
    config = tmp_path / "below.json"
    config.write_text(json.dumps(below))
    with adaptive_server(config, "--emulator-fault", "accept-collapse=0") as url:
        collapsed = run_module(tmp_path, url, baseline, adaptive_config=below)
    assert collapsed.get("failed") and collapsed["verdict"]["accept"]["floor_judged"] is True
    assert "speculation accepts (almost) nothing" in collapsed["msg"], collapsed["msg"]
