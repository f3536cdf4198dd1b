"""Levels against real emulator processes on loopback (`bench --url`): the precision loop, temperatures
as an axis, datasets as text, SLO goodput, cross-checks, and a level lost with its server measured
again once systemd-like supervision brings the server back."""

from __future__ import annotations

import json
from pathlib import Path

from tuner_testlib import emulator, supervised_emulator

from tuner import cli
from tuner.spec.workload import SHIPPED


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


def levels(out: Path) -> list[dict]:
    return [r for r in records(out) if r["type"] == "level"]


def test_precision_loop_stops_at_the_asked_precision_or_a_cap(tmp_path, capsys):
    out = tmp_path / "p"
    with emulator() as url:
        rc = cli.main(
            ["bench", "--url", url, "--concurrency", "2", "--output-len", "48", "--input-len", "16"]
            + ["--precision", "4", "--max-requests-per-level", "60", "--out", str(out), "--quiet"]
        )
        assert rc == 0, capsys.readouterr().err
        (lv,) = levels(out)
        m = lv["metrics"]
        assert lv["stop_reason"] in ("precision reached", "request cap")
        assert 4 <= m["requests"] <= 60 + 1  # the minimum max(4, 2C), at most the cap (+ none in flight)
        if lv["stop_reason"] == "precision reached":
            assert m["precision_pct"] <= 4.5 and m["windows"] >= 3  # the last window may widen it a little
        assert m["output_tok_s_ci_low"] < m["output_tok_s"] < m["output_tok_s_ci_high"]
        assert m["samples"] == m["requests_ok"] == m["requests"]
        assert m["ttft_ms_p50_ci_low"] <= m["ttft_ms_p50"] <= m["ttft_ms_p50_ci_high"]
        # the windows kept with the level give back its throughput
        w = lv["samples"]["windows"]
        assert sum(y for y, _ in w) / sum(x for _, x in w) == __import__("pytest").approx(m["output_tok_s"], rel=1e-3)
        assert len(lv["samples"]["ttft_ms"]) == m["requests_ok"]
        # a fixed count is exactly that many requests, and says so
        out2 = tmp_path / "f"
        assert (
            cli.main(
                [
                    "bench",
                    "--url",
                    url,
                    "--concurrency",
                    "2",
                    "--output-len",
                    "16",
                    "--requests-per-level",
                    "6",
                    "--out",
                    str(out2),
                    "--quiet",
                ]
            )
            == 0
        )
        (fixed,) = levels(out2)
        assert fixed["metrics"]["requests"] == 6 and fixed["stop_reason"] == "fixed count"
    rows = (out / "results.csv").read_text().splitlines()
    header = rows[0].split(",")
    for col in ("output_tok_s_ci_low", "output_tok_s_ci_high", "samples", "precision_pct", "deployment"):
        assert col in header
    rec = json.loads((out / "recommendation.json").read_text())
    c2 = rec["by_concurrency"]["2"]
    assert len(c2["ci95"]) == 2 and c2["ci95"][0] < c2["output_tok_s"] < c2["ci95"][1]
    assert c2["tied_with"] == [] and c2["noise"] == "requests"
    report = (out / "report.md").read_text()
    assert "95% CI" in report and "precision" in report and "Warning: only greedy decoding" in report


def test_temperatures_dataset_slo_and_cross_checks(tmp_path, capsys):
    out = tmp_path / "t"
    with emulator() as url:
        rc = cli.main(
            ["bench", "--url", url, "--concurrency", "1,3", "--temperature", "0,0.7", "--top-p", "0.9"]
            + ["--dataset", str(SHIPPED), "--dataset-sample", "12", "--output-len", "24", "--endpoint", "chat"]
            + ["--requests-per-level", "6", "--slo", "ttft_p99_ms=60000,tpot_p99_ms=0.001", "--out", str(out)]
            + ["--quiet"]
        )
    err = capsys.readouterr()
    # tpot_p99_ms=0.001 can never be met: no level is recommended, and it says so
    assert rc == 1, err.err
    lv = levels(out)
    assert sorted({(r["temperature"], r["concurrency"]) for r in lv}) == [(0.0, 1), (0.0, 3), (0.7, 1), (0.7, 3)]
    assert all(r["top_p"] == (0.9 if r["temperature"] > 0 else None) for r in lv)
    # prompts went as text, their real length is the server's count (words in the emulator, plus the template)
    assert all(r["metrics"]["prompt_tokens_mean"] > 10 for r in lv)
    rec = json.loads((out / "recommendation.json").read_text())
    assert set(rec["by_temperature"]) == {"0", "0.7"}
    assert rec["slo"] == {"ttft_p99_ms": 60000.0, "tpot_p99_ms": 0.001}
    for t in ("0", "0.7"):
        for c in ("1", "3"):
            cell = rec["by_temperature"][t]["by_concurrency"][c]
            assert cell["config_id"] is None and cell["meets_slo"] is False and "SLO" in cell["reason"]
            assert cell["best_measured"]["goodput_tok_s"] == 0.0
    assert rec["dataset"]["name"] == "sgt-mixed-v1.jsonl" and len(rec["dataset"]["sha256"]) == 64
    sweep = json.loads((out / "sweep.json").read_text())["params"]
    assert sweep["dataset"]["sha256"] == rec["dataset"]["sha256"] and sweep["temperature"] == [0.0, 0.7]
    # the same directory, another SLO: `report DIR --slo` recomputes goodput and the choice
    assert cli.main(["report", str(out), "--slo", "ttft_p99_ms=60000"]) == 0
    rec = json.loads((out / "recommendation.json").read_text())
    cell = rec["by_temperature"]["0.7"]["by_concurrency"]["3"]
    assert cell["meets_slo"] is True and cell["goodput_tok_s"] == cell["output_tok_s"]
    report = (out / "report.md").read_text()
    assert "### Temperature 0.7" in report and "Service-level objectives" in report
    assert "sgt-mixed-v1.jsonl" in report and "Warning: only greedy" not in report
    # cross-checks: client, usage and /metrics agree on a quiet emulator
    assert rec["cross_checks"]["comparisons"] >= 8 and rec["cross_checks"]["warnings"] == []
    assert "Every comparison agrees within 1%" in report


