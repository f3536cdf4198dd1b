"""What each benchmark metric means: written once, here, and rendered into report.md and
docs/tuner.md ("How the numbers are measured"; `scripts/gen_docs.py` rewrites that block and a test
keeps it equal to this file). tuner/measure/metrics.py computes them; the code there cites these
names.

Where the peer tools agree we follow them (docs/reference/peer-tools.md §2.1 compares vLLM
`bench serve`, SGLang `bench_serving`, AIPerf and GuideLLM).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricDef:
    """One metric: its name as a reader says it, the column(s) that hold it, and its definition."""

    title: str
    columns: str  # the results.csv / records.jsonl names, "" when it has none of its own
    text: str

    def bullet(self) -> str:
        cols = f" (`{self.columns}`)" if self.columns else ""
        return f"- **{self.title}**{cols}: {self.text}"


PER_REQUEST: tuple[MetricDef, ...] = (
    MetricDef(
        "TTFT",
        "ttft_ms",
        "arrival of the first chunk carrying output tokens minus send time (vLLM, SGLang, AIPerf). It "
        "includes queueing and prefill on the server. The send time is when the request's headers went "
        "to the socket (an aiohttp trace hook; GuideLLM's `request_start` is taken at the same point), so "
        "time the client's own event loop spent before the bytes left is not counted.",
    ),
    MetricDef("E2E", "e2e_ms", "arrival of the last token-carrying chunk minus send time."),
    MetricDef(
        "Output tokens",
        "output_tokens",
        "the server's count (`meta_info.completion_tokens`, cumulative per chunk on `/generate`; "
        "`usage.completion_tokens` with `stream_options.include_usage` and `continuous_usage_stats` on "
        "the OpenAI endpoints), never the number of chunks: speculative decoding streams several tokens "
        "per chunk. A request whose count is missing is failed, not credited with the requested length "
        "(SGLang `bench_serving`'s fallback).",
    ),
    MetricDef(
        "TPOT",
        "tpot_ms",
        "(E2E - TTFT) / (output tokens - 1) (vLLM's and SGLang's TPOT; AIPerf's ITL; GuideLLM's "
        "`inter_token_latency`). GuideLLM's `time_per_output_token` is another number under this name: "
        "(last token - request start) / output tokens, TTFT included (vllm-project/guidellm "
        "src/guidellm/schemas/request_stats.py).",
    ),
    MetricDef(
        "Decode rate",
        "",
        '(output tokens - 1) / (E2E - TTFT): the seed\'s "per-request tok/s". It excludes queue wait '
        "and prefill, so at concurrency 64 with ~21 running slots it shows the per-slot speed (the "
        "seed's ~99 tok/s), not a queue-diluted figure.",
    ),
    MetricDef(
        "ITL",
        "itl_ms",
        "chunk-robust inter-token latency: each gap between chunks is divided evenly over the tokens "
        "that chunk carried (the idea of vLLM PR #42661), so a speculative chunk of 4 tokens gives 4 "
        "samples of a quarter of the gap; percentiles are per token. Tokens in the first chunk come "
        "with TTFT and get no ITL sample. A stream whose chunks carry no token count (an OpenAI "
        "endpoint without per-chunk usage) has its first chunk read as the prefill's one token and "
        "the rest of the answer spread over the other chunks, the samples still one per token and "
        "summing to the decode time. GuideLLM's and AIPerf's \"ITL\" is a per-request mean, this "
        "report's TPOT, not these per-token samples.",
    ),
    MetricDef(
        "Failed",
        "requests_failed",
        "an HTTP error, a stream that breaks or ends without its final chunk / `[DONE]`, a missing "
        "token count, or, under `ignore_eos`, fewer tokens than requested.",
    ),
)

PER_LEVEL: tuple[MetricDef, ...] = (
    MetricDef(
        "Aggregate output tok/s",
        "output_tok_s",
        "output tokens of the successful requests that arrived while the closed loop was still "
        "sending, divided by that span (`measured_s`: from the first send to the moment the loop "
        "stopped sending, i.e. while all C clients were busy; as GuideLLM's over its measured window, "
        "not as vLLM `bench serve`'s or SGLang `bench_serving`'s output throughput, which divide every "
        "successful request's tokens by the whole run, the drain included, and so read lower on the same "
        "requests). The drain that follows (the last requests "
        "finishing with fewer than C running) is not counted: its length depends on how many requests "
        "the level needed, which would bias configurations that reached the precision sooner. Failed "
        "requests' time counts, their tokens do not (`wall_s` is the whole level, to the last "
        "completion). Warm-up requests before the first level are not counted.",
    ),
    MetricDef(
        "Per-request tok/s",
        "per_request_tok_s",
        "mean decode rate of the successful requests: it stays meaningful when C exceeds `max_running_requests`.",
    ),
    MetricDef(
        "Latency percentiles",
        "ttft_ms_p50, ttft_ms_p99, tpot_ms_p50, tpot_ms_p99, itl_ms_p50, itl_ms_p99, e2e_ms_p50, e2e_ms_p99",
        "TTFT, TPOT, ITL and E2E at p50 and p99 over the level's successful requests (linear "
        "interpolation between ranks).",
    ),
    MetricDef(
        "Acceptance length",
        "accept_length",
        "tokens per verify step for this level alone: sum of `completion_tokens` / sum of "
        "`spec_verify_ct` over the level's requests (`/generate`'s final `meta_info`; SGLang PR "
        "#3152's formula, the `spec_accept_length` of SGLang's own `meta_info`; a one-token answer adds its token and no verify "
        "step). It counts the prefill's first token too, so it reads about 1/V above the server log's `accept len` and the "
        "acceptance histogram's 1 + accepted drafts per verify step (V: a request's verify steps; 3% at 32-token answers of "
        "11 steps); on the OpenAI endpoints, the level's delta of the Prometheus counters "
        "`sglang:generation_tokens_total` / `sglang:spec_verify_calls_total` (needs "
        "`--enable-metrics` and SGLang 0.5.13 or later, which has the second counter); else tokens per verify step counted from the chunks (one chunk per verify step after the "
        "first, the prefill's token, at SGLang's default `--stream-interval 1`). `accept_length_source` says which. SGLang's `avg_spec_accept_length` "
        "is cumulative since start-up (it mixes levels and warm-up) and is not used.",
    ),
)


def markdown() -> str:
    """The definitions as the markdown both report.md and docs/tuner.md carry."""
    lines = ["Per request:", ""]
    lines += [d.bullet() for d in PER_REQUEST]
    lines += ["", "Per level (a closed loop: C clients, each sends its next request when its previous one ends):", ""]
    lines += [d.bullet() for d in PER_LEVEL]
    return "\n".join(lines) + "\n"
