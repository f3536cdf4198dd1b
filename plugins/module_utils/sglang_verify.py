# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""The correctness and acceptance-drift gate's rules, written once (docs/tuner.md "Verify").

Speculative decoding is meant to be lossless: at temperature 0 a speculative server must return
the text a server without speculation returns. This module compares the greedy outputs of a
configuration with stored outputs of a true no-speculation deployment of the same model and
server version on the same prompts (the *baseline*), looks for outputs that degenerate into a
repeated cycle, and checks the acceptance length against what the sweep measured and against
itself over the gate's run (drift). Both the tuner (``python -m tuner verify`` and the sweep's
phase, tuner/verify/) and the role's ``sglang_verify`` module (``verify_outputs``) call it, so
the rule is written in one place. Pure functions on plain dicts and lists; standard library only,
Python 3.8 syntax; installed with the tuner as ``sglang_utils.sglang_verify``.

Sources of the rules:
- exact parity when both sides run deterministic: SGLang's own parity test (sgl-project/sglang
  python/sglang/test/kits/spec_server_kits.py ``SpecParityKit``: greedy, 48 new tokens, a
  non-speculative reference server first, ``assertEqual`` per prompt); batch-invariant kernels
  come with ``--enable-deterministic-inference`` (sgl-project/sglang PR #10645, docs
  advanced_features/deterministic_inference.md);
