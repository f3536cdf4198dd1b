"""Datasets and prompts (tuner/spec/workload.py), SLO limits (tuner/spec/slo.py), and the bad input of issue #11:
each refused with exit 2 naming the flag or the file and line, before anything is deployed."""

from __future__ import annotations

import json

import pytest
from tuner_testlib import FIXTURES

from tuner import cli
from tuner.measure.metrics import LevelSamples
from tuner.measure.stats import percentile
from tuner.spec.flags import BadInput
from tuner.spec.slo import evaluate, parse_slo
from tuner.spec.workload import SHIPPED, Dataset, PromptSource, describe, estimate_tokens, load_dataset

INV = str(FIXTURES / "local_inventory.yml")

SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "What is a kettle?"},
            {"from": "gpt", "value": "A pot for boiling water, usually with a spout and a handle."},
            {"from": "human", "value": "And a teapot?"},
        ],
    },
    {"id": "b", "conversations": [{"from": "human", "value": "Write a haiku about rain."}]},
]


def test_sharegpt_json_array_and_lines(tmp_path):
    p = tmp_path / "sg.json"
    p.write_text(json.dumps(SHAREGPT, indent=2))
    ds = load_dataset(str(p))
    assert (ds.rows, ds.format, ds.name) == (2, "sharegpt", "sg.json") and len(ds.sha256) == 64
    first = ds.prompts[0]
    # the first human turn is the prompt, the reply after it the reference output
    assert first.messages == (("system", "Be brief."), ("user", "What is a kettle?"))
    assert first.output_len == estimate_tokens("A pot for boiling water, usually with a spout and a handle.") == 14
    assert ds.prompts[1].output_len is None and ds.prompts[1].line > first.line
    assert first.text.startswith("System: Be brief.") and first.text.endswith("Assistant:")
    lines = tmp_path / "sg.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in SHAREGPT) + "\n")
    again = load_dataset(str(lines))
    assert [(p.messages, p.output_len) for p in again.prompts] == [(p.messages, p.output_len) for p in ds.prompts]
    assert [p.line for p in again.prompts] == [1, 2]


def test_openai_chat_lines_and_the_shipped_dataset(tmp_path):
    p = tmp_path / "chat.jsonl"
    rows = [
        {
            "messages": [
                {"role": "user", "content": "Hi there"},
                {"role": "assistant", "content": "Hello! How are you?"},
            ]
        },
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Parts work too"}]}]},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ds = load_dataset(str(p))
    assert ds.format == "openai-chat" and ds.prompts[0].output_len == 6 and ds.prompts[0].text == "Hi there"
    assert ds.prompts[1].text == "Parts work too" and ds.prompts[1].output_len is None
    shipped = load_dataset(str(SHIPPED))
    assert shipped.rows == 36 and shipped.format == "openai-chat"
    assert all(p.output_len and 30 <= p.output_len <= 250 for p in shipped.prompts)
    kinds = [json.loads(line)["kind"] for line in SHIPPED.read_text().splitlines()]
    assert {k: kinds.count(k) for k in set(kinds)} == {"chat": 12, "code": 12, "summary": 12}


def test_prompt_source_is_the_same_for_every_configuration(tmp_path):
    ds = load_dataset(str(SHIPPED))
    a = PromptSource(input_len=None, output_len=None, seed=1, dataset=ds, sample=10)
    b = PromptSource(input_len=None, output_len=None, seed=1, dataset=ds, sample=10)
    assert [a.request(i, "chat") for i in range(25)] == [b.request(i, "chat") for i in range(25)]
    assert len({a.request(i, "chat").messages[-1]["content"] for i in range(10)}) == 10  # 10 distinct rows
    assert a.request(3, "chat") == a.request(13, "chat")  # then they cycle
    assert a.request(0, "generate").text and a.request(0, "generate").input_ids is None  # text on /generate
    assert a.max_tokens(0) == a.row(0).output_len  # output lengths from the data
    other = PromptSource(input_len=None, output_len=None, seed=2, dataset=ds, sample=10)
    assert [other.row(i) for i in range(10)] != [a.row(i) for i in range(10)]  # --seed draws another sample
    fixed = PromptSource(input_len=12, output_len=40, seed=1, dataset=ds)
    req = fixed.request(0, "completions")
    assert req.max_tokens == 40 and len(req.messages[-1]["content"].split()) == 12
    synthetic = PromptSource(input_len=8, output_len=16, seed=0)
    assert len(synthetic.request(0, "generate").input_ids) == 8
    assert len(synthetic.request(0, "chat").messages[0]["content"].split()) == 8


def test_rows_without_a_prompt_are_skipped_and_counted_as_bench_serving_skips_them(tmp_path):
    """ShareGPT dumps hold conversations that are empty or start with the assistant; SGLang's
    bench_serving keeps only conversations of two turns or more (sample_sharegpt_requests), so a
    few such rows must not refuse the file: they are skipped, counted, and named in the describe line."""
    rows = [
        {"conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"}]},
        {"conversations": []},
        {"conversations": [{"from": "gpt", "value": "only a reply"}]},
        {"conversations": [{"from": "human", "value": "q2"}, {"from": "gpt", "value": "a2"}]},
        {"conversations": [{"from": "human", "value": "q3"}]},
    ]
    p = tmp_path / "sg.json"
    p.write_text(json.dumps(rows, indent=1))
    ds = load_dataset(str(p))
    assert [p.messages[-1][1] for p in ds.prompts] == ["q1", "q2", "q3"]
    assert ds.rows == 3 and ds.skipped == 2
    assert ds.to_json()["skipped_rows"] == 2 and Dataset.from_json(ds.to_json()).skipped == 2
    line = describe(ds, None)
    assert "3 rows; 2 without a prompt skipped" in line and f"{p}:" in line and "no human turn" in line
    assert "skipped" not in describe(load_dataset(str(SHIPPED)), None)
    assert "skipped_rows" not in load_dataset(str(SHIPPED)).to_json()


