"""`python -m tuner bench --url` against a running emulator, then `plot DIR` and `report DIR`."""

from __future__ import annotations

import csv
import json

from tuner_testlib import emulator, grep_tree

from tuner import cli

KEY = "sk-bench-cli-31337"


def test_bench_writes_the_sweep_outputs_without_the_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_API_KEY", KEY)
    out = tmp_path / "b"
    with emulator("--api-key", KEY, steps=2) as url:
        rc = cli.main(
            [
                "bench",
                "--url",
                url,
                "--concurrency",
                "1,2",
                "--input-len",
                "8",
                "--output-len",
                "16",
                "--repeats",
                "2",
                "--out",
                str(out),
            ]
        )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["concurrency"], r["repeat"]) for r in rows] == [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]
    assert {r["spec_steps"] for r in rows} == {"2"}  # from /server_info
    assert all(r["status"] == "ok" and int(r["max_total_num_tokens"]) > 0 for r in rows)
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["by_concurrency"]["2"]["repeats"] == 2
    assert rec["by_concurrency"]["2"]["output_tok_s_std"] is not None
    assert (out / "report.md").is_file() and (out / "throughput_vs_steps.png").is_file()
    assert grep_tree(out, KEY) == [] and KEY not in captured.err + captured.out

    (out / "throughput_vs_steps.png").unlink()
    assert cli.main(["plot", str(out)]) == 0
    assert (out / "throughput_vs_steps.png").is_file()
    assert cli.main(["report", str(out), "--target-concurrency", "2"]) == 0
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["recommended"]["workload"]["concurrency"] == [2]


def test_bench_without_out_prints_a_table(capsys):
    with emulator(steps=0) as url:
        rc = cli.main(
            ["bench", "--url", url, "--concurrency", "2", "--output-len", "8", "--requests-per-level", "4", "--quiet"]
        )
    out = capsys.readouterr().out
    assert rc == 0
    assert "aggregate tok/s" in out and "4/0" in out
    assert "    T  " not in out  # one temperature: no column for it


def test_bench_table_names_the_temperature_and_repeat_of_each_row(capsys):
    # with two temperatures each concurrency printed two rows that could not be told apart
    with emulator(steps=0) as url:
        rc = cli.main(
            ["bench", "--url", url, "--concurrency", "1", "--temperature", "0,1", "--repeats", "2", "--output-len", "4"]
            + ["--requests-per-level", "1", "--warmup-requests", "0", "--quiet"]
        )
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert lines[0].split()[:3] == ["T", "repeat", "concurrency"], lines
    assert sorted(tuple(ln.split()[:3]) for ln in lines[1:]) == [
        ("0", "1", "1"),
        ("0", "2", "1"),
        ("1", "1", "1"),
        ("1", "2", "1"),
    ], lines


def test_bench_unreachable_server_fails(capsys):
    from tuner_testlib import free_port

    assert cli.main(["bench", "--url", f"http://127.0.0.1:{free_port()}", "--concurrency", "1"]) == 1


def test_a_bench_that_measured_nothing_can_be_run_again_into_its_directory(tmp_path, capsys):
    """The server not up yet (the moment a user retries): the sweep.json written before its first
    request made the same command refuse the directory ('already holds a sweep'), and `bench` has
    no --resume. Nothing measured leaves the directory as it was found."""
    from tuner_testlib import free_port

    argv = ["bench", "--url", f"http://127.0.0.1:{free_port()}", "--concurrency", "1", "--out", str(tmp_path / "b")]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "report.md").write_text("# the user's notes\n")  # not this run's: kept
    assert cli.main(argv) == 1, capsys.readouterr().err
    assert not (tmp_path / "b" / "sweep.json").exists()
    assert cli.main(argv) == 1, capsys.readouterr().err  # refused before: exit 2, --out already holds a sweep
    assert (tmp_path / "b" / "report.md").read_text() == "# the user's notes\n"


