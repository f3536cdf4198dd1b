"""`python -m tuner sweep` end to end on local hosts: real ansible-runner, real emulator processes.

The deploy play is fixtures/local_emulator_deploy.yml, which keeps the sglang_server role's
contract (tags, set_stats, rollback, failure message) with a plain process instead of systemd;
the systemd version of this test is tests/tuner/test_tuner_e2e_systemd.py.
"""

from __future__ import annotations

import csv
import json
import tempfile
import urllib.request
from pathlib import Path

import pytest
import yaml
from tuner_testlib import ROOT, free_port, grep_tree, local_inventory, local_target_args, stop_local_emulators

from tuner import cli

KEY = "sk-sweep-test-4f1e9c"


@pytest.fixture
def hosts(tmp_path, monkeypatch):
    """A function making an inventory of local hosts; every emulator is stopped afterwards."""
    state = tmp_path / "state"
    state.mkdir()
    # private data dirs land here, so the test can check that none is left behind
    runner_tmp = tmp_path / "runner-tmp"
    runner_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runner_tmp))

    def make(*names: str) -> Path:
        return local_inventory(tmp_path / "inventory.yml", {n: free_port() for n in names}, state)

    make.state = state
    make.runner_tmp = runner_tmp
    yield make
    stop_local_emulators(state)