def test_array_rows_keep_their_line_numbers(tmp_path):
    """Each element's line, counted on from the last (it was counted from the file's start for every
    element: minutes for the ShareGPT file)."""
    rows = [{"prompt": f"p{i}", "output_len": i + 1} for i in range(50)]
    p = tmp_path / "a.json"
    p.write_text("[\n" + ",\n".join(json.dumps(r, indent=1) for r in rows) + "\n]\n")
    per_row = len(json.dumps(rows[0], indent=1).splitlines())
    ds = load_dataset(str(p))
    assert [q.line for q in ds.prompts] == [2 + i * per_row for i in range(50)]
    assert [q.output_len for q in ds.prompts] == list(range(1, 51))


def test_json_lines_break_at_newlines_only(tmp_path):
    """U+2028, U+2029 and U+0085 are valid unescaped inside JSON strings (json.dumps with
    ensure_ascii=False writes them): str.splitlines() cut such a row in two."""
    p = tmp_path / "u.jsonl"
    p.write_text(
        json.dumps({"prompt": "a\u2028b\u2029c\x85d"}, ensure_ascii=False)
        + "\r\n"
        + json.dumps({"prompt": "e"})
        + "\n",
        encoding="utf-8",
    )
    ds = load_dataset(str(p))
    assert [q.messages[0][1] for q in ds.prompts] == ["a\u2028b\u2029c\x85d", "e"] and ds.prompts[1].line == 2


def test_the_estimate_counts_cjk_characters_one_by_one():
    """A run of Chinese or Japanese characters has no spaces: as one `\\w+` word a whole clause was
    one token, and --output-len auto then asked for a fifth of the reply."""
    assert estimate_tokens("我们今天去公园散步，天气很好。") == 15
    assert estimate_tokens("今日はいい天気ですね") == 10
    assert estimate_tokens("안녕하세요") == 5
    assert estimate_tokens("GPT模型 is fast") == 5  # a Latin word stops at the first CJK character
    assert estimate_tokens("A pot for boiling water, usually with a spout and a handle.") == 14


