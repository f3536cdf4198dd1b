#!/usr/bin/env python3
"""Benchmark: is the tuner's client measuring what the server emitted, and what does it cost?

For every concurrency level, against a real emulator process on loopback:
- tokens: the client's sum of output tokens against the emulator's own count, the level's delta of
  `sglang:generation_tokens_total` from /metrics; they must be equal;
- throughput: the client's aggregate tok/s (tokens / first send to last chunk) against what the
  emulator emitted: the same tokens over the emulator's own window. The emulator's window is
  the client's minus, at each end, what the emulator's own `meta_info.e2e_latency` (arrival to
  finish, on its clock) says the first and the last request did not spend inside it. All of that
  difference is charged to the window, so the difference reported is an upper bound of the
  client's error; the target is within 2% at every level;
- cost: the client process's CPU time (time.process_time) per streamed token and per chunk.

Writes the table to bench/client_accuracy.md (or --out) and exits 1 when a level misses a target.
Usage: .venv/bin/python bench/client_accuracy.py [--levels 1,4,16,32,64] [--output-len 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import git_rev, machine_text  # noqa: E402  (bench/: the script's own directory)

sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from emulator_proc import emulator  # noqa: E402

from tuner.measure.metrics import counter_delta, level_metrics  # noqa: E402
from tuner.run.client import BenchClient, ClientOptions  # noqa: E402
from tuner.spec.flags import requests_for_level  # noqa: E402


async def measure(url: str, levels: list[int], input_len: int, output_len: int) -> list[dict]:
    rows = []
    async with BenchClient(ClientOptions(url=url, input_len=input_len, output_len=output_len)) as cl:
        await cl.warmup(4, 4)
        for c in levels:
            n = requests_for_level(c, None)
            before = await cl.counters()
            cpu0 = time.process_time()
            traces = await cl.run_level(c, n)
            cpu = time.process_time() - cpu0
            after = await cl.counters()
            m = level_metrics(c, traces, counter_delta(before, after))
            emitted = counter_delta(before, after).get("generation_tokens")
            first = min(traces, key=lambda t: t.sent)
            last = max(traces, key=lambda t: t.chunk_times[-1] if t.chunk_times else t.sent)

            def outside(t) -> float:
                """Time of this request the emulator did not count as its own (client side, wire)."""
                client_e2e = t.chunk_times[-1] - t.sent
                return max(0.0, client_e2e - t.server_e2e_s) if t.server_e2e_s is not None else 0.0

            wall = max(t.chunk_times[-1] for t in traces if t.chunk_times) - first.sent
            server_window = wall - outside(first) - outside(last)
            chunks = sum(len(t.chunk_times) for t in traces)
            client_tps = m.output_tokens / wall
            emitted_tps = (emitted / server_window) if emitted and server_window > 0 else None
            rows.append(
                {
                    "c": c,
                    "requests": n,
                    "failed": m.requests_failed,
                    "client_tokens": m.output_tokens,
                    "emitted_tokens": int(emitted) if emitted is not None else None,
                    "client_tps": client_tps,
                    "emitted_tps": emitted_tps,
                    "diff_pct": (client_tps - emitted_tps) / emitted_tps * 100 if emitted_tps else None,
                    "cpu_us_token": cpu / max(1, m.output_tokens) * 1e6,
                    "cpu_us_chunk": cpu / max(1, chunks) * 1e6,
                    "tokens_per_chunk": m.output_tokens / max(1, chunks),
                    "cpu_share": cpu / wall,
                }
            )
            print(
                f"C={c}: client {client_tps:.1f} tok/s, emitted {emitted_tps or 0:.1f} tok/s, "
                f"CPU {rows[-1]['cpu_us_token']:.1f} us/token",
                file=sys.stderr,
                flush=True,
            )
    return rows


DATA = ROOT / "bench" / "client_accuracy"


def judge(rows: list[dict]) -> bool:
    return all(
        r["failed"] == 0
        and r["client_tokens"] == r["emitted_tokens"]
        and r["diff_pct"] is not None
        and abs(r["diff_pct"]) <= 2.0
        for r in rows
    )


def render(data: dict) -> str:
    rows, args, load, ok = data["rows"], data["args"], data["load"], judge(data["rows"])
    lines = [
        "# Client accuracy and cost (bench/client_accuracy.py)",
        "",
        f"- run: {data['run']} (code revision {data['revision']}), {data['machine']}, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end, Python {data['python']}; the measured rows are "
        "kept in `bench/client_accuracy/run.json` and `.venv/bin/python bench/client_accuracy.py --render` "
        "rebuilds this file from them",
        f"- server: `python -m tuner.emulator` on loopback, default (seed) profile, spec_steps {args['steps']}; "
        f"native /generate, {args['input_len']} input / {args['output_len']} output tokens, ignore_eos, "
        "requests per level max(4, 2 x C), closed loop",
        "- emitted tok/s: the emulator's generation_tokens_total delta over its own window (the client's, "
        "less what the emulator's e2e_latency says the first and last request spent outside it): the "
        "difference is an upper bound of the client's error",
        "- CPU: time.process_time() of the client process over the level (the emulator is another process)",
        "",
        "| C | requests | failed | client tokens | emitted tokens | client tok/s | emitted tok/s | diff | "
        "client CPU us/token | us/chunk | tokens/chunk | client CPU share |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['c']} | {r['requests']} | {r['failed']} | {r['client_tokens']} | {r['emitted_tokens']} | "
            f"{r['client_tps']:.1f} | {r['emitted_tps'] or 0:.1f} | {r['diff_pct'] or 0:+.2f}% | "
            f"{r['cpu_us_token']:.1f} | {r['cpu_us_chunk']:.1f} | {r['tokens_per_chunk']:.2f} | "
            f"{r['cpu_share'] * 100:.1f}% |"
        )
    lines += ["", f"Targets (tokens equal, |diff| <= 2% at every level): **{'met' if ok else 'MISSED'}**", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,4,16,32,64")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--out", default=str(ROOT / "bench" / "client_accuracy.md"))
    ap.add_argument("--render", action="store_true", help="measure nothing: rebuild from bench/client_accuracy/")
    args = ap.parse_args()
    kept = DATA / "run.json"
    if args.render:
        if not kept.exists():
            Path(args.out).write_text(
                "# Client accuracy and cost (bench/client_accuracy.py)\n\nNo kept data: run "
                "`.venv/bin/python bench/client_accuracy.py` (it keeps its rows in `bench/client_accuracy/run.json`).\n"
            )
            return 1
        data = json.loads(kept.read_text())
    else:
        levels = [int(x) for x in args.levels.split(",")]
        profile = ["--emulator-profile", args.profile] if args.profile else []
        with emulator(*profile, steps=args.steps) as url:
            rows = asyncio.run(measure(url, levels, args.input_len, args.output_len))
        data = {
            "run": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "revision": git_rev(),
            "machine": machine_text(),
            "python": platform.python_version(),
            "load": [round(x, 2) for x in os.getloadavg()],
            "args": {k: v for k, v in vars(args).items() if k not in ("render", "out")},
            "rows": rows,
        }
        DATA.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(data, indent=1) + "\n")
    text = render(data)
    Path(args.out).write_text(text)
    print(text)
    return 0 if judge(data["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
