"""Acceptance depends on the request (issue #11): temperature, top_p and the prompt's content."""

from __future__ import annotations

import math
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from emu_testlib import Emulator, spec_flags

from tuner.emulator import model, workload
from tuner.emulator.profile import load_profile, profile_from_mapping
from tuner.emulator.simulate import SpecSetting, closed_loop
from tuner.spec import prompts

SEED = load_profile()
SENSITIVE_PATH = Path(__file__).parent / "data" / "profiles" / "workload-sensitive.yaml"
SENSITIVE = load_profile(SENSITIVE_PATH)

# Natural English of this project's own making (a dataset row would look like this).
PROSE = (
    "When the operators of a busy inference service tune speculative decoding, they usually start from the "
    "numbers that a benchmark prints and then ask whether those numbers will hold for the traffic that the "
    "service really sees. The answer depends on the prompts. A chat assistant that is asked to rewrite a "
    "paragraph, to summarise a meeting or to explain a piece of code will see its own earlier words again and "
    "again, and the draft head can guess the next word of such an answer with some confidence. A benchmark "
    "that sends random tokens gives the draft head nothing to hold on to, and most of its guesses are thrown "
    "away by the target model. The same is true of sampling: at a temperature of zero the target model always "
    "picks its most likely word, which the draft head often predicts, while at a higher temperature the target "
    "model picks among several words and the draft is right less often. None of this changes the cost of a "
    "step on the hardware, but all of it changes how many tokens each step produces, and so the depth of "
    "speculation that serves the most requests. A careful operator therefore measures with prompts that look "
    "like the real ones, with the sampling settings that the real clients use, and keeps the measurement "
    "long enough that the noise of the machine does not decide the answer. The tuner in this project does "
    "exactly that, and the emulator that stands in for the server when no graphics card is at hand has to "
    "behave in the same way, or the tuner could never be tested against the effects it is meant to find."
)


def test_content_score_orders_random_prose_and_repetition():
    rng = random.Random(1)
    random_ids = [rng.randrange(0, 150_000) for _ in range(256)]
    prose = PROSE.split()
    repetitive = ("please summarise the following log line " * 40).split()[:256]
    s_rand, s_prose, s_rep = (workload.content_score(t) for t in (random_ids, prose, repetitive))
    assert s_rand is not None and s_prose is not None and s_rep is not None
    assert s_rand < 0.01 < 0.05 < s_prose < 0.15 < 0.5 < s_rep
    assert workload.content_score([7]) is None


def test_the_seed_calibration_prompts_keep_the_profile_alpha():
    """The seed's alpha was fitted with the tuner's synthetic prompts: token ids for /generate (no
    repeats), and unique words in the calibration's HTTP check: their factor is 1 (within 1%)."""
    a0 = SEED.alpha_at(0.0)
    ids = prompts.prompt_ids(3, 256)
    assert workload.request_alpha(SEED, 0.0, 1.0, ids) == pytest.approx(a0, abs=0.0005)
    unique_words = [f"w3x{i}" for i in range(256)]
    assert workload.request_alpha(SEED, 0.0, 1.0, unique_words) == pytest.approx(a0, abs=1e-12)
    # the OpenAI endpoints' word prompts repeat their few hundred words and accept a little more
    words = prompts.prompt_words(3, 256)
    assert a0 < workload.request_alpha(SEED, 0.0, 1.0, words) < 0.995


def test_top_p_moves_alpha_back_towards_greedy():
    p = SENSITIVE
    a0, a7 = p.alpha_at(0.0), p.alpha_at(0.7)
    assert workload.sampled_alpha(p, 0.7, 1.0) == pytest.approx(a7)
    assert workload.sampled_alpha(p, 0.7, 0.5) == pytest.approx(a0 + (a7 - a0) * 0.5)
    assert workload.sampled_alpha(p, 0.0, 0.1) == pytest.approx(a0)  # greedy ignores top_p
    steep = profile_from_mapping({**_raw(SENSITIVE_PATH), "top_p_exponent": 3.0})
    assert workload.sampled_alpha(steep, 0.7, 0.5) == pytest.approx(a0 + (a7 - a0) * 0.125)