@pytest.mark.parametrize(
    "content,where,what",
    [
        (b"", "", "empty file"),
        (b"  \n\n", "", "empty file"),
        (b'{"messages": [{"role": "user", "content": "ok"}]}\n{"messages": [{"role": "us', ":2", "truncated JSON"),
        (b'[\n  {"conversations": [{"from": "human", "value": "x"}]},\n  {"conv', ":3", "truncated JSON"),
        (b'{"messages": [{"role": "user", "content": "ok"}]}\n{"prompt": "caf\xe9"}\n', ":2", "not UTF-8"),
        # rows without a prompt are skipped, but not most of a file (tests below for a few)
        (
            b'{"messages": [{"role": "user", "content": "ok"}]}\n{"messages": [{"role": "assistant", "content": "a"}]}\n'
            b'{"messages": [{"role": "system", "content": "s"}]}\n',
            ":2",
            "no prompt",
        ),
        (
            b'[\n {"conversations": [{"from": "human", "value": "q"}]},\n {"conversations": [{"from": "gpt", "value": "a"}]},'
            b'\n {"conversations": []}\n]',
            ":3",
            "2 of the 3 rows have no prompt",
        ),
        (b'{"prompt": "q", "output_len": "100"}\n', ":1", "output_len must be a whole number"),
        (b'{"prompt": "q"}\n{"prompt": "q", "output_len": true}\n', ":2", "output_len must be a whole number"),
        (b'{"prompt": "q"}\n{"prompt": "q", "output_len": 0}\n', ":2", "output_len must be a whole number"),
        (b'{"messages": [{"role": "user", "content": "ok"}]}\n{"text": "no prompt key"}\n', ":2", "no prompt"),
        (b'{"messages": [{"role": "user", "content": "ok"}]}\n[1, 2]\n', ":2", "must be a JSON object"),
        (b'{"messages": [{"role": "user", "content": "ok"}]}\n{oops}\n', ":2", "not valid JSON"),
        # two arrays one after the other: the second's rows were dropped without a word
        (b'[{"prompt": "a"}]\n[{"prompt": "b"}]\n', ":2", "text after the array's closing ]"),
    ],
)
def test_bad_datasets_name_the_file_and_line(tmp_path, content, where, what):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    with pytest.raises(BadInput) as e:
        load_dataset(str(p))
    assert e.value.flag == "--dataset"
    assert f"{p}{where}:" in str(e.value) and what in str(e.value)


def test_slo_parsing():
    slo = parse_slo("ttft_p99_ms=500, tpot_p90_ms=50,e2e_p99_ms=20000")
    assert [(x.metric, x.percentile, x.limit_ms) for x in slo.limits] == [
        ("ttft", 99.0, 500.0),
        ("tpot", 90.0, 50.0),
        ("e2e", 99.0, 20000.0),
    ]
    assert slo.to_json() == {"ttft_p99_ms": 500.0, "tpot_p90_ms": 50.0, "e2e_p99_ms": 20000.0}
    assert parse_slo("") is None
    # a percentile survives its round trip through sweep.json: `:g` wrote p99.99999 as p100 and
    # p0.00001 as p1e-05, which the next read (`report`, `--resume`) refused
    for text in ("ttft_p99.99999_ms=500", "tpot_p0.00001_ms=9", "e2e_p99.9_ms=100"):
        first = parse_slo(text)
        assert first is not None and parse_slo(",".join(f"{k}={v}" for k, v in first.to_json().items())) == first
    assert parse_slo("ttft_p99.99999_ms=500").describe() == "TTFT p99.99999 <= 500 ms"
    for bad, what in [
        ("ttft_p99=5", "unknown key"),
        ("latency_p99_ms=5", "unknown key"),
        ("ttft_p100_ms=5", "between 0 and 100"),
        ("ttft_p99_ms=-5", "negative"),
        ("ttft_p99_ms=0", "never be met"),
        ("ttft_p99_ms=abc", "not a number"),
        ("ttft_p99_ms", "KEY=MILLISECONDS"),
        ("ttft_p99_ms=1,ttft_p99_ms=2", "twice"),
        # one limit written two ways: judged at 5 ms, then written back (and re-judged) at 600
        ("ttft_p99.0_ms=5,ttft_p99_ms=600", "twice"),
        ("ttft_p99.123456789012_ms=5", "at most 10 decimals"),
    ]:
        with pytest.raises(BadInput) as e:
            parse_slo(bad)
        assert e.value.flag == "--slo" and what in str(e.value), bad


def test_goodput_counts_the_requests_within_every_limit():
    s = LevelSamples(
        ttft_ms=[100.0, 200.0, 900.0, 150.0],
        tpot_ms=[10.0, 60.0, 10.0, None],  # None: a one-token answer, TPOT 0 as SGLang counts it
        e2e_ms=[1000.0, 1500.0, 2000.0, 200.0],
        output_tokens=[100, 100, 100, 1],
    )
    res = evaluate(parse_slo("ttft_p99_ms=500,tpot_p99_ms=50"), [(s, 301.0, 0)])
    # requests 1 and 4 meet both limits: 101 of 301 tokens
    assert res.goodput_tok_s == pytest.approx(101.0) and res.attainment == 0.5 and res.requests == 4
    assert res.meets is False and res.observed["ttft_p99_ms"] > 500
    ok = evaluate(parse_slo("ttft_p50_ms=500"), [(s, 301.0, 0)])
    assert ok.meets is True and ok.observed["ttft_p50_ms"] == pytest.approx(175.0)


