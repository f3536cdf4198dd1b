"""Prefill batches as SGLang's PrefillAdder forms them, through HTTP and the emulator's log.

SGLang logs one `Prefill batch` line per prefill forward batch (scheduler_metrics_mixin.py
`log_prefill_stats`), so a long input cut by --chunked-prefill-size logs one line per chunk; a
batch takes waiting requests up to --max-prefill-tokens (`rem_input_tokens`, schedule_policy.py).
The lines are read with the project's one parser of SGLang's logs (sglang_log.parse_prefill_batches).
"""

from __future__ import annotations

import pytest
from sglang_utils import sglang_log

STARTUP = ("--emulator-startup-s", "0.1")


def _prefill_rows(e) -> list[dict]:
    return sglang_log.parse_prefill_batches(sglang_log.split_lines(e.log()))


def _generate_ids(e, prompts: list[list[int]], max_new: int = 2) -> None:
    """One /generate with a batch of token-id prompts: they reach the scheduler together."""
    body = {"input_ids": prompts if len(prompts) > 1 else prompts[0], "sampling_params": {"max_new_tokens": max_new}}
    status, reply = e.post_json("/generate", body)
    assert status == 200, reply


@pytest.mark.parametrize(
    "version,pending",
    [("0.5.9", [None, None, None]), ("0.5.10", [None, None, None]), ("0.5.23", [1500, 500, 0])],
)
def test_long_prompt_logs_one_prefill_line_per_chunk(emulator, version, pending):
    """2500 tokens at --chunked-prefill-size 1000: three prefill batches of 1000, 1000 and 500
    tokens, each logged; the chunked request counts in `#new-seq` of every batch it is in, its
    later chunks are no cache hits (add_chunked_req: prefix_len 0), and 0.5.11+ log what it has
    left as `#pending-token`. The first token comes after the last chunk only."""
    e = emulator(*STARTUP, "--emulator-sglang-version", version, "--chunked-prefill-size", "1000").wait_ready()
    before = len(_prefill_rows(e))
    _generate_ids(e, [[7] * 2500])
    rows = _prefill_rows(e)[before:]
    assert [r["new_token"] for r in rows] == [1000, 1000, 500]
    assert [r["new_seq"] for r in rows] == [1, 1, 1]
    assert [r["cached_token"] for r in rows] == [0, 0, 0]
    assert [r["running_req"] for r in rows] == [0, 0, 0]  # a request mid-prefill is not running yet
    assert [r["pending_token"] for r in rows] == pending
    assert all(r["input_throughput"] is not None and r["cuda_graph"] is False for r in rows)


@pytest.mark.parametrize("version,counted", [("0.5.9", 1000), ("0.5.23", 500)])
def test_a_prefill_line_is_logged_when_its_batch_ends(emulator, version, counted):
    """SGLang logs `Prefill batch` from process_batch_result_prefill, after the forward and after the
    batch's first tokens are streamed (0.5.9 scheduler_output_processor_mixin.py; 0.5.23
    scheduler_components/batch_result_processor.py), not when get_new_batch_prefill forms it. 2500
    tokens at --chunked-prefill-size 1000, one output token: the last chunk's line is stamped once
    all three chunks ran (the request's first token), before the reply; and `input throughput` of
    that 500-token chunk divides by the gap between the two chunks' ends, its own forward: the
    previous chunk's 1000 tokens on 0.5.9, its own 500 on 0.5.23 (logged at the batch's start, the
    gap was the previous chunk's forward)."""
    import time

    from tuner.emulator import model
    from tuner.emulator.profile import load_profile

    p = load_profile()
    forward = [model.prefill_time_ms(p, n, 1000) / 1000 for n in (1000, 1000, 500)]
    e = emulator(
        *STARTUP,
        "--emulator-sglang-version",
        version,
        "--chunked-prefill-size",
        "1000",
        env={"SGLANG_LOG_MS": "1"},
    ).wait_ready()
    before = len(_prefill_rows(e))
    sent = time.time()
    _generate_ids(e, [[7] * 2500], max_new=1)
    replied = time.time()
    rows = _prefill_rows(e)[before:]
    assert [r["new_token"] for r in rows] == [1000, 1000, 500]
    assert rows[-1]["input_throughput"] == pytest.approx(counted / forward[-1], rel=1e-3)
    last = sglang_log.parse_timestamp(rows[-1]["timestamp"])
    first_token = sent + p.t_request_overhead_ms / 1000 + sum(forward)
    assert first_token - 0.002 <= last <= replied + 0.002, (sent, last, replied)