def _raw(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def test_short_prompts_and_a_zero_sensitivity_leave_the_reference_alpha():
    p = SENSITIVE
    assert workload.request_alpha(p, 0.0, 1.0, ["hello"] * 10) == pytest.approx(p.alpha_at(0.0))
    flat = profile_from_mapping({**_raw(SENSITIVE_PATH), "prompt_sensitivity": 0.0})
    assert workload.request_alpha(flat, 0.0, 1.0, PROSE.split()) == pytest.approx(p.alpha_at(0.0))


def test_a_steep_sensitivity_far_from_its_reference_saturates_not_overflows():
    """exp(-sensitivity x (score - ref)) past exp's range raised OverflowError on every request
    (a 500 for each), for finite values the profile accepts."""
    steep = profile_from_mapping({**_raw(SENSITIVE_PATH), "prompt_sensitivity": 1e4, "prompt_score_ref": 0.9})
    a = workload.request_alpha(steep, 0.0, 1.0, PROSE.split())
    assert 0.0 <= a < 1.0
    assert workload.content_factor(steep, 0.0, 100) == pytest.approx(math.exp(700.0))


def best_depth(alpha: float, concurrency: int) -> int:
    rates = {
        k: closed_loop(
            SENSITIVE,
            SpecSetting(k),
            concurrency=concurrency,
            n_requests=4 * concurrency,
            input_len=256,
            output_len=400,
            alpha=alpha,
            seed=5,
        ).aggregate_tok_s
        for k in range(0, 7)
    }
    return max(rates, key=rates.__getitem__)


def test_the_winner_depends_on_the_workload_on_this_profile():
    ids = prompts.prompt_ids(1, 256)
    prose = PROSE.split()
    random_greedy = workload.request_alpha(SENSITIVE, 0.0, 1.0, ids)
    prose_greedy = workload.request_alpha(SENSITIVE, 0.0, 1.0, prose)
    prose_sampled = workload.request_alpha(SENSITIVE, 0.7, 1.0, prose)
    assert random_greedy < prose_sampled < prose_greedy
    winners = {
        name: best_depth(a, 1)
        for name, a in (("random", random_greedy), ("prose", prose_greedy), ("sampled", prose_sampled))
    }
    assert winners["prose"] >= winners["random"] + 2, winners
    assert winners["random"] < winners["sampled"] < winners["prose"], winners


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    e = Emulator(
        tmp_path_factory.mktemp("workload"),
        [
            *spec_flags(4),
            "--emulator-profile",
            str(SENSITIVE_PATH),
            "--emulator-startup-s",
            "0.2",
            "--random-seed",
            "3",
        ],
    )
    try:
        yield e.wait_ready()
    finally:
        e.kill()


def accept_length(e: Emulator, bodies: list[dict]) -> float:
    """completion tokens / verify steps over the requests, sent at once (acceptance does not depend
    on the batch)."""
    with ThreadPoolExecutor(len(bodies)) as pool:
        outs = list(pool.map(lambda b: e.post_json("/generate", b), bodies))
    tokens = verify = 0
    for status, out in outs:
        assert status == 200, out
        meta = out["meta_info"]
        tokens += meta["completion_tokens"] - 1
        verify += meta["spec_verify_ct"]
    return tokens / verify


def test_over_http_prose_random_tokens_and_sampling_accept_as_the_rule_says(srv):
    sp = {"max_new_tokens": 240, "ignore_eos": True}
    cases = {
        "prose": (
            [{"text": PROSE + f" ({i})", "sampling_params": {**sp, "temperature": 0}} for i in range(4)],
            0.0,
            PROSE.split(),
        ),
        "random": (
            [{"input_ids": prompts.prompt_ids(i, 256), "sampling_params": {**sp, "temperature": 0}} for i in range(4)],
            0.0,
            prompts.prompt_ids(0, 256),
        ),
        "sampled": (
            [{"text": PROSE + f" ({i})", "sampling_params": {**sp, "temperature": 0.7}} for i in range(4)],
            0.7,
            PROSE.split(),
        ),
        "nucleus": (
            [
                {"text": PROSE + f" ({i})", "sampling_params": {**sp, "temperature": 0.7, "top_p": 0.5}}
                for i in range(4)
            ],
            0.7,
            PROSE.split(),
        ),
    }
    measured = {}
    for name, (bodies, temp, toks) in cases.items():
        top_p = bodies[0]["sampling_params"].get("top_p", 1.0)
        expected = model.tau(workload.request_alpha(SENSITIVE, temp, top_p, toks), 4)
        measured[name] = accept_length(srv, bodies)
        assert measured[name] == pytest.approx(expected, rel=0.07), (name, measured[name], expected)
    assert measured["random"] < measured["sampled"] - 0.1 < measured["prose"] - 0.4
    assert measured["sampled"] < measured["nucleus"] < measured["prose"]


def test_openai_requests_carry_temperature_and_top_p(srv):
    def one(i, temp, top_p):
        body = {
            "messages": [{"role": "user", "content": PROSE + f" [{i}]"}],
            "max_tokens": 200,
            "ignore_eos": True,
            "temperature": temp,
            "top_p": top_p,
            "stream": True,
        }
        events = [ev for ev in srv.stream("/v1/chat/completions", body) if ev != "[DONE]"]
        deltas = [ev for ev in events if ev["choices"] and ev["choices"][0]["delta"].get("content")]
        return sum(len(ev["choices"][0]["delta"]["content"].split()) for ev in deltas), len(deltas)

    def chat(temp, top_p):
        with ThreadPoolExecutor(4) as pool:
            counts = list(pool.map(lambda i: one(i, temp, top_p), range(4)))
        return sum(t for t, _ in counts) / sum(c for _, c in counts)  # one chunk per verify step

    greedy, hot, nucleus = chat(0.0, 1.0), chat(1.0, 1.0), chat(1.0, 0.3)
    assert hot < nucleus < greedy
    status, out = srv.post_json("/v1/completions", {"prompt": "x y z", "max_tokens": 4, "top_p": 0})
    assert status == 400 and "top_p" in out["message"]