- otherwise at least 60% exact on short greedy continuations: vLLM's speculative-decoding e2e
  tests (vllm-project/vllm:tests/v1/e2e/test_spec_decode.py: "expect at least 60% of the prompts
  to match exactly", ``assert matches > int(0.6 * len(ref_outputs))``);
- acceptance above 1.05 and not below 95% of the configuration's own measured value: vLLM's
  acceptance-length tests; "if the accept length collapsed to 1.0 ... nothing in CI would
  notice" (sgl-project/sglang-jax PR #1586).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Mapping, Sequence

try:  # the collection's copy (Ansible module), else the tuner's installed one
    from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_adaptive import (  # type: ignore[import-not-found]
        load_per_bs,
        pad_to_graph_bs,
        unspeculated_bucket,
    )
    from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_releases import (  # type: ignore[import-not-found]
        DETERMINISTIC_SINCE,
        release_key,
        stream_text_incremental,
    )
except ImportError:  # pragma: no cover - outside Ansible
    from sglang_utils.sglang_adaptive import (  # type: ignore[import-not-found,no-redef]
        load_per_bs,
        pad_to_graph_bs,
        unspeculated_bucket,
    )
    from sglang_utils.sglang_releases import (  # type: ignore[import-not-found,no-redef]
        DETERMINISTIC_SINCE,
        release_key,
        stream_text_incremental,
    )

__all__ = [
    "BASELINE_FORMAT",
    "DETERMINISTIC_SINCE",
    "EXACT_SHARE_MIN",
    "ACCEPT_FLOOR",
    "ACCEPT_OF_MEASURED",
    "ACCEPT_SE_Z",
    "DRIFT_Z",
    "DRIFT_MIN_DROP",
    "DEFAULT_SETTINGS",
    "supports_deterministic",
    "deterministic_refused",
    "prompt_set_hash",
    "request_order",
    "load_prompt",
    "generate_body",
    "response_row",
    "StreamRow",
    "accept_histogram",
    "baseline_problems",
    "baseline_file_errors",
    "baseline_mismatch",
    "first_divergence",
    "find_cycle",
    "acceptance_drift",
    "acceptance_se",
    "floor_exemption",
    "rule_for",
    "backend_difference",
    "verifies_tree",
    "exact_round",
    "judge",
    "verdict_line",
]

BASELINE_FORMAT = 1
DETERMINISTIC_FLAG = "enable-deterministic-inference"
EXACT_SHARE_MIN = 0.60  # outside deterministic mode: share of short prompts that must match exactly
ACCEPT_FLOOR = 1.05  # acceptance length must stay above this (1.0 = no draft token ever accepted)
ACCEPT_OF_MEASURED = 0.95  # ... and not below this share of what the sweep measured for the configuration
# (beyond ACCEPT_SE_Z standard errors of the gate's own prompt-to-prompt spread, `acceptance_se`)
ACCEPT_SE_Z = 3.0
# A drop of the long prompts' second sends against their first beyond DRIFT_Z standard errors and
# beyond DRIFT_MIN_DROP of the first sends' acceptance is drift. 4, not 3: the gate judges every
# speculative configuration of a sweep, and a false alarm excludes a correct one (perhaps the
# best). With the noise estimate below (calibrated: the drop over it has sd about 1 on a server
# whose acceptance is drawn afresh every verify pass), a healthy configuration failed 1 gate run in
# 600 at 3 and 1 in 12,000 at 4; a drift of 0.84 on the logit scale over the run is caught in 92-100%
# of runs (bench/drift_rule.md, docs/tuner.md "Pass rules").
DRIFT_Z = 4.0
DRIFT_MIN_DROP = 0.05
DRIFT_BLOCKS = 8  # each long output is cut into 8 blocks of equal tokens: their spread is the noise
CYCLE_MAX_PERIOD = 32  # a loop of up to 32 tokens ...
CYCLE_MIN_REPEATS = 4  # ... repeated at least 4 times at the end of an output ...
CYCLE_MIN_SPAN = 24  # ... over at least 24 tokens is degeneration

# What the gate sends (the settings are part of the baseline's identity): short greedy
# continuations as SpecParityKit (48 new tokens), and a few long ones for loops and drift.
DEFAULT_SETTINGS = {"short_tokens": 48, "short_prompts": 24, "long_tokens": 384, "long_prompts": 4}


def supports_deterministic(version: object) -> bool:
    """Whether this SGLang release has --enable-deterministic-inference (False when unknown)."""
    key = release_key(version)
    return bool(key) and key >= release_key(DETERMINISTIC_SINCE)


def prompt_set_hash(prompts: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the prompts as sent ([{"id", "text"}, ...], in order): the prompt set's identity."""
    body = json.dumps([[str(p["id"]), str(p["text"])] for p in prompts], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def request_order(n_short: int, n_long: int) -> list[tuple[str, int]]:
    """The order the gate sends its requests in: the long prompts, the short ones, then the long
    prompts again: [("long", j), ..., ("short", i), ..., ("again", j), ...].

    A drift per request served (vllm-project/vllm#41838) is measured on the same prompts, once at
    the start of the run and once after every other request. Acceptance differs from prompt to
    prompt (code and maths accept more drafts than chat: SPEED-Bench, arXiv 2604.09557), so
    windows of the run in arrival order compare different prompts, not an early server with a late
    one: on servers whose prompts differ that way, an arrival-order comparison failed healthy
    configurations (the short continuations, done early, against the long outputs' tails).

    The gate keeps its concurrency in flight until the last second send ends: once every request
    of this order is sent, a free slot sends the short prompts again, in order (`load_prompt`;
    their answers are not judged). So every judged request runs at the same batch size, the first
    sends and the second alike: a per-batch-size schedule drafts to a depth by batch size, and
    second sends finishing alone at the end of the run ran at another depth than the first (a
    drift the server did not have), and a config with 0 steps below the gate's batch only would
    have its floor judged on batches the run barely reached (`floor_exemption`)."""
    return (
        [("long", j) for j in range(n_long)]
        + [("short", i) for i in range(n_short)]
        + [("again", j) for j in range(n_long)]
    )


def load_prompt(k: int, n_short: int) -> int:
    """The short prompt the k-th load request sends (`request_order`): the short prompts in order,
    again and again."""
    return k % n_short


def generate_body(text: str, max_new: int, stream: bool) -> dict[str, Any]:
    """The gate's request to SGLang's native `/generate`: greedy, `max_new` new tokens."""
    return {"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": max_new}, "stream": stream}


def response_row(pid: str, body: Mapping[str, Any], now: float) -> tuple[dict[str, Any], list[tuple[float, int, int]]]:
    """One unstreamed `/generate` answer as the gate's output row (text, `output_ids`, and
    `meta_info`'s `completion_tokens` and `spec_verify_ct`), with its one (arrival, tokens, verify
    passes) step when the server reported both counts."""
    meta = body.get("meta_info") or {}
    ids = body.get("output_ids")
    t, v = meta.get("completion_tokens"), meta.get("spec_verify_ct")
    row = {
        "id": pid,
        "text": str(body.get("text") or ""),
        "output_ids": ids if isinstance(ids, list) else None,
        "completion_tokens": t,
        "spec_verify_ct": v,
        "accept_hist": accept_histogram(meta),
    }
    return row, ([(now, t, v)] if isinstance(t, int) and isinstance(v, int) else [])


def accept_histogram(meta: Mapping[str, Any]) -> list[int] | None:
    """The request's verify passes by number of drafts accepted (index i: passes that accepted i
    drafts), from its finished chunk's `meta_info`: `spec_accept_histogram` through SGLang 0.5.20,
    `spec_correct_drafts_histogram` beside it from 0.5.12 and alone from 0.5.21 (tokenizer_manager.py);
    None when absent or malformed."""
    for key in ("spec_correct_drafts_histogram", "spec_accept_histogram"):
        h = meta.get(key)
        if isinstance(h, list) and h and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in h):
            return list(h)
    return None


# A request answered 5xx, or a stream aborted with one, is the server busy: sent again this many
# extra times, this far apart, by the tuner's gate (tuner/verify/probe.py) and the role's module
# (plugins/modules/sglang_verify.py) alike (docs/tuner.md "Pass rules").
RETRIES_5XX = 2
RETRY_WAIT_S = 0.5


class StreamRow:
    """One streamed `/generate` answer folded chunk by chunk into the gate's output row and its
    steps: (arrival, new tokens, new verify passes) whenever the cumulative `completion_tokens` or
    `spec_verify_ct` of a chunk's `meta_info` grew. SGLang sends `spec_verify_ct` (and the
    acceptance histogram) on the finished chunk only (tokenizer_manager.py fills the speculative
    metrics `if state.finished`), so a real server's answer is one step; a server that sends the
    counts on every chunk gives more. The text and ids are cumulative in SGLang's default streaming;
    under `--incremental-streaming-output` each chunk carries only its own, and they are joined."""

    def __init__(self, pid: str, server_version: object = None) -> None:
        self.pid = pid
        # whether incremental ids come with incremental text: by the release when it is known
        # (sglang_releases.stream_text_incremental), else learnt from the first delta that does
        # not extend the text so far
        self.text_incremental = stream_text_incremental(server_version)
        self.text = ""
        self.ids: list[Any] | None = None
        self.tokens = 0
        self.verifies = 0
        self.hist: list[int] | None = None
        self.steps: list[tuple[float, int, int]] = []
        self.abort_status: int | None = None  # the status of an abort the server ended the stream with

    @property
    def busy(self) -> bool:
        """The server aborted the stream with a 5xx (the queue full, a timeout): the request may be
        sent again (RETRIES_5XX)."""
        return self.abort_status is not None and 500 <= self.abort_status < 600

    def add(self, chunk: Mapping[str, Any], now: float) -> str | None:
        """Fold one chunk in; the server's error, when the chunk carries one (the caller raises)."""
        if "error" in chunk:
            return str(chunk["error"])[:160]
        meta = chunk.get("meta_info") or {}
        finish = meta.get("finish_reason")
        if isinstance(finish, Mapping) and finish.get("type") == "abort":
            # a streamed request SGLang aborts (queue full, a waiting or running timeout, a retraction
            # without a KV backup) ends in a normal-looking chunk and [DONE], not an error
            # (tokenizer_manager.py `_handle_abort_finish_reason` raises for unstreamed ones only):
            # a cut answer, never an output to compare
            status = finish.get("status_code")
            self.abort_status = status if isinstance(status, int) else None
            return f"aborted by the server (status {status}): {str(finish.get('message'))[:140]}"
        ct = meta.get("completion_tokens")
        new_ids = chunk.get("output_ids")
        incremental = False
        if isinstance(new_ids, list):
            # `--incremental-streaming-output` (0.5.10+; `--stream-output` in 0.5.9) sends each
            # chunk's new ids only while completion_tokens stays cumulative (tokenizer_manager.py):
            # the ids so far plus the chunk's add up to it; a cumulative chunk's alone do
            have = len(self.ids or [])
            incremental = bool(have) and isinstance(ct, int) and have + len(new_ids) == ct and len(new_ids) != ct
            self.ids = [*(self.ids or []), *new_ids] if incremental else list(new_ids)
        text = chunk.get("text")
        if isinstance(text, str) and text:
            # 0.5.10+ sends the new text with the new ids; 0.5.9 keeps the text cumulative
            # (0.5.9: a chunk of ids with no new text, an EOS or a held-back byte, repeats the
            # text). A delta may begin with the whole text so far (degenerate, repeating output:
            # what the gate looks for), so the release decides where it is known.
            if incremental and self.text_incremental is None and self.text and not text.startswith(self.text):
                self.text_incremental = True
            cumulative = not incremental or (
                not self.text_incremental and bool(self.text) and text.startswith(self.text)
            )
            self.text = text if cumulative else self.text + text
        self.hist = accept_histogram(meta) or self.hist
        t, v = meta.get("completion_tokens"), meta.get("spec_verify_ct")
        if isinstance(t, int) and v is None and meta.get("finish_reason") is not None:
            # SGLang leaves the speculative counts out of an answer the prefill finished (its one
            # token had no verify pass: tokenizer_manager.py `spec_verify_ct[i] > 0`): its finished
            # chunk still counts the token (earlier chunks never carry the counts)
            v = self.verifies
        if isinstance(t, int) and isinstance(v, int) and (t > self.tokens or v > self.verifies):
            self.steps.append((now, t - self.tokens, v - self.verifies))
            self.tokens, self.verifies = t, v
        return None

    def row(self) -> tuple[dict[str, Any], list[tuple[float, int, int]]]:
        out = {
            "id": self.pid,
            "text": self.text,
            "output_ids": self.ids,
            "completion_tokens": self.tokens,
            "spec_verify_ct": self.verifies,
            "accept_hist": self.hist,
        }
        return out, self.steps


def _outputs_ok(rows: Any, what: str) -> list[str]:
    problems = []
    if not isinstance(rows, list) or not rows:
        return [f"{what}: a non-empty list of outputs is required"]
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("text"), str):
            problems.append(f"{what}[{i}]: needs an id and a text")
        elif row.get("output_ids") is not None and not isinstance(row.get("output_ids"), list):
            problems.append(f"{what}[{i}]: output_ids must be a list")
    return problems