def test_failed_requests_meet_no_limit():
    """A partial level: 1 request answered within the limit, 3 failed (HTTP 500). Attainment is
    over the requests sent (it read 100% of 1), and a p50 the failed share reaches is not met."""
    s = LevelSamples(ttft_ms=[100.0], tpot_ms=[10.0], e2e_ms=[1000.0], output_tokens=[100])
    res = evaluate(parse_slo("ttft_p50_ms=500"), [(s, 100.0, 3)])
    assert res.attainment == 0.25 and res.requests == 4 and res.meets is False
    # one failure in 100 requests still meets a p50, not a p99
    many = LevelSamples(ttft_ms=[100.0] * 99, tpot_ms=[10.0] * 99, e2e_ms=[1000.0] * 99, output_tokens=[100] * 99)
    assert evaluate(parse_slo("ttft_p50_ms=500"), [(many, 100.0, 1)]).meets is True
    worst = evaluate(parse_slo("ttft_p99_ms=500"), [(many, 100.0, 2)])
    assert worst.meets is False and worst.attainment == pytest.approx(99 / 101)


def test_a_tpot_limit_is_judged_on_the_percentile_the_cell_publishes():
    """One-token answers have no TPOT: left out of tpot_ms_pNN (as SGLang's bench_serving leaves
    them out of its TPOT percentiles), so they must not pull the checked percentile below it."""
    tpots = [None] + [10.0 * k for k in range(1, 10)]
    s = LevelSamples(
        ttft_ms=[50.0] * 10,
        tpot_ms=tpots,
        e2e_ms=[50.0] + [1000.0] * 9,
        output_tokens=[1] + [100] * 9,
    )
    published = percentile([v for v in tpots if v is not None], 50)
    res = evaluate(parse_slo("tpot_p50_ms=47"), [(s, 901.0, 0)])
    from tuner.measure.stats import readable

    assert readable(9.5691) == "9.57" and readable(1657.9) == "1,658"  # a 9.57 ms is not shown as 10
    assert res.observed["tpot_p50_ms"] == pytest.approx(published) == pytest.approx(50.0)
    assert res.meets is False
    # every answer one token long: no inter-token time at all, the limit is met
    ones = LevelSamples(ttft_ms=[50.0] * 3, tpot_ms=[None] * 3, e2e_ms=[50.0] * 3, output_tokens=[1] * 3)
    assert evaluate(parse_slo("tpot_p50_ms=47"), [(ones, 60.0, 0)]).meets is True


def _sweep(tmp_path, *args):
    out = tmp_path / "out"
    return cli.main(["sweep", "--out", str(out), "--inventory", INV, *args]), out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--precision", "0"], "--precision"),
        (["--precision", "-1"], "--precision"),
        (["--slo", "ttft_p99=5"], "--slo: unknown key"),
        (["--slo", "tpot_p99_ms=-3"], "--slo: tpot_p99_ms=-3: a limit cannot be negative"),
        (["--temperature", "0,abc"], "--temperature"),
        (["--top-p", "0"], "--top-p"),
        (["--dataset-sample", "5"], "--dataset-sample: needs --dataset"),
        (["--dataset", str(SHIPPED), "--dataset-sample", "99"], "--dataset-sample: 99 is more than the 36 rows"),
    ],
)
def test_bad_flags_exit_2_before_anything(tmp_path, capsys, args, needle):
    rc, out = _sweep(tmp_path, *args)
    assert rc == 2 and needle in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "content,where",
    [(b"", ": empty file"), (b'{"messages": [', ":1: truncated JSON"), (b"\xff\xfe{}", ":1: not UTF-8")],
)
def test_bad_dataset_exits_2_naming_the_file(tmp_path, capsys, content, where):
    p = tmp_path / "d.jsonl"
    p.write_bytes(content)
    rc, out = _sweep(tmp_path, "--dataset", str(p))
    err = capsys.readouterr().err
    assert rc == 2 and f"--dataset: {p}{where}" in err
    assert not out.exists()
    rc = cli.main(["bench", "--url", "http://127.0.0.1:9", "--dataset", str(p)])
    assert rc == 2 and f"{p}{where}" in capsys.readouterr().err
