"""Log-line formats (docs/reference/sglang.md §1) and deterministic text, as pure functions."""

from __future__ import annotations

import io
import re

from tuner.emulator import logs, tokens

# the parsing hints of docs/reference/sglang.md §1.6, verbatim
LINE_RE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d{3})?((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (.*)$"
)
CAPACITY_RE = re.compile(
    r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
    r"max_running_requests=(\d+), context_len=(\d+), available_[gc]pu_mem=([\d.]+) GB"
)
KV_RE = re.compile(
    r"KV Cache (?:is allocated|VA upper bound)\. (?:dtype: \S+, )?#tokens: (\d+), "
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)


def test_capacity_line_fields():
    line = logs.capacity_line(295931, 8192, 16384, 17, 262144, 14.8612)
    assert line == (
        "max_total_num_tokens=295931, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=17, context_len=262144, available_gpu_mem=14.86 GB"
    )
    assert CAPACITY_RE.fullmatch(line).groups() == ("295931", "8192", "16384", "17", "262144", "14.86")


def test_kv_and_mamba_lines():
    assert KV_RE.fullmatch(logs.kv_cache_line(455357, 2.6, 2.6)).group(1) == "455357"
    m = logs.mamba_cache_line(26, 0.7, 35.1, 2.0, 0.06)
    assert m.startswith(
        "Mamba Cache is allocated. max_mamba_cache_size: 26, conv_state size: 0.70GB, "
        "ssm_state size: 35.10GB intermediate_ssm_state_cache size: 2.00GB"
    )


def test_logger_prefix_and_milliseconds():
    out = io.StringIO()
    log = logs.Logger(out=out, access_out=out, log_ms=False, clock=lambda: 1_700_000_000.25)
    log.info("hello", logs.rank_prefix(0, 4))
    log.info("plain", logs.rank_prefix(0, 1))
    log.located("WARNING", "server_args.py:2364", "w")
    log.uvicorn("Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
    log.access("127.0.0.1:51872", "POST", "/generate", 200, "OK")
    lines = out.getvalue().splitlines()
    m = LINE_RE.match(lines[0])
    assert m and m.group(2) == " TP0" and m.group(3) == "hello"
    assert LINE_RE.match(lines[1]).group(2) == ""
    assert re.fullmatch(r"\[[\d\- :]+\] WARNING server_args\.py:2364: w", lines[2])
    assert re.fullmatch(
        r"\[[\d\- :]+\] INFO:     Uvicorn running on http://0\.0\.0\.0:30000 \(Press CTRL\+C to quit\)", lines[3]
    )
    assert re.fullmatch(r'\[[\d\- :]+\] INFO:     127\.0\.0\.1:51872 - "POST /generate HTTP/1\.1" 200 OK', lines[4])
    ms = io.StringIO()
    logs.Logger(out=ms, log_ms=True, clock=lambda: 1_700_000_000.25).info("x")
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.250\] x$", ms.getvalue())
    assert logs.rank_prefix(1, 2, 0, 2) == " DP0 TP1"


def test_log_level_filters_info():
    out = io.StringIO()
    log = logs.Logger(level="warning", out=out, access_out=out)
    log.info("quiet")
    log.warning("loud")
    assert "quiet" not in out.getvalue() and "loud" in out.getvalue()


def test_decode_batch_line_forms():
    plain = logs.decode_batch_line(
        running=19, tokens=187520, token_usage=0.53, gen_throughput=418.73, queue=0, accept_len=2.94, accept_rate=0.65
    )
    assert plain == (
        "Decode batch, #running-req: 19, #token: 187520, token usage: 0.53, accept len: 2.94, "
        "accept rate: 0.65, cuda graph: True, gen throughput (token/s): 418.73, #queue-req: 0"
    )
    hybrid = logs.decode_batch_line(
        running=1,
        tokens=2496,
        token_usage=0.0,
        gen_throughput=10.43,
        queue=0,
        hybrid=True,
        mamba_num=4,
        mamba_usage=0.13,
    )
    assert hybrid == (
        "Decode batch, #running-req: 1, #full token: 2496, full token usage: 0.00, mamba num: 4, "
        "mamba usage: 0.13, cuda graph: True, gen throughput (token/s): 10.43, #queue-req: 0"
    )


def test_greedy_text_is_deterministic_and_chunking_free():
    h = tokens.prompt_hash("Write a poem about GPUs")
    whole = tokens.text_range(h, 0, 300)
    assert len(whole.split()) == 300
    pieces = "".join(tokens.text_range(h, a, b) for a, b in [(0, 1), (1, 4), (4, 5), (5, 120), (120, 300)])
    assert pieces == whole
    assert tokens.text_range(tokens.prompt_hash("another prompt"), 0, 300) != whole
    assert tokens.output_seed(h, 0.0, 123, 456) == h
    assert tokens.output_seed(h, 0.7, 1, 0) != tokens.output_seed(h, 0.7, 2, 0)


def test_eos_positions_are_spread_and_fixed_by_the_prompt():
    pos = [tokens.eos_position(tokens.prompt_hash(f"p{i}"), 8, 1500) for i in range(500)]
    assert min(pos) >= 8 and max(pos) <= 1500
    assert sum(p < 64 for p in pos) > 100 and sum(p > 500 for p in pos) > 50
    assert pos[0] == tokens.eos_position(tokens.prompt_hash("p0"), 8, 1500)


def test_chat_rendering_counts_words_and_template():
    text, n = tokens.render_chat(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "one two three"}]},
        ]
    )
    assert n == 3 + (4 + 2) + (4 + 3)
    assert text.endswith("<|im_start|>assistant\n")
