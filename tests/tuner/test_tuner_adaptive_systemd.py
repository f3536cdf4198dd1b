"""Adaptive speculation end to end on a real emulator host (podman + systemd), issue #22.

One host (`ad22-t235`, index 235 of the ad-hoc range; this file may also use 237-239), made by
playbooks/emulator_hosts.yml and removed afterwards whatever happens. `python -m tuner sweep` with
`-e sglang_server_sglang_version=0.5.23` (the emulator plays a release with per-batch-size adaptive
speculation) measures two static depths, then the schedule phase through the role: SGLang's
default adaptive config, a no-speculation server and a tuned adaptive config, three deployments
(`--schedule-budget 3`, counted and reported).

The machine is the inventory's own, the seed profile
(tuner/emulator/profiles/seed-qwen35-122b-4x-rtxpro6000.yaml), because a tuned config is a
sensible candidate there: its greedy benchmark accepts almost every draft, so at
`--target-concurrency 1` (a single-user workload, where a ladder follows each request's
acceptance) SGLang's default climbs to the top of its `1: [1, 3, 5, 7]` ladder and the phase offers
a ladder past 7. It is also a machine where that ladder cannot launch
where the role's own rule would put it: the hybrid model's pool shrinks ~80k tokens a step, so a
server at depth 7 has none. The tuned config must launch at a candidate whose pool, read from the
static depths, holds the workload (every deployment of the sweep starts). `--deploy-best` deploys
whatever is best beyond noise, and the test checks the host runs exactly that (for an adaptive
recommendation, the file SGLang reads is the JSON `recommendation.json` names). Then a
hand-written schedule whose widest candidate cannot be held (a 16-step bucket at
`mem_fraction_static` 0.92: the buffers of the widest candidate do not fit) starts, fails, and is
rolled back by the role to the recommendation, with SGLang's reason.

Kept small for CI's systemd stage: two depths, two levels, one-second start-ups.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from tuner_testlib import ROOT, SYSTEMD_ENV, emulator_host_inventory, sweep_cmd

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = [pytest.mark.cost(225), pytest.mark.systemd, pytest.mark.slow]

HOST, INDEX = "ad22-t235", 235
URL = f"http://10.213.{INDEX}.2:30000"
UNIT = "sglang-qwen.service"
FILE = "/etc/sglang/sglang-qwen.adaptive.json"
VENV_BIN = Path(sys.executable).parent
ENV = SYSTEMD_ENV


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", HOST, *args], capture_output=True, text=True, check=check, timeout=120)


def server_info() -> dict:
    with urllib.request.urlopen(URL + "/server_info", timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    with emulator_host_inventory(tmp_path_factory.mktemp("ad22"), HOST, INDEX) as path:
        yield path


def test_the_phase_measures_the_envelope_and_deploy_best_runs_the_recommendation(inventory, tmp_path):
    out = tmp_path / "out"
    p = subprocess.run(
        sweep_cmd(
            out,
            inventory,
            "--search",
            "grid",
            "--steps",
            "2,3",
            "--confirm",
            "0",  # the confirmation round's own test: tests/tuner/test_tuner_confirm_local.py
            "--concurrency",
            "1,4",
            "--input-len",
            "32",
            "--output-len",
            "128",
            "--schedule-budget",
            "3",
            "--target-concurrency",
            "1",
            "--deploy-best",
            "-e",
            "sglang_server_sglang_version=0.5.23",
        ),
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert p.returncode == 0, p.stderr[-6000:]
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    deploys = [r for r in recs if r["type"] == "deploy"]
    # every deployment the tuner chose started: none at a depth its own capacity reading says cannot
    assert all(r["status"] == "ok" for r in deploys), [(r["config"]["config_id"], r.get("reason")) for r in deploys]
    deployed = [r["config"]["config_id"] for r in deploys]
    assert deployed[:2] == ["k2-t1", "k3-t1"]
    assert deployed[2:4] == ["adaptive-default", "k0"], deployed
    tuned = [cid for cid in deployed[4:] if cid.startswith(("adapt-", "sched-"))]
    assert len(deployed) == 5 and len(tuned) == 1, deployed  # the budget: 3 beyond the static sweep
    assert "[schedule] tuned: " in p.stderr, p.stderr[-4000:]
    # the tuned config went through the role: SGLang's per-batch-size JSON, read back by the gate
    tuned_rec = next(r for r in recs if r["type"] == "deploy" and r["config"]["config_id"] == tuned[0])
    doc = json.loads(tuned_rec["config"]["spec_schedule"])
    assert tuned_rec["speculative"]["adaptive"] is True
    # launched at one of its candidates (SGLang requires it), with a pool that holds the workload
    launch = tuned_rec["config"]["spec_steps"]
    assert launch in {s for e in doc.values() for s in e["candidate_steps"]} and launch > 0
    assert tuned_rec["capacity"]["max_total_num_tokens"] >= 160
    assert {k: v["candidate_steps"] for k, v in tuned_rec["speculative"]["schedule"].items()} == {
        k: v["candidate_steps"] for k, v in doc.items()
    }
    # the server is 0.5.23 emulated, and the no-speculation server ran without a draft
    k0 = next(r for r in recs if r["type"] == "deploy" and r["config"]["config_id"] == "k0")
    assert k0["server"]["version"].startswith("0.5.23") and not k0["speculative"].get("enabled")

    rec = json.loads((out / "recommendation.json").read_text())
    kind, cid = rec["recommended"]["kind"], rec["recommended"]["config_id"]
    assert kind in ("static", "no_speculation", "adaptive_default", "adaptive_tuned")
    assert rec["schedule_phase"].startswith("3 of at most 3 deployments beyond the static sweep")
    row = rec["envelope"]["per_level"]["1"]
    assert row["recommended"]["config_id"] == cid and row["who_wins"]
    assert row["no_speculation"]["config_id"] == "k0" and row["default_adaptive"]["config_id"] == "adaptive-default"
    report = (out / "report.md").read_text()
    assert report.index("| C | recommendation |") < report.index("| concurrency | best spec_steps |")

    # --deploy-best: the host runs the recommendation now
    assert rec["deploy_best"]["status"] == "ok" and rec["deploy_best"]["verified"] is True
    assert rec["deploy_best"]["config"]["config_id"] == cid
    info = server_info()
    if kind.startswith("adaptive"):
        assert info["speculative_adaptive"] is True
        if kind == "adaptive_tuned":
            on_host = json.loads(podman("cat", FILE).stdout)
            assert {k: v["candidate_steps"] for k, v in on_host.items()} == {
                k: v["candidate_steps"] for k, v in rec["schedule"].items()
            }
            assert rec["schedule"] == doc
    else:
        assert not info.get("speculative_adaptive")
        assert podman("test", "-e", FILE, check=False).returncode != 0

    # A hand-written schedule that starts but cannot hold its widest candidate: rolled back to the
    # recommendation, with SGLang's reason.
    before = server_info()
    bad = subprocess.run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            str(inventory),
            "deploy.yml",
            "--tags",
            "sglang_server_configure,sglang_server_run",
            "--skip-tags",
            "cuda_env",
            "-e",
            json.dumps(
                {
                    "sglang_server_sglang_version": "0.5.23",
                    "sglang_server_mem_fraction_static": 0.92,
                    "spec_schedule": {"1": {"candidate_steps": [1, 4, 8, 12, 16]}, "16": {"candidate_steps": [2]}},
                    "spec_topk": 1,
                    "spec_algorithm": "NEXTN",
                }
            ),
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert bad.returncode != 0, bad.stdout[-6000:]
    assert "Capture cuda graph failed" in bad.stdout, bad.stdout[-6000:]
    assert "Rolled back sglang-qwen.service" in bad.stdout and "it is healthy again" in bad.stdout, bad.stdout[-6000:]
    assert podman("systemctl", "is-active", UNIT, check=False).stdout.strip() == "active"
    after = server_info()
    for key in ("speculative_num_steps", "speculative_adaptive", "speculative_adaptive_config"):
        assert after.get(key) == before.get(key), key
