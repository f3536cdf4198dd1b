#!/usr/bin/env python3
"""Benchmark: our client against the field's own clients (GuideLLM, AIPerf) on one emulator process.

Same server, same workload for every client: `/v1/chat/completions`, streaming, the tuner's own
synthetic prompts (256 words, seed 7, written to a JSONL file the peers read), 256 output tokens
with `ignore_eos`, temperature 0, a closed loop of C = 1 and C = 16, 16 and 64 requests. For every
run, the wire is the referee: `tcpdump` on loopback timestamps each request's first packet and the
first packet that carries a content token, so each client's TTFT can be compared with what
actually happened on the socket during *its own* run (kernel timestamps; a client can only add
its own delays to them). The capture also says how many connections each client opened and how
bunched its requests arrived (mean size of the bursts of requests sent within 5 ms of each other).

The peers are installed apart from the project (never into its constraints), and only when this
benchmark runs: `python3 -m venv .cache/peer-guidellm && .cache/peer-guidellm/bin/pip install
guidellm==0.8.1`, the same for `aiperf==0.13.0` in `.cache/peer-aiperf`. Both run offline: GuideLLM
reads the prompts file (`validate_backend` off); AIPerf gets a word-level tokenizer built from the
prompts' words (its token counts then equal the emulator's) in a private HF cache, and uses the
server's token counts. A missing peer is skipped. Needs root for tcpdump (else no wire columns).

Writes bench/peer_clients.md (or --out) from the runs it keeps in bench/peer_clients/runs.json;
`--render` rebuilds the file from them without measuring. Not part of CI.
Usage: .venv/bin/python bench/peer_clients.py [--requests 64] [--concurrency 1,16] [--render]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import git_rev, kept, machine_text  # noqa: E402  (bench/: the script's own directory)

sys.path.insert(0, str(ROOT / "tests" / "tuner"))
from tuner_testlib import emulator  # noqa: E402

from tuner.measure.metrics import level_metrics  # noqa: E402
from tuner.measure.stats import percentile  # noqa: E402
from tuner.run.client import BenchClient, ClientOptions  # noqa: E402
from tuner.spec import prompts  # noqa: E402

GUIDELLM = ROOT / ".cache" / "peer-guidellm" / "bin" / "guidellm"
AIPERF = ROOT / ".cache" / "peer-aiperf" / "bin" / "aiperf"
SEED, INPUT, OUTPUT, MODEL = 7, 256, 256, "qwen3.5-122b"
_HDR = re.compile(r"^(\d+\.\d+) IP (\S+)\.(\d+) > (\S+)\.(\d+): Flags \[([^\]]*)\].*length (\d+)")


# -- the wire ------------------------------------------------------------------------------
class Capture:
    """tcpdump on loopback for one server port, as text (-A), for the length of a `with`."""

    def __init__(self, port: int, path: Path):
        self.port, self.path, self.proc = port, path, None

    def __enter__(self) -> Capture:
        if shutil.which("tcpdump") and os.geteuid() == 0:
            self.proc = subprocess.Popen(
                ["tcpdump", "-i", "lo", "-nn", "-tt", "-A", "-s", "0", f"tcp port {self.port}"],
                stdout=open(self.path, "w"),
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            time.sleep(1.0)
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=10)

    def requests(self) -> dict[str, object] | None:
        """Per request: (first request packet, first content packet); connections opened."""
        if self.proc is None:
            return None
        pkts: list[list] = []
        cur: list | None = None
        for line in open(self.path, errors="replace"):
            m = _HDR.match(line)
            if m:
                if cur:
                    pkts.append(cur)
                t, _sh, sp, _dh, dp, flags, ln = m.groups()
                cur = [float(t), int(sp), int(dp), flags, int(ln), []]
            elif cur is not None:
                cur[5].append(line.rstrip("\n"))
        if cur:
            pkts.append(cur)
        conns: dict[int, dict] = {}
        out: list[tuple[float, float]] = []
        syns = 0
        for t, sp, dp, flags, ln, body in pkts:
            if dp == self.port and flags == "S":
                syns += 1
            if ln == 0:
                continue
            data = "".join(body)
            if dp == self.port:
                c = conns.setdefault(sp, {"req": None, "first": None})
                if "POST " in data:
                    c["req"], c["first"] = t, None
            else:
                c = conns.get(dp)
                if c and c["req"] is not None and c["first"] is None and re.search(r'"content":"[^"]', data):
                    c["first"] = t
                    out.append((c["req"], t - c["req"]))
        out.sort()
        starts = [s for s, _ in out]
        bursts, size = [], 1
        for a, b in zip(starts, starts[1:], strict=False):
            if b - a <= 0.005:
                size += 1
            else:
                bursts.append(size)
                size = 1
        bursts.append(size)
        ttfts = [d * 1000 for _, d in out]
        return {
            "n": len(out),
            "ttft_p50": percentile(ttfts, 50),
            "connections": syns,
            "burst": statistics.mean(bursts) if out else None,
        }


# -- the clients ---------------------------------------------------------------------------
def write_prompts(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"prompt": prompts.prompt_text(i, INPUT, SEED), "output_tokens_count": OUTPUT}) + "\n")


def run_ours(url: str, c: int, n: int) -> dict:
    async def go() -> dict:
        opts = ClientOptions(url=url, endpoint="chat", input_len=INPUT, output_len=OUTPUT, seed=SEED, model=MODEL)
        async with BenchClient(opts) as client:
            traces = await client.run_level(c, n, first_index=0)
        m = level_metrics(c, traces)
        return {"tok_s": m.output_tok_s, "ttft_p50": m.ttft_ms_p50, "ok": m.requests_ok}

    return asyncio.run(go())


def run_guidellm(url: str, c: int, n: int, tmp: Path) -> dict | None:
    if not GUIDELLM.exists():
        return None
    scen = {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "model": MODEL,
                "request_format": "/v1/chat/completions",
                "validate_backend": False,
                "extras": {"body": {"ignore_eos": True, "temperature": 0.0}},
            },
            "profile": {"kind": "concurrent", "streams": c},
            "data": [{"kind": "json_file", "path": str(tmp / "prompts.jsonl")}],
            "constraints": [{"kind": "max_requests", "count": n}],
        }
    }
    (tmp / "scen.json").write_text(json.dumps(scen))
    out = tmp / f"gl-{c}.json"
    subprocess.run(
        [str(GUIDELLM), "run", "-c", str(tmp / "scen.json"), "--output", f"kind=json,path={out}", "--disable-console"],
        cwd=tmp,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    b = json.loads(out.read_text())["benchmarks"][0]
    reqs = b["requests"]["successful"]
    first = min(r["info"]["timings"]["request_start"] for r in reqs)
    last = max(r["info"]["timings"]["last_token_iteration"] for r in reqs)
    toks = sum(r["output_tokens"] for r in reqs)
    delays = [r["request_dispatch_delay"] for r in reqs if r.get("request_dispatch_delay") is not None]
    return {
        "tok_s": b["metrics"]["output_tokens_per_second"]["successful"]["mean"],
        "tok_s_window": toks / (last - first),
        "ttft_p50": b["metrics"]["time_to_first_token_ms"]["successful"]["median"],
        "ok": len(reqs),
        "note": f"dispatch delay p50 {statistics.median(delays) * 1000:.0f} ms" if delays else "",
    }


def aiperf_tokenizer(tmp: Path) -> Path:
    """A word-level tokenizer over the prompts' and the emulator's words, in a private HF cache."""
    hf = tmp / "hf"
    snap = hf / "hub" / "models--local--wordtok" / "snapshots" / ("0" * 40)
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from tuner.emulator import tokens
words = set(tokens._VOCAB)
for line in open({str(tmp / "prompts.jsonl")!r}):
    words.update(json.loads(line)["prompt"].split())
vocab = {{"[UNK]": 0}}
for w in sorted(words):
    vocab[w] = len(vocab)
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained({str(snap)!r})
"""
    subprocess.run([str(AIPERF.parent / "python"), "-c", code], check=True, stderr=subprocess.DEVNULL)
    refs = hf / "hub" / "models--local--wordtok" / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / "main").write_text("0" * 40)
    return hf


