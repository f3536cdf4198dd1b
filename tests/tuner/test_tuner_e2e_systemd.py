"""The main job end to end: `python -m tuner sweep` against a real emulator host (podman + systemd).

The host is made by playbooks/emulator_hosts.yml from a copy of inventory/emulator.yml with one
host of the tests' index range (100-149) and a 1 s emulated start-up, and removed afterwards with
`-e emulator_hosts_state=absent`, whatever happens. Steps 1, 2 and 7: 7 cannot start on the
default (seed) profile (its KV pool would be below zero), so the sweep records the failure, the
role rolls the host back to steps 2, and the sweep goes on to recommend and `--deploy-best`.
"""

from __future__ import annotations

import csv
import json
import subprocess
import urllib.error
import urllib.request

import pytest
from tuner_testlib import ROOT, SYSTEMD_ENV, emulator_host_inventory, grep_tree, sweep_cmd

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = [pytest.mark.cost(50), pytest.mark.systemd, pytest.mark.slow]

HOST, INDEX = "emu-t121", 121
KEY = "sk-e2e-sweep-5b7c0d"
ENV = SYSTEMD_ENV


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    with emulator_host_inventory(tmp_path_factory.mktemp("e2e"), HOST, INDEX) as path:
        yield path


def test_sweep_end_to_end(inventory, tmp_path):
    out = tmp_path / "out"
    env = {**ENV, "SGLANG_API_KEY": KEY}
    p = subprocess.run(
        sweep_cmd(
            out,
            inventory,
            "--search",
            "grid",
            "--confirm",
            "0",
            "--steps",
            "1,2,7",
            "--concurrency",
            "1,4",
            "--input-len",
            "32",
            "--output-len",
            "48",
            "--deploy-best",
            "--target-concurrency",
            "4",
            # the deploy sequence is pinned below; the correctness gate's own deploy and checks are
            # tests/tuner/test_verify_sweep_local.py's and tests/roles/test_sglang_server_verify_host.py's
            "--no-verify",
        ),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert "[k=2 C=4 rep 1/1]" in p.stderr and "plot:" in p.stdout

    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    ok = [r for r in rows if r["status"] == "ok"]
    assert {(r["config_id"], r["concurrency"]) for r in ok} == {
        ("k1-t1", "1"),
        ("k1-t1", "4"),
        ("k2-t1", "1"),
        ("k2-t1", "4"),
    }
    # the capacity the server came up with, read from the sglang_ready module's result
    kv = {r["config_id"]: int(r["max_total_num_tokens"]) for r in ok}
    mrr = {r["config_id"]: int(r["max_running_requests"]) for r in ok}
    assert kv["k1-t1"] > kv["k2-t1"] > 0 and mrr["k1-t1"] >= mrr["k2-t1"] > 0
    assert all(float(r["ready_s"]) > 0 and r["resolved_draft_tokens"] for r in ok)
    assert all(float(r["accept_length"]) > 1 for r in ok)
    failed = [r for r in rows if r["config_id"] == "k7-t1"]
    assert failed and all(r["status"] == "deploy_failed" and r["error"] for r in failed)

    rec = json.loads((out / "recommendation.json").read_text())
    assert set(rec["by_concurrency"]) == {"1", "4"}
    best = rec["recommended"]["spec_steps"]
    assert best == rec["by_concurrency"]["4"]["spec_steps"] in (1, 2)
    assert rec["deploy_best"]["status"] == "ok" and rec["deploy_best"]["verified"] is True
    # the host runs the recommendation now
    url = next(
        json.loads(x)["client_url"]
        for x in (out / "records.jsonl").read_text().splitlines()
        if '"deploy"' in x and '"ok"' in x
    )
    with urllib.request.urlopen(
        urllib.request.Request(url + "/server_info", headers={"Authorization": f"Bearer {KEY}"}), timeout=10
    ) as r:
        assert json.load(r)["speculative_num_steps"] == best

    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    deploys = [r for r in recs if r["type"] == "deploy"]
    assert deploys[0]["tags"] == [] and deploys[1]["tags"] == ["sglang_server_configure", "sglang_server_run"]
    assert (out / "deploy" / "k1-t1" / "stdout.txt").is_file()
    assert (out / "throughput_vs_steps.png").stat().st_size > 10_000
    report = (out / "report.md").read_text()
    assert "k7-t1" in report and "Rolled back" in report  # the role's own account
    # the server enforces the key the role gave it: without it, 401
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "/v1/models", timeout=10)
    assert e.value.code == 401
    # the key was used (the role puts it in the unit's environment; requests succeeded) but is
    # nowhere in the output directory, the runner artifacts included
    assert grep_tree(out, KEY) == []
    assert KEY not in p.stderr and KEY not in p.stdout