def test_a_level_lost_with_its_server_is_measured_again(tmp_path, capsys):
    out = tmp_path / "l"
    # the first process dies 2 s after it is ready; the supervisor starts a healthy one after 0.5 s
    with supervised_emulator(["--emulator-fault", "crash-after-ready=2"], []) as (url, exits):
        rc = cli.main(
            ["bench", "--url", url, "--concurrency", "1,2", "--output-len", "64", "--requests-per-level", "16"]
            + ["--warmup-requests", "0", "--recover-timeout", "30", "--out", str(out), "--quiet"]
        )
        assert exits, "the emulator never crashed"
    assert rc == 0, capsys.readouterr().err
    lv = levels(out)
    lost = [r for r in lv if r["server_lost"]]
    assert len(lost) == 1 and lost[0]["attempt"] == 1 and lost[0]["metrics"]["requests_failed"] >= 1
    again = [r for r in lv if r["concurrency"] == lost[0]["concurrency"] and not r["server_lost"]]
    assert len(again) == 1 and again[0]["attempt"] == 2 and again[0]["metrics"]["status"] == "ok"
    assert {r["concurrency"] for r in lv if not r["server_lost"]} == {1, 2}
    rec = json.loads((out / "recommendation.json").read_text())
    assert set(rec["by_concurrency"]) == {"1", "2"} and rec["recommended"]["config_id"]
    notes = " ".join(rec["notes"])
    assert "the server went away during the level" in notes and "measured again" in notes


def test_a_second_loss_fails_the_configuration(tmp_path, capsys):
    out = tmp_path / "l2"
    with supervised_emulator(["--emulator-fault", "crash-after-ready=1.5"]) as (url, exits):
        rc = cli.main(
            ["bench", "--url", url, "--concurrency", "1", "--output-len", "64", "--requests-per-level", "30"]
            + ["--warmup-requests", "0", "--recover-timeout", "30", "--out", str(out), "--quiet"]
        )
    assert rc == 1
    recs = records(out)
    assert [r["server_lost"] for r in recs if r["type"] == "level"] == [True, True]
    (bf,) = [r for r in recs if r["type"] == "bench_failed"]
    assert bf["kind"] == "server_lost" and "went away twice" in bf["reason"]
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["recommended"]["config_id"] is None
    assert any("went away twice" in n for n in rec["notes"])


def test_the_clock_starts_when_the_request_leaves(emu_url):
    """TTFT counts from the header write (an aiohttp trace hook), not from when the worker began."""
    import asyncio

    from tuner.run.client import BenchClient, ClientOptions

    async def go():
        async with BenchClient(ClientOptions(url=emu_url, input_len=8, output_len=8)) as client:
            return await client.run_level(4, 8)

    traces = asyncio.run(go())
    assert len(traces) == 8 and all(t.ok for t in traces)
    for t in traces:
        assert t.issued is not None and t.issued < t.sent < t.chunk_times[0]


def test_a_level_too_short_for_its_own_gauge_sample_reports_no_running_batch(emu_url, tmp_path, capsys):
    """SGLang's num_running_reqs gauge holds what its last stats log set (a prefill batch, every
    decode_log_interval decode steps), so the scrape sent as a level starts reads the level before.
    A C=1 level over before the next scrape (0.5 s on) must not report that leftover as its batch."""
    import urllib.request

    from tuner.measure.metrics import parse_prometheus_gauges

    base = ["bench", "--url", emu_url, "--input-len", "16", "--warmup-requests", "0", "--quiet"]
    # what a 32-wide level leaves on the gauge is its last stats log's batch (max_running_requests
    # 17): most often 8 to 13, but 1 when that log fell in the level's tail, so the level is run
    # again until it leaves more than the short level's one request could read
    for _ in range(6):
        assert cli.main(base + ["--concurrency", "32", "--output-len", "32", "--requests-per-level", "64"]) == 0
        with urllib.request.urlopen(emu_url + "/metrics", timeout=5) as r:
            left = parse_prometheus_gauges(r.read().decode())["num_running_reqs"]
        if left > 1:
            break
    assert left > 1, "six 32-wide levels each ended with a stats log of one running request"
    out = tmp_path / "short"
    short = ["--concurrency", "1", "--output-len", "4", "--requests-per-level", "1", "--out", str(out)]
    assert cli.main(base + short) == 0
    (lv,) = levels(out)
    m = lv["metrics"]
    assert m["requests_ok"] == 1
    # a sample taken while its one request streamed reads at most that request; none, nothing
    assert m["running_reqs_p90"] is None or m["running_reqs_p90"] <= 1, (left, m["running_reqs_p90"])
    assert (m["running_reqs_p90"] is None) == (m["running_reqs_samples"] == 0)