def run_aiperf(url: str, c: int, n: int, tmp: Path, hf: Path) -> dict | None:
    if not AIPERF.exists():
        return None
    data = tmp / "aiperf.jsonl"
    if not data.exists():
        with open(data, "w") as f:
            for line in open(tmp / "prompts.jsonl"):
                f.write(json.dumps({"text": json.loads(line)["prompt"]}) + "\n")
    art = tmp / f"ap-{c}"
    env = {**os.environ, "HF_HOME": str(hf), "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [str(AIPERF), "profile", "-m", MODEL, "--url", url, "--endpoint-type", "chat", "--streaming"]
        + ["--input-file", str(data), "--custom-dataset-type", "single_turn", "--concurrency", str(c)]
        + ["--request-count", str(n), "--use-server-token-count", "--tokenizer", "local/wordtok"]
        + ["--extra-inputs", "ignore_eos:true", "--extra-inputs", f"max_tokens:{OUTPUT}"]
        + ["--extra-inputs", "temperature:0", "--artifact-dir", str(art), "--ui-type", "none"],
        cwd=tmp,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    summary = json.loads(next(art.rglob("profile_export_aiperf.json")).read_text())
    connect = []
    for line in next(art.rglob("profile_export.jsonl")).read_text().splitlines():
        m = json.loads(line).get("metrics") or {}
        if "http_req_connecting" in m:
            connect.append(m["http_req_connecting"]["value"])
    return {
        "tok_s": summary["output_token_throughput"]["avg"],
        "ttft_p50": summary["time_to_first_token"]["p50"],
        "ok": n,
        "note": f"TCP connect inside TTFT: p50 {statistics.median(connect):.1f} ms" if connect else "",
    }


DATA = ROOT / "bench" / "peer_clients"
HEADER = [
    "C",
    "client",
    "output tok/s (its own)",
    "TTFT p50 ms (its own)",
    "TTFT p50 ms on the wire (its own requests)",
    "client vs wire",
    "connections opened",
    "requests per burst",
    "",
]


def measure(args: argparse.Namespace) -> dict:
    """Every client's every run, as measured (kept in bench/peer_clients/runs.json)."""
    levels = [int(c) for c in args.concurrency.split(",")]
    data: dict = {
        "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "revision": git_rev(),
        "machine": machine_text(),
        "args": {"requests": args.requests, "concurrency": args.concurrency, "rounds": args.rounds},
        "levels": {},
    }
    with tempfile.TemporaryDirectory(prefix="sgt-peers-") as tmpd, emulator() as url:
        tmp = Path(tmpd)
        write_prompts(tmp / "prompts.jsonl", 4 * args.requests)
        hf = aiperf_tokenizer(tmp) if AIPERF.exists() else tmp
        port = int(url.rsplit(":", 1)[1])
        for c in levels:
            n = args.requests if c > 1 else 16
            runs: dict[str, list[dict]] = {}
            for r in range(args.rounds):  # the clients take turns, so drift of the machine hits all alike
                for name, fn in (
                    ("sglang-tune", lambda c=c, n=n: run_ours(url, c, n)),
                    ("GuideLLM 0.8.1", lambda c=c, n=n: run_guidellm(url, c, n, tmp)),
                    ("AIPerf 0.13.0", lambda c=c, n=n: run_aiperf(url, c, n, tmp, hf)),
                ):
                    cap = Capture(port, tmp / f"wire-{name.split()[0]}-{c}-{r}.txt")
                    with cap:
                        res = fn()
                    if res is None:
                        continue
                    wire = cap.requests() or {}
                    res["wire"] = wire.get("ttft_p50")
                    res["connections"] = wire.get("connections")
                    res["burst"] = wire.get("burst")
                    runs.setdefault(name, []).append(res)
                    print(f"C={c} round {r + 1} {name}: {res}", file=sys.stderr)
            data["levels"][str(c)] = runs
    data["load"] = round(os.getloadavg()[0], 1)
    return data


def _med(rs: list[dict], key: str) -> float | None:
    vals = [x[key] for x in rs if x.get(key) is not None]
    return statistics.median(vals) if vals else None


_NUM = re.compile(r"\d+(?:\.\d+)?")


def _notes(rs: list[dict]) -> str:
    """The rounds' notes in one cell: a note that differs between rounds only in its numbers once,
    with each number's range over the rounds (\"dispatch delay p50 13-17 ms\"), others as they are."""
    notes = [x["note"] for x in rs if x.get("note")]
    by_form: dict[str, list[list[str]]] = {}
    for n in notes:
        by_form.setdefault(_NUM.sub("{}", n), []).append(_NUM.findall(n))
    out = []
    for form, nums in by_form.items():
        cols = list(zip(*nums, strict=True))
        spans = []
        for col in cols:
            lo, hi = min(col, key=float), max(col, key=float)
            spans.append(lo if float(lo) == float(hi) else f"{lo}-{hi}")
        out.append(form.format(*spans) if len(cols) == form.count("{}") else form)
    return "; ".join(out)


def render(data: dict | None) -> str:
    """bench/peer_clients.md from the kept runs: the table, and what it shows, computed."""
    head = "# Our client against GuideLLM and AIPerf on one emulator process\n\n"
    if not data:
        return head + (
            "No kept data: the run this file once showed (2026-11-30) kept no raw records, so its figures are "
            "not repeated here. Regenerate: install the peers (see the script's docstring), then "
            "`.venv/bin/python bench/peer_clients.py` (needs root for tcpdump); it keeps every run in "
            "`bench/peer_clients/runs.json` and `--render` rebuilds this file from it.\n"
        )
    a = data["args"]
    rows: list[list[str]] = []
    ours_vs_guide: list[str] = []
    spreads: list[float] = []  # each level's spread of the clients' output tok/s
    for c, runs in data["levels"].items():
        level_toks = [t for t in (_med(rs, "tok_s") for rs in runs.values()) if t]
        if len(level_toks) > 1:
            spreads.append(100 * (max(level_toks) / min(level_toks) - 1))
        for name, rs in runs.items():
            diffs = [x["ttft_p50"] / x["wire"] - 1 for x in rs if x.get("wire")]
            w, tok, ttft = _med(rs, "wire"), _med(rs, "tok_s"), _med(rs, "ttft_p50")
            conn, burst = _med(rs, "connections"), _med(rs, "burst")
            rows.append(
                [
                    c,
                    name,
                    "-" if tok is None else f"{tok:.1f}",
                    "-" if ttft is None else f"{ttft:.1f}",
                    "-" if w is None else f"{w:.1f}",
                    "-" if not diffs else f"{statistics.median(diffs) * 100:+.1f}%",
                    "-" if conn is None else f"{conn:.0f}",
                    "-" if burst is None else f"{burst:.1f}",
                    _notes(rs),
                ]
            )
        ours, guide = runs.get("sglang-tune"), runs.get("GuideLLM 0.8.1")
        if ours and guide:
            t_o, t_g = _med(ours, "ttft_p50"), _med(guide, "ttft_p50")
            w_o, w_g = _med(ours, "wire"), _med(guide, "wire")
            if t_o and t_g:
                txt = f"C = {c}: our TTFT p50 {100 * (t_o / t_g - 1):+.1f}% against GuideLLM's"
                if w_o and w_g:
                    txt += f", on the wire {100 * (w_o / w_g - 1):+.1f}%"
                ours_vs_guide.append(txt)
    spread = max(spreads) if spreads else None
    text = [
        head.rstrip("\n"),
        "",
        f"Generated by `bench/peer_clients.py` on {data['run']} (code revision {data['revision']}; {data['machine']}, "
        f"load {data.get('load', '?')} at the end) from the runs kept in `bench/peer_clients/runs.json`; "
        "`--render` rebuilds this file from them. One `python -m tuner.emulator` (seed profile, steps 3) on "
        f"loopback; every client sends the same {INPUT}-word prompts (the tuner's synthetic ones, seed {SEED}) "
        f"to /v1/chat/completions, streaming, {OUTPUT} output tokens with ignore_eos, temperature 0, closed "
        f"loop at each C ({a['requests']} requests at C > 1, 16 at C = 1); {a['rounds']} rounds, the clients "
        "taking turns, medians shown. The wire columns come from tcpdump on loopback during that client's own "
        "run: first request packet to first packet carrying a content token. Each column is its own median over "
        'the rounds, and "client vs wire" is the median of the rounds\' own ratios, so the two TTFT columns '
        "beside it may come from different rounds and need not differ by it. Each tool's output tok/s is its "
        "own definition (ours: tokens over the span all C clients were busy; GuideLLM: output tokens per "
        "second of the run; AIPerf: total output tokens over the benchmark duration).",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "|".join("---" for _ in HEADER) + "|",
        *["| " + " | ".join(r) + " |" for r in rows],
        "",
        "What the table shows (computed from it): "
        + ("; ".join(ours_vs_guide) + "; " if ours_vs_guide else "")
        # a bound is rounded up: 0.918% is "within 1.0%", never the 0.9% it exceeds
        + (
            ""
            if spread is None
            else f"at each C, the clients' output tok/s within {math.ceil(spread * 10 - 1e-9) / 10:.1f}% of each other."
        ),
        EXPLANATION,
    ]
    return "\n".join(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64, help="requests at the highest concurrency (16 at C=1)")
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each client per level, taking turns")
    ap.add_argument("--render", action="store_true", help="measure nothing: rebuild from bench/peer_clients/")
    ap.add_argument("--out", default=str(ROOT / "bench" / "peer_clients.md"))
    args = ap.parse_args()
    data = kept(DATA / "runs.json", args.render, lambda: measure(args))
    text = render(data)
    Path(args.out).write_text(text)
    print(text)
    return 0 if data else 1


EXPLANATION = """
## Which TTFT is right, and why they can differ

The wire is the referee: a client's TTFT can only add its own delays to what the kernel saw.

- Ours starts its clock when the request's headers go to the socket (an aiohttp trace hook), as
  GuideLLM 0.8.1 does (httpx's `send_request_headers.started`: `_trace_request_start` in
  guidellm/backends/openai/http.py); AIPerf 0.13.0 starts its clock when it builds the request
  record, before its aiohttp session is made and writes the request (`start_perf_ns` in
  aiperf/transports/aiohttp_client.py, read by aiperf/metrics/types/ttft_metric.py), so its own
  client-side delays count (the "client vs wire" column says by how much in this run).
- Where our TTFT reads above GuideLLM's, compare the wire column: our closed loop sends each wave of
  requests at once (all C workers start together and, with fixed-length outputs, stay in step), so
  the server prefills a whole wave as one batch and every request of it waits for that batch, as
  SGLang's scheduler does. GuideLLM's dispatcher spreads the same closed loop out (it warns of
  "dispatch delay"), so its requests arrive in smaller bunches (the "requests per burst" column) and
  meet smaller prefill batches. That is a difference in the load the clients make, not in their
  measurement; at C = 1 there is no batching.

The closed loop stays as it is: C users who each send their next request as soon as the last one
ended is the workload a sweep defines, and the seed campaign measured the same. docs/tuner.md ("TTFT
and other clients") says that TTFT at a given concurrency depends on how bunched the arrivals are, so
a TTFT SLO should be checked with the arrival pattern it is meant for.
"""


if __name__ == "__main__":
    sys.exit(main())