def deterministic_refused(algorithm: Any) -> bool:
    """An algorithm SGLang does not start with --enable-deterministic-inference: UNO ("UNO does not
    support --enable-deterministic-inference because its sampling path does not use per-request
    seeds.", 0.5.20-0.5.23 arg_groups/speculative_hook.py `_handle_uno`): the exact round leaves it out."""
    return str(algorithm or "").strip().upper() == "UNO"


def verifies_tree(algorithm: Any, topk: Any) -> bool:
    """Whether a configuration verifies a draft tree, never held to exact parity (`rule_for`): topk
    above 1, or NGRAM, whose topk SGLang sets to its BFS breadth, 10 by default, whatever the flag
    says (0.5.9 server_args.py, 0.5.23 arg_groups/speculative_hook.py `speculative_ngram_max_bfs_breadth`)."""
    n = topk if isinstance(topk, int) and not isinstance(topk, bool) else 1
    return n > 1 or str(algorithm or "").strip().upper() == "NGRAM"


def baseline_file_errors(path: Any, enabled: Any = True, var: str = "sglang_server_verify_baseline") -> list[str]:
    """Problems with the baseline file at `path` on the controller, each naming `var` (empty when
    usable, or when the check is off): the role's check before any host is touched (the filter
    sglang_verify_baseline_errors), so a typo or a wrong file fails before the server restarts."""
    if not enabled or str(enabled).strip().lower() in ("false", "no", "0", "off"):
        return []
    text = "" if path is None else str(path).strip()
    if not text:
        return [f"{var} is empty: verify_outputs needs the baseline file (python -m tuner verify --capture writes one)"]
    if not os.path.isfile(text):
        return [f"{var}={text}: no such file on the controller"]
    try:
        with open(text, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [f"{var}={text}: not a readable JSON baseline ({exc})"]
    problems = baseline_problems(doc)
    if not problems and not all(isinstance(r.get("prompt"), str) for r in doc["short"] + doc["long"]):
        problems = ["its outputs do not carry their prompts (write it with python -m tuner verify --capture)"]
    return [f"{var}={text}: not a baseline file: {p}" for p in problems[:4]]


def baseline_problems(baseline: Any) -> list[str]:
    """What makes a parsed baseline file unusable (empty when it is usable)."""
    if not isinstance(baseline, dict):
        return ["not a JSON object"]
    problems = []
    if baseline.get("format") != BASELINE_FORMAT:
        problems.append(f"format {baseline.get('format')!r} is not {BASELINE_FORMAT}")
    for key in ("server_version", "model", "prompt_set_sha256"):
        if not isinstance(baseline.get(key), str) or not baseline.get(key):
            problems.append(f"{key} is missing")
    if not isinstance(baseline.get("settings"), dict):
        problems.append("settings is missing")
    if baseline.get("speculative"):
        problems.append("it was captured from a speculative server ({})".format(baseline.get("speculative")))
    problems += _outputs_ok(baseline.get("short"), "short")
    problems += _outputs_ok(baseline.get("long"), "long")
    if problems:
        return problems
    # a file cut or edited: its rows no longer the prompt set it names (the module compared the
    # rows' hash; the tuner compared only the name, and judged the rows left)
    settings = baseline["settings"]
    for key, part in (("short_prompts", "short"), ("long_prompts", "long")):
        want = settings.get(key)
        if isinstance(want, int) and not isinstance(want, bool) and len(baseline[part]) != want:
            problems.append(f"{part}: {len(baseline[part])} outputs where its settings say {want} (cut or edited)")
    rows = baseline["short"] + baseline["long"]
    if not problems and all(isinstance(r.get("prompt"), str) for r in rows):
        sent = prompt_set_hash([{"id": r["id"], "text": r["prompt"]} for r in rows])
        if sent != baseline["prompt_set_sha256"]:
            problems.append("its outputs' prompts are not the prompt set it names (prompt_set_sha256): cut or edited")
    return problems


def baseline_mismatch(
    baseline: Mapping[str, Any],
    model: Any,
    server_version: Any,
    prompt_sha256: str,
    settings: Mapping[str, Any],
    numerics: Mapping[str, Any] | None = None,
) -> list[str]:
    """What differs between a baseline and the server/prompts it would be compared with: one
    sentence per difference (empty when it may be used). Never compare across these. `numerics`:
    the server's arguments its greedy outputs depend on (tp size, dtype, quantization, KV cache
    dtype: sglang_server_info's `numerics`), held to the baseline's where both say."""
    diffs = []
    raw = baseline.get("numerics")
    kept: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    for key, now in sorted((numerics or {}).items()):
        # a baseline file from before these were kept says nothing of them; a null is a value
        # (no quantization), and both sides run the same release, so they read alike
        then = kept.get(key)
        if key in kept and then != now and str(then) != str(now):
            diffs.append(f"server argument {key}: the baseline's server ran {then!r}, this one runs {now!r}")
    if str(baseline.get("model")) != str(model):
        diffs.append("model: the baseline is of {!r}, the server serves {!r}".format(baseline.get("model"), model))
    if str(baseline.get("server_version")) != str(server_version):
        diffs.append(
            "server version: the baseline is of SGLang {}, the server runs {}".format(
                baseline.get("server_version"), server_version
            )
        )
    if baseline.get("prompt_set_sha256") != prompt_sha256:
        diffs.append(
            "prompt set: the baseline's {} (sha256 {}...) is not the prompts sent now (sha256 {}...)".format(
                baseline.get("prompt_set") or "prompts",
                str(baseline.get("prompt_set_sha256"))[:12],
                str(prompt_sha256)[:12],
            )
        )
    given = baseline.get("settings") or {}
    for key in sorted(set(given) | set(settings)):
        if given.get(key) != settings.get(key):
            diffs.append(f"setting {key}: the baseline has {given.get(key)!r}, now {settings.get(key)!r}")
    return diffs


def _tokens(row: Mapping[str, Any]) -> list[Any]:
    """The output as a token sequence: the server's output_ids, else its words."""
    ids = row.get("output_ids")
    if isinstance(ids, list):
        return ids
    return str(row.get("text") or "").split()


def first_divergence(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first token where two outputs differ (None when they are equal)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else n


def find_cycle(
    seq: Sequence[Any],
    max_period: int = CYCLE_MAX_PERIOD,
    min_repeats: int = CYCLE_MIN_REPEATS,
    min_span: int = CYCLE_MIN_SPAN,
) -> tuple[int, int] | None:
    """(start, period) of a loop the output ends in: the shortest period p whose repetition covers
    at least max(min_span, min_repeats * p) tokens at the end; None when there is none. Greedy
    decoding that starts repeating itself never leaves the loop, so the tail is where it shows."""
    n = len(seq)
    for p in range(1, min(max_period, n // 2) + 1):
        run = 0
        i = n - 1
        while i - p >= 0 and seq[i] == seq[i - p]:
            run += 1
            i -= 1
        span = run + p  # the tokens inside the loop, its first period included
        if span >= max(min_span, min_repeats * p):
            return (n - span, p)
    return None


def same_cycle(seq: Sequence[Any], cyc: tuple[int, int], ref: Sequence[Any], ref_cyc: tuple[int, int]) -> bool:
    """Whether two outputs end in the same loop (`find_cycle`'s (start, period) of each): the same
    period and the same tokens, entered at any point of the cycle. A baseline that ends in a loop
    excuses that loop only, not any loop the configuration falls into."""
    if cyc[1] != ref_cyc[1]:
        return False
    a = list(seq[cyc[0] : cyc[0] + cyc[1]])
    b = list(ref[ref_cyc[0] : ref_cyc[0] + ref_cyc[1]])
    return any(a == b[i:] + b[:i] for i in range(len(b)))


def entering_cycle(ref: Sequence[Any], cyc: tuple[int, int], seq: Sequence[Any]) -> bool:
    """Whether `ref` ends in the loop `seq` ends in (`find_cycle`'s (start, period) of `seq`) for at
    least two of its periods, short of `find_cycle`'s repeats: under the threshold rule a near-tie
    flipped early may bring the configuration to the model's own loop a few dozen tokens before the
    baseline, which has entered it but not yet repeated it enough to count as a loop by itself."""
    p, n = cyc[1], len(ref)
    run, i = 0, n - 1
    while i - p >= 0 and ref[i] == ref[i - p]:
        run, i = run + 1, i - 1
    # and over half find_cycle's span at least: two newlines closing ordinary text are no loop entered
    return run + p >= max(2 * p, CYCLE_MIN_SPAN // 2) and same_cycle(seq, cyc, ref, (n - run - p, p))


def _window(blocks: Sequence[Sequence[float]]) -> float | None:
    tok = sum(b[0] for b in blocks)
    ver = sum(b[1] for b in blocks)
    return tok / ver if ver > 0 else None


def _block_accepts(steps: Sequence[Sequence[float]], blocks: int) -> list[float]:
    """One output's acceptance in `blocks` blocks of equal tokens (its (new tokens, new verify
    passes) increments in order); blocks without a verify pass are left out."""
    total = sum(s[0] for s in steps)
    if total <= 0:
        return []
    size = total / float(blocks)
    cut: list[list[float]] = [[0.0, 0.0] for _block in range(blocks)]
    done = 0.0
    for tok, ver in steps:
        idx = min(blocks - 1, int(done / size))
        cut[idx][0] += tok
        cut[idx][1] += ver
        done += tok
    return [a for a in (_window([b]) for b in cut) if a is not None]


def _hist_spread(hists: Sequence[Sequence[int] | None]) -> tuple[float, float, int] | None:
    """(variance of tokens per verify pass, verify passes, outputs) pooled over outputs' acceptance
    histograms (a pass that accepted i drafts emits i + 1 tokens); None unless every output has one."""
    if not hists or any(h is None for h in hists):
        return None
    passes = sum(sum(h) for h in hists if h)
    if passes < 2:
        return None
    mean = sum((i + 1) * c for h in hists if h for i, c in enumerate(h)) / passes
    var = sum(c * (i + 1 - mean) ** 2 for h in hists if h for i, c in enumerate(h)) / (passes - 1)
    return var, float(passes), len(hists)


def acceptance_drift(
    first: Sequence[Sequence[Sequence[float]]],
    again: Sequence[Sequence[Sequence[float]]],
    blocks: int = DRIFT_BLOCKS,
    first_hists: Sequence[Sequence[int] | None] | None = None,
    again_hists: Sequence[Sequence[int] | None] | None = None,
) -> dict[str, Any]:
    """Drift of the acceptance length over the gate's run, on the same prompts: `first[j]` and
    `again[j]` are the (new tokens, new verify passes) increments of long prompt j's first send
    (at the start of the run) and of its second (after every other request, `request_order`).

    "first" and "last" are the acceptance of all first sends and of all second sends (tokens over
    verify passes). The same prompts in both, with the same greedy outputs, so what the prompts
    are cancels out. The noise is how much one output's acceptance moves by itself: each output is
    cut into `blocks` blocks of equal tokens, the spread between neighbouring blocks of the same
    output (sd of their differences / sqrt 2, which a slow trend barely inflates and the prompts'
    differences do not enter) scaled to the two sends' means. A real SGLang server reports its
    verify passes on the finished chunk only, so an output is one block: the noise is then the
    standard error of each send's acceptance from the outputs' acceptance histograms (the spread
    of tokens per verify pass over the passes: `method` "histogram"). With neither, the rule is
    not judged (`judged` False), and the verdict says so instead of passing it silently."""
    first_steps = [s for out in first for s in out]
    again_steps = [s for out in again for s in out]
    head, tail = _window(first_steps), _window(again_steps)
    per_first = [_block_accepts(out, blocks) for out in first]
    per_again = [_block_accepts(out, blocks) for out in again]

    def sends(outs: Sequence[Sequence[Sequence[float]]]) -> list[float | None]:
        return [None if a is None else round(a, 4) for a in map(_window, outs)]

    empty = {
        "first": head,
        "last": tail,
        "drop": None,
        "noise": None,
        "drifted": False,
        "judged": False,
        "method": None,
        "first_sends": sends(first),
        "again_sends": sends(again),
    }
    if head is None or tail is None:
        return empty
    drop = head - tail
    diffs = [vals[i + 1] - vals[i] for vals in per_first + per_again for i in range(len(vals) - 1)]
    n_first, n_again = sum(len(v) for v in per_first), sum(len(v) for v in per_again)
    if diffs:
        sd = math.sqrt(sum(d * d for d in diffs) / len(diffs) / 2.0)
        noise = sd * math.sqrt(1.0 / max(1, n_first) + 1.0 / max(1, n_again))
        method = "blocks"
        # the outputs, not their blocks, are what a send has to judge by (below)
        n_first, n_again = sum(1 for v in per_first if v), sum(1 for v in per_again if v)
    else:
        hf, ha = _hist_spread(first_hists or []), _hist_spread(again_hists or [])
        if hf is None or ha is None:
            return {**empty, "drop": drop}
        noise = math.sqrt(hf[0] / hf[1] + ha[0] / ha[1])
        n_first, n_again, method = hf[2], ha[2], "histogram"
    if n_first < 2 or n_again < 2:
        # one output a send (--long-prompts 1): too few to judge a drift by, whichever the method; said
        # so, as with no noise at all, instead of a pass that nothing could have failed
        return {**empty, "drop": drop, "noise": noise, "method": method}
    drifted = bool(drop > DRIFT_Z * noise and drop > DRIFT_MIN_DROP * head)
    return {**empty, "drop": drop, "noise": noise, "drifted": drifted, "judged": True, "method": method}


def backend_difference(baseline: object, candidate: object) -> str | None:
    """How the two sides' resolved attention kernels differ ("fa3 / flashinfer"), None when they do
    not or either side does not say (a baseline made before it was recorded)."""
    if not isinstance(baseline, Mapping) or not isinstance(candidate, Mapping):
        return None
    diffs = [
        f"{key} {baseline.get(key)} / {candidate.get(key)}"
        for key in sorted(set(baseline) | set(candidate))
        # (the verify pass's mode matters only with a split backend: _verify_kernel_difference)
        if key != "speculative_attention_mode"
        and baseline.get(key)
        and candidate.get(key)
        and baseline.get(key) != candidate.get(key)
    ]
    return ", ".join(diffs) or None


def _verify_kernel_difference(baseline: object, candidate: object) -> str | None:
    """Where the speculative side verifies on another attention kernel than the baseline decodes
    on, with the same backend names on both sides: with a split backend (`--prefill-attention-backend`
    other than `--decode-attention-backend`, or one SGLang sets by itself) SGLang runs a hybrid
    backend whose target-verify pass uses the prefill kernel unless `speculative_attention_mode` is
    "decode" (0.5.9 and 0.5.23 srt/layers/attention/hybrid_attn_backend.py; the mode's default is
    "prefill": server_args.py), while the baseline makes each token with a decode step. None when
    the kernels agree or a side does not say."""
    if not isinstance(baseline, Mapping) or not isinstance(candidate, Mapping):
        return None

    def kernel(side: Mapping[str, Any], phase: str) -> Any:
        return side.get(f"{phase}_attention_backend") or side.get("attention_backend")

    mode = "decode" if str(candidate.get("speculative_attention_mode") or "").lower() == "decode" else "prefill"
    base, verify = kernel(baseline, "decode"), kernel(candidate, mode)
    if not base or not verify or base == verify:
        return None
    return f"decode steps on {base} / verify passes on {verify} (its {mode} kernel)"


def rule_for(
    server_version: object,
    baseline_deterministic: bool,
    candidate_deterministic: bool,
    baseline_backends: object = None,
    candidate_backends: object = None,
    candidate_topk: object = None,
    candidate_speculates: bool = False,
) -> dict[str, Any]:
    """Which parity rule applies: exact (100%) when the release has deterministic inference and
    both sides ran with it on the same attention kernels, else the threshold; with a sentence that
    says why. Batch-invariant kernels make one kernel's results reproducible, not two kernels'
    equal, and SGLang picks the kernel per configuration: 0.5.9 and 0.5.10 resolve the attention
    backend before the deterministic flag and give a topk > 1 (or page size > 1) configuration
    flashinfer where the no-speculation baseline gets fa3 on Hopper (server_args.py
    `__post_init__`; 0.5.12 reversed the order); SGLang's own parity test pins the reference to
    the speculative server's backend (test/kits/spec_server_kits.py `SpecParityKit`). A draft tree
    (`candidate_topk` > 1) is verified by other arithmetic than a decode step whatever the backend's
    name: fa3 runs its verify pass as two attention passes, the prefix's and the tree's, merged by
    their log-sum-exp (srt/layers/attention/flashattention_backend.py `use_cascade_attn` for
    target-verify with topk > 1, 0.5.9-0.5.23), whose rounding differs from one pass's. A
    speculating candidate (`candidate_speculates`) is compared by the kernel its verify passes run
    on (`_verify_kernel_difference`)."""
    kernels = backend_difference(baseline_backends, candidate_backends)
    if kernels is None and candidate_speculates:
        kernels = _verify_kernel_difference(baseline_backends, candidate_backends)
    topk = candidate_topk if isinstance(candidate_topk, int) and not isinstance(candidate_topk, bool) else 1
    both = supports_deterministic(server_version) and baseline_deterministic and candidate_deterministic
    if both and topk > 1:
        why = (
            f"both sides ran with --{DETERMINISTIC_FLAG}, but this configuration verifies a draft tree (topk {topk}) "
            "by other attention arithmetic than the baseline's decode steps, which is not bitwise equal"
        )
    elif both and kernels:
        why = (
            f"both sides ran with --{DETERMINISTIC_FLAG} but on other attention kernels (baseline / this "
            f"configuration: {kernels}), which are not bitwise equal"
        )
    elif both:
        return {
            "mode": "deterministic",
            "exact_share_min": 1.0,
            "why": f"both sides ran with --{DETERMINISTIC_FLAG} (SGLang {server_version}): 100% exact match required",
        }
    elif not supports_deterministic(server_version):
        why = f"SGLang {server_version} has no --{DETERMINISTIC_FLAG} (since {DETERMINISTIC_SINCE})"
    else:
        sides = [
            n
            for n, on in (("the baseline", baseline_deterministic), ("the configuration", candidate_deterministic))
            if not on
        ]
        why = "{} ran without --{}".format(" and ".join(sides), DETERMINISTIC_FLAG)
    return {
        "mode": "threshold",
        "exact_share_min": EXACT_SHARE_MIN,
        "why": f"{why}: at least {round(EXACT_SHARE_MIN * 100)}% exact on the short continuations and no degeneration",
    }


def exact_round(
    server_version: object, baseline_deterministic: bool, measuring_deterministic: bool | None = None
) -> dict[str, Any]:
    """Whether a sweep redeploys its picks with --enable-deterministic-inference to hold them to
    exact parity (docs/tuner.md "Verify"): only where the release has the flag, and only when the
    measurement deployments ran without it (with it, the per-deployment check is exact already).
    Returns {"applies": bool, "why": sentence}."""
    if not supports_deterministic(server_version):
        return {
            "applies": False,
            "why": f"SGLang {server_version} has no --{DETERMINISTIC_FLAG} (since {DETERMINISTIC_SINCE}): "
            f"every configuration is judged by the threshold rule ({round(EXACT_SHARE_MIN * 100)}% exact)",
        }
    # held to exact parity already only when both sides were deterministic: the measurement
    # deployments (the sweep's own extra flags) and the baseline they were compared with (a
    # deterministic baseline reused by a sweep without the flag judged every one by the threshold)
    measuring = baseline_deterministic if measuring_deterministic is None else measuring_deterministic
    if baseline_deterministic and measuring:
        return {
            "applies": False,
            "why": f"the measurement deployments already run with --{DETERMINISTIC_FLAG}: "
            "each configuration was held to exact parity on its own deployment",
        }
    return {
        "applies": True,
        "why": f"SGLang {server_version} has --{DETERMINISTIC_FLAG}: the configurations to be recommended are "
        "redeployed with it and must match a deterministic no-speculation baseline exactly",
    }


def _snippet(text: str, start: int, width: int = 60) -> str:
    part = text[start : start + width]
    return part + ("..." if len(text) > start + width else "")


def _example(pid: str, pos: int, base_row: Mapping[str, Any], cand_row: Mapping[str, Any]) -> dict[str, Any]:
    """Both continuations from where they part (common text prefix), a little context before."""
    bt, ct = str(base_row.get("text") or ""), str(cand_row.get("text") or "")
    c = 0
    while c < min(len(bt), len(ct)) and bt[c] == ct[c]:
        c += 1
    lead = max(0, c - 20)
    return {"prompt_id": pid, "position": pos, "baseline": _snippet(bt, lead), "candidate": _snippet(ct, lead)}


def _median(xs: Sequence[float]) -> float | None:
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def _compare(base_rows: Sequence[Mapping[str, Any]], cand_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    by_id = dict((r["id"], r) for r in cand_rows)
    matched, positions, example, missing = 0, [], None, []
    for b in base_rows:
        c = by_id.get(b["id"])
        if c is None:
            missing.append(b["id"])
            continue
        pos = first_divergence(_tokens(b), _tokens(c))
        if pos is None:
            matched += 1
            continue
        positions.append(pos)
        if example is None:
            example = _example(b["id"], pos, b, c)
    return {
        "prompts": len(base_rows),
        "exact": matched,
        "exact_share": matched / float(len(base_rows)) if base_rows else None,
        "diverged": len(positions),
        "first_divergence_min": min(positions) if positions else None,
        "first_divergence_median": _median(positions),
        "example": example,
        "missing": missing,
    }


def tokens_per_verify(tokens: float, verify_steps: float) -> float | None:
    """The acceptance length's one formula: tokens over the verify steps that produced them,
    SGLang's (sgl-project/sglang#3152); None without a verify step. The gate's figures below, the
    tuner's level figure and its cross-check's two sides (tuner/measure/metrics.py,
    tuner/decide/crosscheck.py) are all this ratio."""
    return tokens / verify_steps if verify_steps and verify_steps > 0 else None


def candidate_identity(info: Mapping[str, Any]) -> dict[str, Any]:
    """What a running server's `/server_info` says of itself, as the gate compares it with the
    baseline and picks its rule (`baseline_mismatch`, `rule_for`, `judge`): one reading for the
    role's module and the tuner's gate (tuner/verify/probe.py). `model` is the model path, else the
    served name (None when neither: the tuner then asks /v1/models); a server is held to
    acceptance unless it says it does not speculate; `adaptive` is the server's own word (the
    module adds the adaptive config it was handed)."""
    spec = info.get("speculative") or {}
    enabled = bool(spec.get("enabled"))
    return {
        "server_version": info.get("version"),
        "model": info.get("model_path") or info.get("served_model_name"),
        "served_model_name": info.get("served_model_name"),
        "speculative": {k: spec.get(k) for k in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")}
        if enabled
        else None,
        "speculates": spec.get("enabled") is not False,
        "deterministic": bool(info.get("deterministic")),
        "adaptive": bool(enabled and spec.get("adaptive")),
        "numerics": dict(info.get("numerics") or {}),
        "attention_backends": dict(info.get("attention_backends") or {}),
    }


def gate_acceptance(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The gate's acceptance over its answers: `accept_length`, SGLang's completion tokens over
    verify passes (what the sweep measured, which the 95%-of-measured rule compares with), and
    `decode_accept`, the same without each answer's first token, which the prefill produced with no
    verify pass (what the floor and the collapse rule read: a server that accepts no draft scores
    exactly 1.0 there, where SGLang's formula gives n/(n-1) and short answers lift it past the floor)."""
    tok = sum(int(r.get("completion_tokens") or 0) for r in rows)
    ver = sum(int(r.get("spec_verify_ct") or 0) for r in rows)
    # every answer's first token came from the prefill, one-token answers' (no verify pass) included
    firsts = sum(1 for r in rows if int(r.get("completion_tokens") or 0) > 0)
    return {"accept_length": tokens_per_verify(tok, ver), "decode_accept": tokens_per_verify(tok - firsts, ver)}


def gate_outputs(
    results: Mapping[tuple[str, int], tuple[Mapping[str, Any], Sequence[Sequence[Any]]]],
    n_short: int,
    n_long: int,
    seconds: float,
    again: bool = True,
    load: int = 0,
) -> dict[str, Any]:
    """One server's answers to the gate's requests in the shape `judge` reads, from `results`:
    (kind, index) -> (row, increments), kind "short", "long" or "again" (the long prompt sent a
    second time), increments the stream's (time, tokens, verify passes) steps. The tuner's probe
    (tuner/verify/probe.py) and the role's module (plugins/modules/sglang_verify.py) both build it
    here. `again` False: no second sends (a baseline: no speculation, no drift). `load`: the short
    prompts sent again to hold the concurrency (`request_order`), not judged but part of the cost."""

    def rows(kind: str, n: int) -> list[Any]:
        return [results[(kind, i)][0] for i in range(n)]

    def increments(kind: str) -> list[list[list[int]]]:
        return [[[t, v] for _now, t, v in results[(kind, i)][1]] for i in range(n_long)]

    def hists(kind: str) -> list[Any]:
        return [results[(kind, i)][0].get("accept_hist") for i in range(n_long)]

    answered = [row for row, _steps in results.values()]
    return {
        "short": rows("short", n_short),
        "long": rows("long", n_long),
        "again": rows("again", n_long) if again else [],
        "long_steps": increments("long"),
        "again_steps": increments("again") if again else [],
        "long_hists": hists("long"),
        "again_hists": hists("again") if again else [],
        **gate_acceptance(answered),
        "requests": len(answered),
        "load_requests": load,
        "seconds": round(seconds, 3),
    }


def acceptance_se(candidate: Mapping[str, Any]) -> float | None:
    """Standard error of the gate's acceptance length from its prompts' own differences: the gate
    reads a few dozen prompts, and on a server whose prompts accept differently (code more than
    chat) its mean moves with which prompts they are. A ratio estimate over prompts (each short
    request, and each long prompt's two sends together): sqrt(sum (t_i - A v_i)^2) / sum v_i.
    None when fewer than two prompts were verified."""
    units: list[tuple[float, float]] = []
    for row in candidate.get("short") or []:
        t, v = row.get("completion_tokens"), row.get("spec_verify_ct")
        if isinstance(t, int) and isinstance(v, int) and v > 0:
            units.append((float(t), float(v)))
    again = list(candidate.get("again_steps") or [])
    for j, first in enumerate(candidate.get("long_steps") or []):
        steps = list(first) + (list(again[j]) if j < len(again) else [])
        t, v = float(sum(x[0] for x in steps)), float(sum(x[1] for x in steps))
        if v > 0:
            units.append((t, v))
    if len(units) < 2:
        return None
    tok, ver = sum(u[0] for u in units), sum(u[1] for u in units)
    a = tok / ver
    n = len(units)
    return math.sqrt(sum((t - a * v) ** 2 for t, v in units) * n / (n - 1)) / ver


def _acceptance_reasons(
    acc: float | None,
    measured_accept: float | None,
    drift: Mapping[str, Any],
    se: float | None = None,
    floor: bool = True,
    floor_acc: float | None = None,
) -> list[str]:
    """The acceptance rules: above the floor, not below 95% of the measured value beyond the
    gate's prompt-to-prompt spread (`acceptance_se`: the sweep's workload and the gate read
    different prompts), no drift. `floor` False leaves out the floor and the collapse (a server
    that runs no speculative step at the batch sizes of the gate's run accepts nothing there by
    design)."""
    reasons = []
    low = acc if floor_acc is None else floor_acc  # the floor reads verify passes only (gate_acceptance)
    if acc is None:
        if floor:
            reasons.append("no acceptance length: the server reported no verify passes (spec_verify_ct)")
    else:
        if floor and low is not None and low <= ACCEPT_FLOOR:
            reasons.append(
                f"acceptance length {low:.2f} over the verify passes (the prefill's first tokens left out) is not "
                f"above {ACCEPT_FLOOR:.2f}: speculation accepts (almost) nothing"
            )
        if (
            measured_accept
            and acc < ACCEPT_OF_MEASURED * measured_accept
            and measured_accept - acc > ACCEPT_SE_Z * (se or 0.0)
        ):
            reasons.append(
                f"acceptance length {acc:.2f} is below {round(ACCEPT_OF_MEASURED * 100)}% of the "
                f"{measured_accept:.2f} the sweep measured for this configuration"
                + (f", beyond its prompts' spread (standard error {se:.2f})" if se else "")
            )
    if drift["drifted"]:
        reasons.append(
            "acceptance drifts over the gate's run: {:.2f} on the long prompts' first sends, {:.2f} when they "
            "were sent again after the other requests (drop {:.2f}, noise {:.2f})".format(
                drift["first"], drift["last"], drift["drop"], drift["noise"]
            )
        )
    elif (
        floor
        and drift["last"] is not None
        and drift["first"] is not None
        and drift["last"] <= ACCEPT_FLOOR < drift["first"]
    ):
        reasons.append(
            "acceptance collapsed to {:.2f} on the long prompts' second sends at the end of the gate's run "
            "({:.2f} on their first)".format(drift["last"], drift["first"])
        )
    return reasons


def floor_exemption(
    config: Mapping[str, Any] | None, concurrency: int, graph_bs: Sequence[int] | None = None
) -> str | None:
    """Why the acceptance floor and the collapse rule do not apply to a server running the adaptive
    `config` (SGLang's per-batch-size JSON, ``--speculative-adaptive-config``; None: a static depth
    or no speculation), or None when they apply. They do not when the config routes the batch the
    gate's judged requests run at (its `concurrency` requests in flight, held there until the last
    of them ends: `request_order`; `graph_bs` the CUDA-graph sizes SGLang pads a batch to before
    routing, None: unpadded, its default) to a bucket whose only candidate is 0 steps
    (`sglang_adaptive.unspeculated_bucket`): such a server runs no speculative step there, so its
    acceptance length is 1.0 by design (a tuned config that speculates at batch 1 only). A config
    with 0 steps only below the gate's batch is held to the floor: the gate's run speculates.
    The tuner's gate (tuner/verify/phase.py) and the role's (module ``sglang_verify``)
    both ask this and judge with ``floor=False`` on a sentence, which they keep in the verdict as
    ``acceptance_vs_sweep`` (``accept.floor_judged`` is then false). A config SGLang would refuse
    raises what SGLang raises (`sglang_adaptive.load_per_bs`: ValueError, AttributeError)."""
    if config is None:
        return None
    _whole, entries = load_per_bs(config)
    bucket = unspeculated_bucket({str(b): e for b, e in entries.items()}, concurrency, graph_bs)
    if bucket is None:
        return None
    padded = pad_to_graph_bs(concurrency, graph_bs)
    routed = f" (padded to {padded})" if padded != concurrency else ""
    return (
        f"the floor and the collapse rule do not apply: it runs no speculative step at batch {concurrency}"
        f"{routed}, the gate's {concurrency} requests in flight, routed to its 0-step bucket from {bucket}"
    )


ADAPTIVE_WHY = (
    "not compared with the sweep's: an adaptive server's depth, and so its acceptance length, follows "
    "the batch size and the run (the gate's short requests start at the launch depth, the sweep's "
    "levels ran where the server settled)"
)
ADAPTIVE_ACCEPT_NOTE = ADAPTIVE_WHY + "; the floor and the drift rules apply"


def judge(
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    measured_accept: float | None = None,
    acceptance: bool = True,
    floor: bool = True,
) -> dict[str, Any]:
    """The gate's verdict on one configuration.

    `candidate`: {"server_version", "deterministic", "short": [...], "long": [...] (the long
    prompts' first sends), "again": [...] (their second sends: held to the same rules as the first,
    compared with the baseline under deterministic inference and checked for loops), "long_steps" and "again_steps": per long prompt, the [[tokens, verify
    passes], ...] increments of its first and of its second send, "long_hists" and "again_hists":
    their acceptance histograms (`acceptance_drift`),
    "accept_length" (the gate's own, all requests), "requests", "seconds"}; rows as in the baseline ({"id", "text",
    "output_ids"}). `measured_accept`: the acceptance length the sweep measured for the
    configuration (None: not known, only the floor applies). `acceptance` False leaves the
    acceptance and drift rules out (the sweep's exact round: they are judged on the measurement
    deployment, the one that is deployed, not on the deterministic redeploy). `floor` False leaves
    out the acceptance floor and the collapse rule (an adaptive config that pins 0 steps at batch
    sizes the gate's run reaches: its acceptance there is 1.0 by design). Returns a JSON-able dict with
    "passed" and "reasons" (one sentence each, the first one is the headline)."""
    spec = candidate.get("speculative")
    rule = rule_for(
        candidate.get("server_version"),
        bool(baseline.get("deterministic")),
        bool(candidate.get("deterministic")),
        baseline.get("attention_backends"),
        candidate.get("attention_backends"),
        spec.get("eagle_topk") if isinstance(spec, Mapping) else None,
        isinstance(spec, Mapping),  # (candidate_identity: None unless the server speculates)
    )
    # an adaptive server (its /server_info says so): its gate acceptance is not the one its levels
    # measured, so it is never held to it, in the role's module, `tuner verify` and the sweep alike
    adaptive_server = bool(candidate.get("adaptive"))
    dropped = measured_accept if adaptive_server else None
    if adaptive_server:
        measured_accept = None
    short = _compare(baseline.get("short") or [], candidate.get("short") or [])
    long_ = _compare(baseline.get("long") or [], candidate.get("long") or [])
    # the long prompts' second sends (after every other request: the drift rule's pairs) are outputs
    # too, held to the same rules; a candidate recorded before they were kept has none
    again_rows = list(candidate.get("again") or [])
    again = _compare(baseline.get("long") or [], again_rows) if again_rows else None
    reasons = []
    missing = short["missing"] + long_["missing"] + (again["missing"] if again else [])
    if missing:
        reasons.append("no output for prompt(s) {}".format(", ".join(missing[:5])))
    share = short["exact_share"] or 0.0
    if share < rule["exact_share_min"]:
        ex = short["example"] or {}
        need = "deterministic mode:" if rule["mode"] == "deterministic" else "at least"
        reasons.append(
            f"outputs differ from the no-speculation baseline: {short['exact']} of {short['prompts']} short greedy "
            f"continuations match exactly ({100 * share:.0f}%, {need} {100 * rule['exact_share_min']:.0f}% required); "
            f"first divergence at token {short['first_divergence_min']} (median {short['first_divergence_median']}); "
            f"e.g. prompt {ex.get('prompt_id')} at token {ex.get('position')}: baseline {ex.get('baseline')!r}, "
            f"this configuration {ex.get('candidate')!r}"
        )
    if rule["mode"] == "deterministic" and (long_["diverged"] or (again and again["diverged"])):
        first_diverged = long_["diverged"]
        ex = (long_["example"] if first_diverged else (again or {}).get("example")) or {}
        sends = f"{long_['diverged']} of {long_['prompts']}"
        if again:
            sends += f" first sends, {again['diverged']} of {again['prompts']} second sends"
        reasons.append(
            f"long outputs differ from the baseline under deterministic inference: {sends}; e.g. prompt "
            f"{ex.get('prompt_id')}{'' if first_diverged else ' (second send)'} at token {ex.get('position')}: "
            f"baseline {ex.get('baseline')!r}, this configuration {ex.get('candidate')!r}"
        )
    base_long = dict((r["id"], r) for r in baseline.get("long") or [])
    loops = []
    outputs = [(row, False) for row in candidate.get("long") or []] + [(row, True) for row in again_rows]
    for row, second in outputs:
        toks = _tokens(row)
        cyc = find_cycle(toks)
        if cyc is None:
            continue
        ref = base_long.get(row["id"])
        ref_toks = None if ref is None else _tokens(ref)
        ref_cyc = None if ref_toks is None else find_cycle(ref_toks)
        if ref_toks is not None and (
            (ref_cyc is not None and same_cycle(toks, cyc, ref_toks, ref_cyc)) or entering_cycle(ref_toks, cyc, toks)
        ):
            continue  # the model ends in this loop without speculation too: not the configuration's doing
        loops.append(
            {
                "prompt_id": row["id"],
                "second_send": second,
                "start": cyc[0],
                "period": cyc[1],
                "cycle": " ".join(str(t) for t in toks[cyc[0] : cyc[0] + cyc[1]])[:80],
            }
        )
    if loops:
        lp = loops[0]
        reasons.append(
            f"degenerate output: {len(loops)} of {len(outputs)} long outputs end in a repeated "
            f"cycle; e.g. prompt {lp['prompt_id']}{' (second send)' if lp['second_send'] else ''} repeats a "
            f"{lp['period']}-token cycle from token {lp['start']} ({lp['cycle']!r})"
        )
    acc = candidate.get("accept_length")
    se = acceptance_se(candidate)
    accept = {
        "gate": acc,
        "gate_decode": candidate.get("decode_accept"),
        "measured": measured_accept,
        **({"measured_not_compared": ADAPTIVE_ACCEPT_NOTE, "measured_given": dropped} if dropped is not None else {}),
        "floor": ACCEPT_FLOOR,
        "share_of_measured_min": ACCEPT_OF_MEASURED,
        "prompt_se": None if se is None else round(se, 4),
        "judged": acceptance,
        "floor_judged": floor,
    }
    drift = acceptance_drift(
        candidate.get("long_steps") or [],
        candidate.get("again_steps") or [],
        first_hists=candidate.get("long_hists"),
        again_hists=candidate.get("again_hists"),
    )
    if acceptance:
        reasons += _acceptance_reasons(acc, measured_accept, drift, se, floor, candidate.get("decode_accept"))
    return {
        "passed": not reasons,
        "reasons": reasons,
        "rule": rule,
        "short": short,
        "long": long_,
        "again": again,
        "degenerate": loops,
        "accept": accept,
        "drift": drift,
        "requests": candidate.get("requests"),
        "load_requests": candidate.get("load_requests") or 0,
        "seconds": candidate.get("seconds"),
    }


def verdict_line(verdict: Mapping[str, Any]) -> str:
    """One line for logs and reports (it says when the acceptance floor was not applied: an
    adaptive config that pins 0 steps where the gate ran, `floor_exemption`)."""
    s = verdict.get("short") or {}
    acc = (verdict.get("accept") or {}).get("gate")
    no_floor = (verdict.get("accept") or {}).get("floor_judged") is False
    head = "passed" if verdict.get("passed") else "FAILED: " + (verdict.get("reasons") or ["?"])[0]
    share = s.get("exact_share")
    load = verdict.get("load_requests") or 0
    return "{} (exact {}, acceptance {}, {} requests{} in {} s)".format(
        head,
        "-" if share is None else f"{s.get('exact', 0)}/{s.get('prompts', 0)}",
        ("-" if acc is None else f"{acc:.2f}") + (", floor not applied: 0 steps where it ran" if no_floor else ""),
        verdict.get("requests"),
        f" (+{load} load)" if load else "",
        "-" if verdict.get("seconds") is None else "{:.1f}".format(verdict["seconds"]),
    )
