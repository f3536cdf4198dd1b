"""The correctness gate in a sweep of a real emulator host (podman + systemd), issue #20.

One host (`vg20-t216`, index 216), made by playbooks/emulator_hosts.yml and removed afterwards
whatever happens. `python -m tuner sweep` deploys five depths through the sglang_server role; four of
them are started by the role with one of the emulator's correctness faults (the role's own
`sglang_server_emulator_faults`, chosen per depth by a template in the sweep's `-e @file`):

- k2 `spec-diverge=10`: greedy text that leaves the baseline's at token 10;
- k3 `spec-repeat=100`: long outputs that end in a loop, short ones intact;
- k4 `accept-drift=30`: acceptance that decays over the run, text intact;
- k5 `accept-collapse=10`: acceptance that falls to 1.0 after ten requests, text intact.

On the seed profile those depths are the fast ones at concurrency 1, so a speed-only tuner would
recommend one of them. Each must be caught by the gate with its own reason, excluded from every
level's pick and from the recommendation, and `--deploy-best` must deploy the one correct depth
(k1). The exact round (`--no-verify-exact`) is left to tests/tuner/test_verify_sweep_local.py: here
the point is the role's faults on real hosts. Kept small for CI's systemd stage: one level, a few
requests, one-second start-ups.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from tuner_testlib import ROOT, SYSTEMD_ENV, emulator_host_inventory, sweep_cmd

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = [pytest.mark.cost(150), pytest.mark.systemd, pytest.mark.slow]

HOST, INDEX = "vg20-t216", 216
ENV = SYSTEMD_ENV


FAULTS = {
    "2": ["spec-diverge=10"],
    "3": ["spec-repeat=100"],
    "4": ["accept-drift=30"],
    "5": ["accept-collapse=10"],
}
REASONS = {
    "k2-t1": "outputs differ from the no-speculation baseline",
    "k3-t1": "end in a repeated cycle",
    "k4-t1": "acceptance drifts over the gate's run",
    # the gate's long prompts sent again read 1.00; as their first sends collapse part-way or not,
    # the drop is beyond the first sends' noise (drift) or the collapse rule names it; when ten
    # requests were served before the gate's long prompts (the server's warm-up, the sweep's own), the
    # whole gate reads 1.0 and the floor names it (CI's run of 2026-12-02)
    "k5-t1": (
        "acceptance collapsed to 1.00",
        "1.00 when they were sent again",
        "speculation accepts (almost) nothing",
    ),
}


def _named(why: str | tuple[str, ...], text: str) -> bool:
    return any(w in text for w in ((why,) if isinstance(why, str) else why))


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    with emulator_host_inventory(tmp_path_factory.mktemp("vg20"), HOST, INDEX) as path:
        yield path


def test_each_fault_is_caught_excluded_and_never_deployed(inventory, tmp_path):
    faults = tmp_path / "faults.yml"
    faults.write_text(
        yaml.safe_dump(
            {
                "verify_test_faults": FAULTS,
                # the role's own variable, one list per depth (k0, the baseline, and k1 get none)
                "sglang_server_emulator_faults": "{{ verify_test_faults[spec_steps | string] | default([]) }}",
            }
        )
    )
    out = tmp_path / "out"
    p = subprocess.run(
        sweep_cmd(
            out,
            inventory,
            "--search",
            "grid",
            "--no-early-stop",
            "--steps",
            "1-5",
            "--confirm",
            "0",  # the confirmation round's own test: tests/tuner/test_tuner_confirm_local.py
            "--concurrency",
            "1",
            "--input-len",
            "32",
            "--output-len",
            "128",
            "--requests-per-level",
            "4",
            "--no-verify-exact",
            "--deploy-best",
            "-e",
            f"@{faults}",
        ),
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-6000:]
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    deploys = {r["config"]["config_id"]: r for r in recs if r["type"] == "deploy"}
    assert all(r["status"] == "ok" for r in deploys.values()), {k: r.get("reason") for k, r in deploys.items()}
    # the configurations' own verdicts (the other roles: the baseline's capture, the exact round's account)
    verdicts = {r["config"]["config_id"]: r for r in recs if r["type"] == "verify" and r.get("role") == "config"}
    assert set(verdicts) == {"k1-t1", "k2-t1", "k3-t1", "k4-t1", "k5-t1"}, sorted(verdicts)
    assert verdicts["k1-t1"]["passed"] is True, verdicts["k1-t1"]["reasons"]
    for cid, why in REASONS.items():
        assert verdicts[cid]["passed"] is False, cid
        assert any(_named(why, reason) for reason in verdicts[cid]["reasons"]), (cid, verdicts[cid]["reasons"])
    # a faster faulty depth measured better than k1 (else the test would prove nothing) ...
    tok = {r["config"]["config_id"]: r["metrics"]["output_tok_s"] for r in recs if r["type"] == "level"}
    assert max(tok[c] for c in REASONS) > tok["k1-t1"], tok
    # ... and yet nothing is recommended or deployed from a failing one
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["recommended"]["config_id"] == "k1-t1", rec["recommended"]
    assert rec["by_concurrency"]["1"]["config_id"] == "k1-t1"
    assert rec["deploy_best"]["status"] == "ok" and rec["deploy_best"]["config"]["config_id"] == "k1-t1"
    report = (out / "report.md").read_text()
    for cid, why in REASONS.items():
        assert cid in report and _named(why, report), cid
