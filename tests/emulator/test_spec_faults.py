"""Faults for the correctness and drift gate, measured through HTTP (docs/emulator.md "Faults").

spec-diverge=N and spec-repeat=N break a speculating server's text from token N on and leave a
server without speculation as it was; accept-drift=P lowers the acceptance logits by P per 100
requests served (a restart restores them); accept-collapse=N rejects every draft once N requests
were served, with the text unchanged. The references are what the emulator serves without the fault.
Prompts are 8 words, below prompt_min_tokens, so every request has the profile's reference
acceptance (docs/emulator.md "Acceptance"), and the expected accept length is a formula of it.
"""

from __future__ import annotations

import math

import pytest
from emu_testlib import spec_flags

from tuner.emulator import model
from tuner.emulator.profile import load_profile

SEED = load_profile()
PROMPTS = [f"prompt number {i} asks the server for words" for i in range(6)]
FAST = ("--emulator-startup-s", "0.1", "--random-seed", "7")


def _texts(e, prompts: list[str], n: int) -> list[list[str]]:
    body = {"text": prompts, "sampling_params": {"temperature": 0, "max_new_tokens": n, "ignore_eos": True}}
    status, out = e.post_json("/generate", body)
    assert status == 200, out
    return [o["text"].split() for o in out]


def _accept_length(e, prompts: list[str], n: int = 96) -> tuple[float, list[dict], list[list[str]]]:
    """Accepted tokens per verify step over a concurrent batch, from each request's meta_info."""
    body = {"text": prompts, "sampling_params": {"temperature": 0, "max_new_tokens": n, "ignore_eos": True}}
    status, out = e.post_json("/generate", body)
    assert status == 200, out
    metas = [o["meta_info"] for o in out]
    tokens = sum(m["completion_tokens"] - 1 for m in metas)  # the first token comes from prefill
    verify = sum(m["spec_verify_ct"] for m in metas)
    return tokens / verify, metas, [o["text"].split() for o in out]


def _serve(e, requests: int) -> None:
    """`requests` more requests served (one token each, so they cost a prefill only)."""
    body = {"text": [f"filler {i}" for i in range(requests)], "sampling_params": {"max_new_tokens": 1}}
    assert e.post_json("/generate", body)[0] == 200


@pytest.mark.parametrize("n", [0, 10])
def test_spec_diverge(emulator, n):
    wrong = emulator(*spec_flags(3), "--emulator-fault", f"spec-diverge={n}", *FAST)
    plain = emulator("--emulator-fault", f"spec-diverge={n}", *FAST)
    right = emulator(*spec_flags(3), *FAST)
    for e in (wrong, plain, right):
        e.wait_ready(60)
    ref = _texts(right, PROMPTS, 40)
    assert _texts(plain, PROMPTS, 40) == ref  # without speculation the fault changes nothing
    for got, want in zip(_texts(wrong, PROMPTS, 40), ref, strict=True):
        assert got[:n] == want[:n]
        assert all(a != b for a, b in zip(got[n:], want[n:], strict=True)), (got, want)
    # streamed chunks carry the same wrong text
    body = {"text": PROMPTS[0], "stream": True, "sampling_params": {"temperature": 0, "max_new_tokens": 40}}
    body["sampling_params"]["ignore_eos"] = True
    events = [ev for ev in wrong.stream("/generate", body) if ev != "[DONE]"]
    assert events[-1]["text"].split() == _texts(wrong, PROMPTS[:1], 40)[0]
    assert wrong.get_json("/server_info")["emulator"]["faults"] == [f"spec-diverge={n}"]


def test_spec_repeat(emulator):
    n = 12
    wrong = emulator(*spec_flags(2), "--emulator-fault", f"spec-repeat={n}", *FAST).wait_ready(60)
    plain = emulator("--emulator-fault", f"spec-repeat={n}", *FAST).wait_ready(60)
    ref = _texts(plain, PROMPTS, 60)
    for got, want in zip(_texts(wrong, PROMPTS, 60), ref, strict=True):
        assert got[:n] == want[:n] and got[n:] != want[n:]
        tail = got[n:]
        period = next(p for p in range(1, 9) if all(tail[i] == tail[i + p] for i in range(len(tail) - p)))
        assert period <= 8  # a short cycle, repeated to the end
        assert len(tail) >= 4 * period
    # the OpenAI endpoint serves the same text
    status, out = wrong.post_json(
        "/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 60, "temperature": 0, "ignore_eos": True}
    )
    assert status == 200 and out["choices"][0]["text"].split() == _texts(wrong, PROMPTS[:1], 60)[0]


def test_accept_drift_falls_with_requests_served_and_a_restart_restores_it(emulator):
    p_per_100, k = 5.0, 3
    args = (*spec_flags(k), "--emulator-fault", f"accept-drift={p_per_100:g}", *FAST)
    a0 = SEED.alpha_at(0.0)

    def expected(served: int) -> float:
        z = math.log(a0 / (1 - a0)) - p_per_100 * served / 100.0
        return model.tau(1 / (1 + math.exp(-z)), k)

    e = emulator(*args).wait_ready(60)
    fresh, _, _ = _accept_length(e, PROMPTS * 2)
    # one request served so far: SGLang's own warm-up request (it counts in num_requests_total)
    assert fresh == pytest.approx(expected(1), rel=0.05)
    _serve(e, 48)
    served = 1 + 12 + 48
    drifted, _, _ = _accept_length(e, PROMPTS * 2)
    assert drifted == pytest.approx(expected(served), rel=0.05)
    assert drifted < fresh * 0.92
    e.terminate()
    again = emulator(*args).wait_ready(60)
    restored, _, _ = _accept_length(again, PROMPTS * 2)
    assert restored == pytest.approx(expected(1), rel=0.05)


def test_accept_collapse_rejects_every_draft_and_keeps_the_text(emulator):
    e = emulator(*spec_flags(3), "--emulator-fault", "accept-collapse=20", *FAST).wait_ready(60)
    before, _, texts_before = _accept_length(e, PROMPTS, 48)
    assert before > 3.0  # the seed machine accepts nearly every draft at temperature 0
    _serve(e, 20)
    after, metas, texts_after = _accept_length(e, PROMPTS, 48)
    assert after == 1.0
    for m in metas:
        hist = m["spec_accept_histogram"]
        # SGLang's list grows only as far as a step needed: no step accepted a draft, one slot
        assert hist == [m["spec_verify_ct"]]
        assert m["spec_accept_token_num"] == 0
    assert texts_after == texts_before  # the target's tokens are still the right ones
