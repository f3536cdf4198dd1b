"""The confirmation round end to end on a local host (docs/tuner.md "Verdicts across restarts"):
real ansible-runner, a real emulator process restarted on every deploy
(fixtures/local_emulator_deploy.yml), the round bounded by `--confirm`, its starts and cost in the
log, the records and the report, and every interval widened by what the redeploys measured."""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import pytest
from tuner_testlib import free_port, local_inventory, local_target_args, stop_local_emulators

from tuner import cli


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.cost(60)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("budget", [1, 2])
def test_confirmation_round_redeploys_contenders_within_its_budget(tmp_path, monkeypatch, capsys, budget):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # with a budget of 2, two hosts: the two most urgent contenders are redeployed at once, one each
    hosts = {"local-c": free_port()} if budget == 1 else {"local-c": free_port(), "local-d": free_port()}
    inv = local_inventory(tmp_path / "inventory.yml", hosts, state)
    out = tmp_path / "out"
    try:
        rc = cli.main(
            [
                "sweep",
                "--no-verify-exact",  # the exact round's deploys are test_verify_sweep_local.py's
                *local_target_args(out, inv),
                "--search",
                "grid",
                "--no-early-stop",
                "--no-schedule",
                "--steps",
                "2-4",
                "--concurrency",
                "1,8",
                "--input-len",
                "16",
                "--output-len",
                "32",
                "--warmup-requests",
                "1",
                "--requests-per-level",
                "3x",
                "--confirm",
                str(budget),
            ]
        )
    finally:
        stop_local_emulators(state)
    err = capsys.readouterr().err
    assert rc == 0, err
    recs = records(out)
    deploys = [(r["config"]["config_id"], r["deployment"]) for r in recs if r["type"] == "deploy"]
    first = [d for d in deploys if d[1] == 1]
    extra = [d for d in deploys if d[1] > 1]
    assert sorted(c for c, _ in first) == ["k2-t1", "k3-t1", "k4-t1"]
    assert deploys[:3] == first  # the round comes after the static depths
    assert 1 <= len(extra) <= budget  # bounded by --confirm
    if budget >= 2 and len(extra) == 2:
        assert extra[0][0] != extra[1][0]  # two contenders, not one twice
        redeploys = [r for r in recs if r["type"] == "deploy" and r["deployment"] > 1]
        assert {r["host"] for r in redeploys} == {"local-c", "local-d"}  # at once, one per host
        assert err.index("[confirm] start 2/2") < err.index("[confirm] done")

    # each redeploy measured one level, the one the static depths measured most precisely (a restart
    # moves every level alike: the precise level measures it with the least of the requests' noise)
    own = {
        c: statistics.median(
            (r["metrics"]["output_tok_s_ci_high"] - r["metrics"]["output_tok_s_ci_low"])
            / 2
            / r["metrics"]["output_tok_s"]
            for r in recs
            if r["type"] == "level" and r["deployment"] == 1 and r["concurrency"] == c
        )
        for c in (1, 8)
    }
    measured = []
    for cid, dep in extra:
        lv = [
            r["concurrency"]
            for r in recs
            if r["type"] == "level" and r["config"]["config_id"] == cid and r["deployment"] == dep
        ]
        assert len(lv) == 1 and lv[0] in (1, 8), lv
        measured.append(lv[0])
    # the first redeploy's level was chosen from the static depths alone: the more precise one
    assert measured[0] == min((1, 8), key=lambda c: (own[c], c)), (measured, own)
    timing = [r for r in recs if r["type"] == "timing"]
    assert sorted(r["deployment"] for r in timing) == sorted(d for _, d in deploys)
    # the log says who, why, and what it cost
    assert f"[confirm] start 1/{budget}: redeploying" in err
    assert "[confirm] done" in err and "extra start(s)" in err
    # and why it stopped: its budget spent, or nothing left in doubt (never an empty reason)
    assert "[confirm] done ()" not in err
    if len(extra) == budget:
        assert f"[confirm] done (the budget of {budget} extra start(s) is spent)" in err, err
    assert "deployment-to-deployment spread" in err
    rec = json.loads((out / "recommendation.json").read_text())
    noise = rec["noise"]
    assert noise["restart"]["df"] == len(extra)
    assert noise["confirm"]["starts"] == len(extra) and noise["confirm"]["seconds"] > 0
    assert "deployments" in noise["intervals_cover"]
    # every cell's interval covers the pooled component: at least as wide as its band allows
    # The file rounds intervals and means to 0.01 and the band to 0.001 %: fail only where the
    # rounded numbers prove it (the half-width's largest value below the bound's smallest).
    band = (noise["restart"]["band_pct"] - 0.0005) / 100.0
    for c, cell in rec["by_concurrency"].items():
        lo, hi = cell["ci95"]
        mean = cell["output_tok_s"] - 0.005
        n = cell["deployments"]
        assert (hi - lo) / 2 + 0.005 >= mean * band / n**0.5, (c, cell)
    report = (out / "report.md").read_text()
    assert "Deployment-to-deployment spread" in report
    assert "confirmation round made" in report
    # the redeploy's artifacts are kept apart
    cid, dep = extra[0]
    assert (out / "deploy" / f"{cid}-d{dep}" / "events.jsonl").is_file()