def sweep(out: Path, inventory: Path, *args: str) -> int:
    # these tests pin down the grid (deployment order, the early stop, failures and rollback);
    # tests/tuner/test_tuner_search_local.py runs the model-guided search
    search = () if "--search" in args else ("--search", "grid")
    # these tests pin the deploy sequence and the records; the correctness gate's extra deploy and
    # records are tests/tuner/test_verify_sweep_local.py's
    # the confirmation round has its own test (test_tuner_confirm_local.py); these pin the static phase
    confirm = () if "--confirm" in args else ("--confirm", "0")
    return cli.main(
        [
            "sweep",
            "--no-verify",
            *search,
            *confirm,
            *local_target_args(out, inventory),
            "--concurrency",
            "1,4",
            "--input-len",
            "16",
            "--output-len",
            "24",
            "--warmup-requests",
            "1",
            *args,
        ]
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.cost(30)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_sweep_failure_rollback_resume_and_key(hosts, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_API_KEY", KEY)
    inv = hosts("local-a")
    out = tmp_path / "out"
    fixed = ("--requests-per-level", "8")
    rc = sweep(out, inv, "--steps", "1-4", "-e", "fail_from=2", "--deploy-best", *fixed)
    err = capsys.readouterr().err
    assert rc == 0, err
    for name in (
        "sweep.json",
        "records.jsonl",
        "results.csv",
        "recommendation.json",
        "throughput_vs_steps.png",
        "report.md",
    ):
        assert (out / name).is_file(), name
    rows = read_csv(out / "results.csv")
    status = {(r["config_id"], r["concurrency"]): r["status"] for r in rows}
    assert status[("k1-t1", "1")] == status[("k1-t1", "4")] == "ok"
    assert status[("k2-t1", "1")] == status[("k2-t1", "4")] == "deploy_failed"
    # k2 failed for lack of KV memory: k3 and k4 need more of it and are not tried
    assert status[("k3-t1", "1")] == status[("k4-t1", "4")] == "skipped"
    k2 = next(r for r in rows if r["config_id"] == "k2-t1")
    assert "Not enough memory" in k2["error"]
    k1 = next(r for r in rows if r["config_id"] == "k1-t1" and r["concurrency"] == "4")
    assert int(k1["max_total_num_tokens"]) > 0 and int(k1["max_running_requests"]) > 0
    assert float(k1["accept_length"]) > 1 and k1["accept_length_source"] == "meta_info"
    assert int(k1["requests_ok"]) == 8 and k1["requests_failed"] == "0"
    # the host was rolled back to its last good configuration (k1) and the sweep went on
    with urllib.request.urlopen(
        urllib.request.Request(
            f"http://127.0.0.1:{yaml.safe_load(inv.read_text())['all']['children']['sglang_servers']['hosts']['local-a']['local_emu_port']}/server_info",
            headers={"Authorization": f"Bearer {KEY}"},
        )
    ) as r:
        steps_now = json.load(r)["speculative_num_steps"]
    rec = json.loads((out / "recommendation.json").read_text())
    assert set(rec["by_concurrency"]) == {"1", "4"}
    assert rec["recommended"]["spec_steps"] == 1
    # --deploy-best deployed the recommendation last and verified it
    best = [r for r in records(out) if r["type"] == "deploy_best"]
    assert best and best[0]["verified"] is True
    assert steps_now == rec["recommended"]["spec_steps"]
    deploys = [r for r in records(out) if r["type"] == "deploy"]
    assert deploys[0]["tags"] == [] and all(
        d["tags"] == ["sglang_server_configure", "sglang_server_run"] for d in deploys[1:]
    )
    assert (out / "deploy" / "k1-t1" / "stdout.txt").is_file()
    assert (out / "deploy" / "k1-t1" / "events.jsonl").is_file()
    report = (out / "report.md").read_text()
    assert "Not enough memory" in report and "deeper speculation needs more" in report
    # progress lines: configuration, level, tokens/s
    assert "[k=1 C=4 rep 1/1]" in err and "tok/s agg" in err
    # the API key reached the server (requests succeeded with it enforced) but no file holds it
    assert grep_tree(out, KEY) == []
    assert KEY not in err
    assert list(hosts.runner_tmp.iterdir()) == []  # private data dirs are deleted

    # --resume on a finished sweep redoes nothing
    n = len(records(out))
    assert sweep(out, inv, "--steps", "1-4", "-e", "fail_from=2", "--resume", *fixed) == 0
    assert [r["type"] for r in records(out)[n:]] == []

    # an interrupted sweep: the last level of k1 was never written
    lines = (out / "records.jsonl").read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if '"level"' in line)
    dropped = json.loads(lines[last])
    (out / "records.jsonl").write_text("\n".join(lines[:last] + lines[last + 1 :]) + "\n")
    n = len(records(out))
    assert sweep(out, inv, "--steps", "1-4", "-e", "fail_from=2", "--resume", *fixed) == 0
    new = [r for r in records(out)[n:] if r["type"] != "timing"]
    assert [(r["type"], r["config"]["config_id"]) for r in new] == [("deploy", "k1-t1"), ("level", "k1-t1")]
    assert new[1]["concurrency"] == dropped["concurrency"] and new[1]["repeat"] == dropped["repeat"]

    # a different sweep in the same directory is refused, naming the flag
    capsys.readouterr()
    assert sweep(out, inv, "--steps", "1-3", "--resume", *fixed) == 2
    assert "--resume" in capsys.readouterr().err
    assert sweep(out, inv, "--steps", "1-4", "-e", "fail_from=2", *fixed) == 2
    assert "--out" in capsys.readouterr().err


def slow_profile(tmp_path: Path) -> Path:
    """Another machine: a costly draft with poor acceptance, so every extra step loses."""
    seed = yaml.safe_load(
        (ROOT / "tuner" / "emulator" / "profiles" / "seed-qwen35-122b-4x-rtxpro6000.yaml").read_text()
    )
    seed.update({"name": "slow-draft", "t_draft_ms": 25.0, "alpha": {0.0: 0.5, 1.0: 0.3}})
    p = tmp_path / "slow-draft.yaml"
    p.write_text(yaml.safe_dump(seed))
    return p


@pytest.mark.cost(105)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_early_stop_skips_deeper_steps(hosts, tmp_path, capsys):
    inv = hosts("local-a")
    out = tmp_path / "out"
    rc = sweep(
        out,
        inv,
        "--steps",
        "1-4",
        "-e",
        f"local_emu_profile={slow_profile(tmp_path)}",
        "--target-concurrency",
        "4",
        "--output-len",
        "64",
        "--precision",
        "5",
        "--max-requests-per-level",
        "24",
    )
    assert rc == 0, capsys.readouterr().err
    recs = records(out)
    measured = {r["config"]["config_id"] for r in recs if r["type"] == "level"}
    skipped = {r["config"]["config_id"]: r for r in recs if r["type"] == "skip"}
    assert measured == {"k1-t1", "k2-t1"}
    assert set(skipped) == {"k3-t1", "k4-t1"} and skipped["k3-t1"]["kind"] == "early_stop"
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["recommended"]["spec_steps"] == 1
    assert rec["recommended"]["workload"]["concurrency"] == [4]
    assert any("Early stop" in n for n in rec["notes"])
    assert "Early stop" in (out / "report.md").read_text()


@pytest.mark.slow
def test_parallel_hosts_share_the_sweep(hosts, tmp_path, capsys):
    inv = hosts("local-a", "local-b")
    out = tmp_path / "out"
    rc = sweep(out, inv, "--steps", "1-2", "--no-early-stop", "--concurrency", "1", "--deploy-best")
    assert rc == 0, capsys.readouterr().err
    recs = records(out)
    deploys = [r for r in recs if r["type"] == "deploy"]
    assert sorted(r["config"]["config_id"] for r in deploys) == ["k1-t1", "k2-t1"]
    assert {r["host"] for r in deploys} == {"local-a", "local-b"}
    # --deploy-best deploys the recommendation on both hosts, and the outputs name both
    best = [r for r in recs if r["type"] == "deploy_best"]
    assert sorted(r["host"] for r in best) == ["local-a", "local-b"] and all(r["verified"] for r in best)
    rec = json.loads((out / "recommendation.json").read_text())["deploy_best"]
    assert rec["status"] == "ok" and [h["host"] for h in rec["hosts"]] == ["local-a", "local-b"]
    assert "(`--deploy-best`) on local-a: ok; on local-b: ok." in (out / "report.md").read_text()
    # each host's first run is a full one
    firsts = {}
    for r in deploys:
        firsts.setdefault(r["host"], r)
    assert all(r["tags"] == [] for r in firsts.values())
    assert len([r for r in recs if r["type"] == "level"]) == 2


@pytest.mark.cost(30)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_repeat_deploys_and_temperatures(hosts, tmp_path, capsys):
    """Each configuration deployed twice (a restart each time), each deployment measuring both
    temperatures without a redeploy; the intervals then cover restart-to-restart noise."""
    inv = hosts("local-a")
    out = tmp_path / "out"
    rc = sweep(
        out,
        inv,
        "--steps",
        "1-2",
        "--no-early-stop",
        "--concurrency",
        "2",
        "--requests-per-level",
        "4",
        "--repeat-deploys",
        "2",
        "--temperature",
        "0,0.7",
    )
    assert rc == 0, capsys.readouterr().err
    recs = records(out)
    deploys = [(r["config"]["config_id"], r["deployment"]) for r in recs if r["type"] == "deploy"]
    # round 1 over every configuration, then round 2
    assert deploys == [("k1-t1", 1), ("k2-t1", 1), ("k1-t1", 2), ("k2-t1", 2)]
    lv = [(r["config"]["config_id"], r["deployment"], r["temperature"]) for r in recs if r["type"] == "level"]
    assert sorted(lv) == sorted((c, d, t) for c in ("k1-t1", "k2-t1") for d in (1, 2) for t in (0.0, 0.7))
    rec = json.loads((out / "recommendation.json").read_text())
    for t in ("0", "0.7"):
        cell = rec["by_temperature"][t]["by_concurrency"]["2"]
        assert cell["noise"] == "deployments" and cell["deployments"] == 2
    rows = read_csv(out / "results.csv")
    assert {r["deployment"] for r in rows} == {"1", "2"}
    assert "restart-to-restart" in (out / "report.md").read_text()
    # the second deployment's artifacts are kept apart from the first's
    assert (out / "deploy" / "k1-t1-d2" / "events.jsonl").is_file()
    # --resume after the sweep redoes nothing
    n = len(recs)
    args = ("--steps", "1-2", "--no-early-stop", "--concurrency", "2", "--requests-per-level", "4")
    assert sweep(out, inv, *args, "--repeat-deploys", "2", "--temperature", "0,0.7", "--resume") == 0
    assert [r["type"] for r in records(out)[n:]] == []


@pytest.mark.cost(90)  # seconds, measured: started first (tests/conftest.py)
@pytest.mark.slow
def test_schedule_phase_measures_the_envelope_and_tuned_configs_within_its_budget(hosts, tmp_path, capsys):
    """On an SGLang 0.5.23 server the sweep goes on after the static depths: SGLang's default
    adaptive config and a no-speculation server (the envelope), then tuned adaptive configs (ladders
    built from the winners at the batch sizes the server ran and from what the default did), all
    through the deploy play, at most --schedule-budget of them; the recommendation names its kind
    and the report's first table sets it against the envelope."""
    inv = hosts("local-a")
    out = tmp_path / "out"
    rc = sweep(
        out,
        inv,
        "--steps",
        "1,4",
        "--concurrency",
        "1,48",
        "--output-len",
        "96",
        "--requests-per-level",
        "2x",
        "--schedule-budget",
        "3",
        "-e",
        "local_emu_version=0.5.23",
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    recs = records(out)
    levels = [r for r in recs if r["type"] == "level"]
    deploys_cap = {
        r["config"]["config_id"]: r["capacity"]["max_running_requests"] for r in recs if r["type"] == "deploy"
    }
    # every level sampled the server's running-request gauge; admission and the closed loop set it
    assert all(r["metrics"]["running_reqs_samples"] > 0 for r in levels)
    for r in levels:
        if r["concurrency"] == 48 and r["config"]["config_id"] != "k0":
            cap = deploys_cap[r["config"]["config_id"]]
            assert 0 < r["metrics"]["running_reqs_p90"] <= cap < 48
    deployed = [r["config"]["config_id"] for r in recs if r["type"] == "deploy"]
    # the static depths, then the envelope (the default, no speculation), then one tuned config: 3 in all
    assert deployed[:2] == ["k1-t1", "k4-t1"]
    assert deployed[2:4] == ["adaptive-default", "k0"]
    tuned = deployed[4:]
    assert len(tuned) == 1 and tuned[0].startswith(("adapt-", "sched-")), deployed
    cfg = next(r["config"] for r in recs if r["type"] == "deploy" and r["config"]["config_id"] == tuned[0])
    doc = json.loads(cfg["spec_schedule"])
    assert list(doc)[0] == "1" and all(e["candidate_steps"] for e in doc.values())
    assert "[schedule] envelope: SGLang default adaptive, k=0 (no speculation)" in err
    assert "[schedule] tuned: " in err and "static winner spec_steps" in err
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["schedule_phase"].startswith(
        "3 of at most 3 deployments beyond the static sweep: adaptive-default, k0, "
    )
    env = rec["envelope"]["per_level"]
    for c in ("1", "48"):
        assert {"recommended", "level_best_static", "best_static", "default_adaptive", "no_speculation"} <= set(env[c])
        assert env[c]["who_wins"] and "tok/s" in env[c]["who_wins"]
        assert env[c]["no_speculation"]["accept_length"] == 1.0
    kind = rec["recommended"]["kind"]
    assert kind in ("static", "no_speculation", "adaptive_default", "adaptive_tuned")
    cid = rec["recommended"]["config_id"]
    if kind == "adaptive_default":
        assert rec["schedule"]["1"]["candidate_steps"] == [1, 3, 5, 7]  # SGLang's built-in table, as it ran
    elif kind == "adaptive_tuned":
        assert cid == tuned[0] and rec["schedule"] == doc
    else:
        assert rec["schedule"] is None and rec["vllm_num_speculative_tokens_per_batch_size"] is None
    report = (out / "report.md").read_text()
    first_table = report.index("| C | recommendation | level's best static depth |")
    assert first_table < report.index("| concurrency | best spec_steps |")
    assert "adaptive-default" in report

    # --resume: nothing left to measure, nothing deployed again, the budget not exceeded
    rc = sweep(
        out,
        inv,
        "--steps",
        "1,4",
        "--concurrency",
        "1,48",
        "--output-len",
        "96",
        "--requests-per-level",
        "2x",
        "--schedule-budget",
        "3",
        "-e",
        "local_emu_version=0.5.23",
        "--resume",
    )
    assert rc == 0, capsys.readouterr().err
    assert [r["config"]["config_id"] for r in records(out) if r["type"] == "deploy"] == deployed


@pytest.mark.slow
def test_no_schedule_and_old_versions_skip_the_phase(hosts, tmp_path, capsys):
    inv = hosts("local-a")
    out = tmp_path / "out"
    args = ("--steps", "1,2", "--concurrency", "1", "--requests-per-level", "2x")
    assert sweep(out, inv, *args) == 0, capsys.readouterr().err
    rec = json.loads((out / "recommendation.json").read_text())
    assert (
        rec["schedule_phase"].startswith("not run: SGLang 0.5.9") and "has no per-batch-size" in rec["schedule_phase"]
    )
    assert rec["schedule"] is None and rec["schedule_comparison"] is None
    out2 = tmp_path / "out2"
    assert sweep(out2, inv, *args, "--no-schedule", "-e", "local_emu_version=0.5.23") == 0
    rec = json.loads((out2 / "recommendation.json").read_text())
    assert rec["schedule_phase"] == "off (--no-schedule)"
    assert not [r for r in records(out2) if r["type"] == "deploy" and r["config"].get("spec_schedule")]