def test_a_bench_whose_warmup_failed_says_why_even_quiet_and_can_run_again(tmp_path, capsys):
    """A server that answers /server_info but fails every request: the run had written its
    records and outputs, so the same command was refused ('already holds results'), and under
    --quiet it printed an empty table and no reason at all."""
    out = tmp_path / "b"
    out.mkdir()
    (out / "report.md").write_text("# the user's notes\n")  # not this run's: untouched
    with emulator("--emulator-fault", "http-5xx=1", steps=2) as url:
        argv = ["bench", "--url", url, "--concurrency", "1", "--output-len", "16", "--out", str(out), "--quiet"]
        for _ in range(2):
            assert cli.main(argv) == 1
            captured = capsys.readouterr()
            assert "benchmark stopped: every warm-up request failed: HTTP 5" in captured.err, captured.err
            assert "concurrency" not in captured.out, captured.out
            assert [p.name for p in out.iterdir() if p.name != ".tuner.lock"] == ["report.md"]
            assert (out / "report.md").read_text() == "# the user's notes\n"


def test_bench_names_an_adaptive_server_by_the_schedule_it_runs(tmp_path):
    """/server_info's speculative_num_steps is only an adaptive server's launch depth: `bench --url`
    labels it by its schedule (SGLang's default, or the config file it names), never as that
    static depth, and refuses a config file it cannot read rather than mislabel the results."""
    import urllib.request

    from sglang_utils.sglang_server_info import parse_server_info

    from tuner.run.sweep import server_record
    from tuner.spec.flags import BadInput

    doc = {"1": {"candidate_steps": [4]}, "8": {"candidate_steps": [2]}}
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(doc))
    v23 = ("--emulator-sglang-version", "0.5.23", "--speculative-adaptive")

    def info(url):
        with urllib.request.urlopen(url + "/server_info", timeout=10) as r:
            return parse_server_info(json.loads(r.read()))

    with emulator(*v23, "--speculative-adaptive-config", str(path), steps=2) as url:
        body = info(url)
    cfg = server_record(url, body, "m").config
    assert cfg.is_schedule and cfg.adaptive_document() == doc and cfg.spec_steps == 2
    assert cfg.config_id != "k2-t1" and "B>=1: k=4" in cfg.label
    path.unlink()
    try:
        server_record(url, body, "m")
        raise AssertionError("an unreadable adaptive config was labelled")
    except BadInput as exc:
        assert str(path) in str(exc) and exc.flag == "--url"

    # SGLang's default config: no file, no --speculative-num-steps (SGLang starts at 3)
    with emulator(*v23, "--speculative-algorithm", "NEXTN", steps=0) as url:
        cfg = server_record(url, info(url), "m").config
    assert cfg.adaptive and cfg.config_id == "adaptive-default" and cfg.spec_steps == 3


def test_an_interrupted_bench_writes_the_outputs_of_what_it_measured(tmp_path, monkeypatch):
    """`sweep` writes its outputs on an interrupt; `bench` left records.jsonl and results.csv but no
    report or recommendation, in a directory it then refuses to bench into again."""
    from tuner.run import sweep as sweep_mod

    real = sweep_mod.run_levels

    async def interrupted(*args, **kwargs):
        await real(*args, **kwargs)  # the levels measured, then the user's Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_mod, "run_levels", interrupted)
    out = tmp_path / "b"
    with emulator(steps=2) as url:
        try:
            cli.main(
                [
                    "bench",
                    "--url",
                    url,
                    "--concurrency",
                    "1",
                    "--input-len",
                    "8",
                    "--output-len",
                    "8",
                    "--out",
                    str(out),
                ]
            )
        except KeyboardInterrupt:
            pass
    assert (out / "report.md").is_file() and (out / "recommendation.json").is_file()
    assert json.loads((out / "recommendation.json").read_text())["by_concurrency"]["1"]["config_id"].startswith("k2-t1")