@pytest.mark.parametrize(
    "version,chunk,batches",
    [
        # 0.5.9-0.5.12: add_one_req refuses a request of >= rem_input_tokens once the batch has
        # one: 1000 joins at 2000 left, not at 1000 left
        ("0.5.9", "8192", [(2, 2000), (2, 2000)]),
        ("0.5.12", "8192", [(2, 2000), (2, 2000)]),
        # 0.5.23 checks that only with chunking off; with it on the batch closes when the budget
        # reaches 0 (budget_state)
        ("0.5.23", "8192", [(3, 3000), (1, 1000)]),
        ("0.5.23", "-1", [(2, 2000), (2, 2000)]),
    ],
)
def test_concurrent_prompts_fill_a_prefill_batch_up_to_max_prefill_tokens(emulator, version, chunk, batches):
    """Four 1000-token prompts at once, --max-prefill-tokens 3000: the batches stop at SGLang's
    input budget (rem_input_tokens), not at the chunk size (8192) or without a cap (chunking off)."""
    e = emulator(
        *STARTUP,
        "--emulator-sglang-version",
        version,
        "--max-prefill-tokens",
        "3000",
        "--chunked-prefill-size",
        chunk,
    ).wait_ready()
    before = len(_prefill_rows(e))
    _generate_ids(e, [[7] * 1000 for _ in range(4)])
    rows = _prefill_rows(e)[before:]
    assert [(r["new_seq"], r["new_token"]) for r in rows] == batches


def test_default_max_prefill_tokens_is_sglangs(emulator):
    """Without the flag the batch budget is ServerArgs' default, 16384 (server_args.py), as the
    capacity line says; with chunking off two 8192-token prompts take two batches: the second is
    not below the 8192 left (add_one_req's `>=`), though both together are exactly 16384."""
    e = emulator(*STARTUP, "--emulator-sglang-version", "0.5.9", "--chunked-prefill-size", "-1").wait_ready()
    assert sglang_log.parse_capacity(sglang_log.split_lines(e.log()))["max_prefill_tokens"] == 16384
    before = len(_prefill_rows(e))
    _generate_ids(e, [[7] * 8192 for _ in range(2)])
    rows = _prefill_rows(e)[before:]
    assert [(r["new_seq"], r["new_token"]) for r in rows] == [(1, 8192), (1, 8192)]


def test_a_prompt_that_overflows_the_chunk_budget_is_cut_not_held_back(emulator):
    """At the defaults (chunk 8192, max prefill 16384) two 5000-token prompts: the second fills the
    first batch's chunk budget with its first 3192 tokens (add_one_req truncates to
    rem_chunk_tokens) and its last 1808 go first in the next batch (add_chunked_req)."""
    e = emulator(*STARTUP, "--emulator-sglang-version", "0.5.23").wait_ready()
    before = len(_prefill_rows(e))
    _generate_ids(e, [[7] * 5000 for _ in range(2)])
    rows = _prefill_rows(e)[before:]
    assert [(r["new_seq"], r["new_token"], r["pending_token"]) for r in rows] == [(2, 8192, 1808), (1, 1808, 0)]
    assert [r["running_req"] for r in rows] == [0, 1]


@pytest.mark.parametrize("shared", [True, False])
def test_the_requests_of_one_batch_arrive_together(shared):
    """SGLang's tokenizer sends a batch /generate to the scheduler as one message
    (tokenizer_manager.py `_send_batch_request`), so its requests are admissible at the same time.
    Submitted with the clock moving between them, each dated by its own submit, the second one was
    not yet ready when the first opened a batch (the HTTP test above failed so, now and then)."""
    import asyncio
    import random
    import time

    from tuner.emulator import simulate
    from tuner.emulator.engine import Scheduler
    from tuner.emulator.profile import load_profile
    from tuner.emulator.realtime import RealtimeDriver
    from tuner.emulator.request import Request

    p = load_profile()
    assert p.t_request_overhead_ms > 0
    s = Scheduler(p, simulate.engine_spec(p, simulate.SpecSetting(k=0)), random.Random(0))
    reqs = [Request(f"r{i}", 1000, 2, alpha=0.0) for i in range(2)]

    async def run() -> None:
        d = RealtimeDriver(s)
        d.start()
        arrival = asyncio.get_running_loop().time()
        d.submit(reqs[0], arrival if shared else None)
        time.sleep(0.05)  # the clock moves on between the two submits
        d.submit(reqs[1], arrival if shared else None)
        await asyncio.sleep(p.t_request_overhead_ms / 1000 + 0.5)
        await d.stop()

    asyncio.run(run())
    assert all(r.first_token_at is not None for r in reqs)
    assert (reqs[0].admitted_at == reqs[1].admitted_at) is shared
