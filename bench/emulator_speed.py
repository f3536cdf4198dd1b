#!/usr/bin/env python3
"""Does the emulator keep its own clock on this machine? Predicted vs emitted tokens, and CPU per token.

Each run starts the real emulator (a separate process) and drives it with a closed loop of 64
concurrent streaming clients (the seed's C=64 level: 128 requests of 1000 tokens, ignore_eos,
temperature 0) from this process. The same run is replayed in virtual time by the emulator's own
scheduler (tuner/emulator/simulate.py); the emulator keeps its clock if the tokens it actually
emitted per second of wall time are within 2% of that prediction. The server's CPU time (from
/proc) divided by the tokens it emitted is its CPU cost per token. Ratios are compared side by side
within one run, because the machine is shared.

Rows: the seed profile at k=3 (17 requests decode at once, 47 wait), and the same profile with
the state-slot cap lifted so that all 64 streams decode at once (the heaviest load: one chunk per
stream per verify step).

Usage: .venv/bin/python bench/emulator_speed.py [--out bench/emulator_speed.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import git_rev  # noqa: E402  (bench/: the script's own directory)

sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from emulator_proc import emulator_cmd, emulator_process, free_port  # noqa: E402

from tuner.emulator.profile import DEFAULT_PROFILE_NAME, PROFILE_DIR, load_profile  # noqa: E402
from tuner.emulator.simulate import SpecSetting, closed_loop  # noqa: E402

CONCURRENCY = 64
REQUESTS = 128
INPUT_LEN = 256
OUTPUT_LEN = 1000
K = 3
SEED = 20261129
TOLERANCE = 0.02


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} ([\d.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


async def one(session, url: str, i: int, stats: dict) -> None:
    prompt = " ".join(f"s{i}w{j}" for j in range(INPUT_LEN))
    body = {
        "prompt": prompt,
        "max_tokens": OUTPUT_LEN,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with session.post(url + "/v1/completions", json=body) as resp:
        assert resp.status == 200, resp.status
        async for line in resp.content:
            if line.startswith(b"data: {") and b'"usage":{' in line:
                stats["tokens"] += json.loads(line[6:])["usage"]["completion_tokens"]
                stats["done"] += 1


async def drive(url: str) -> dict:
    import aiohttp

    stats = {"tokens": 0, "done": 0}
    nxt = 0

    async def client(session) -> None:
        nonlocal nxt
        while nxt < REQUESTS:
            i = nxt
            nxt += 1
            await one(session, url, i, stats)

    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=900)) as s:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(s) for _ in range(CONCURRENCY)))
        stats["wall"] = time.perf_counter() - t0
    return stats


def run_case(label: str, profile_path: Path, extra: list[str]) -> dict:
    p = load_profile(profile_path)
    pred = closed_loop(
        p,
        SpecSetting(K, mrr_flag=CONCURRENCY),
        concurrency=CONCURRENCY,
        n_requests=REQUESTS,
        input_len=INPUT_LEN,
        output_len=OUTPUT_LEN,
        temperature=0.0,
        seed=SEED,
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = emulator_cmd(
        "--tp-size",
        "4",
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        str(K),
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        str(K + 1),
        "--max-running-requests",
        str(CONCURRENCY),
        "--enable-metrics",
        "--random-seed",
        str(SEED),
        "--emulator-profile",
        str(profile_path),
        "--emulator-startup-s",
        "0.5",
        *extra,
        port=port,
        model="/shared/models/Qwen3.5-122B-A10B",
    )
    with tempfile.TemporaryDirectory(prefix="emu-speed-") as tmp:
        log = Path(tmp) / "emulator.log"
        try:
            with emulator_process(cmd, url, log=log, timeout=30) as proc:
                gen0 = metric(url, "sglang:generation_tokens_total")
                cpu0 = cpu_seconds(proc.pid)
                client_cpu0 = time.process_time()
                stats = asyncio.run(drive(url))
                cpu = cpu_seconds(proc.pid) - cpu0
                client_cpu = time.process_time() - client_cpu0
                emitted = metric(url, "sglang:generation_tokens_total") - gen0
                info = json.loads(urllib.request.urlopen(url + "/server_info", timeout=10).read())
                clock = info["emulator"]["clock"]
        except RuntimeError as exc:  # it did not come up: its log says why
            raise RuntimeError(f"{exc}:\n{log.read_text(errors='replace')[-2000:]}") from None
    measured_rate = stats["tokens"] / stats["wall"]
    return {
        "label": label,
        "mrr": pred.max_running_requests,
        "pred_wall": pred.wall_s,
        "pred_tokens": pred.output_tokens,
        "pred_rate": pred.aggregate_tok_s,
        "wall": stats["wall"],
        "tokens": stats["tokens"],
        "emitted": emitted,
        "rate": measured_rate,
        "ratio": measured_rate / pred.aggregate_tok_s,
        "cpu": cpu,
        "client_cpu": client_cpu,
        "cpu_us_per_token": 1e6 * cpu / max(emitted, 1),
        "cpu_share": cpu / stats["wall"],
        "max_lag_ms": clock["max_lag_ms"],
        "lag_resets": clock["lag_resets"],
        "done": stats["done"],
    }


DATA = ROOT / "bench" / "emulator_speed"


def measure_rows() -> list[dict]:
    seed_path = PROFILE_DIR / DEFAULT_PROFILE_NAME
    raw = yaml.safe_load(seed_path.read_text())
    raw.update(state_slots=80.0, state_slots_per_step=0.0, name="seed-all-64-decoding")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(raw, f)
        wide_path = Path(f.name)
    rows = []
    try:
        rows.append(run_case("seed profile, k=3 (17 decoding, 47 queued)", seed_path, []))
        rows.append(run_case("seed profile, k=3, all 64 decoding", wide_path, []))
    finally:
        wide_path.unlink()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "emulator_speed.md"))
    ap.add_argument("--render", action="store_true", help="measure nothing: rebuild from bench/emulator_speed/")
    a = ap.parse_args()
    kept = DATA / "run.json"
    if a.render:
        if not kept.exists():
            text = (
                "# Emulator speed: does it keep its own clock?\n\nNo kept data: the run this file once showed kept "
                "no raw rows, so its figures are not repeated here. Regenerate: `.venv/bin/python "
                "bench/emulator_speed.py` (it keeps its rows in `bench/emulator_speed/run.json`; `--render` "
                "rebuilds this file from them).\n"
            )
            Path(a.out).write_text(text, encoding="utf-8")
            print(text)
            return 1
        meta = json.loads(kept.read_text())
        rows = meta["rows"]
    else:
        rows = measure_rows()
        meta = {
            "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "revision": git_rev(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load": round(os.getloadavg()[0], 1),
            "rows": rows,
        }
        DATA.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(meta, indent=1) + "\n")
    ok = all(abs(r["ratio"] - 1) <= TOLERANCE and r["done"] == REQUESTS for r in rows)
    lines = [
        "# Emulator speed: does it keep its own clock?",
        "",
        f"Generated by `.venv/bin/python bench/emulator_speed.py` on {meta['run']} (code revision "
        f"{meta['revision']}; do not edit by hand) from the rows kept in `bench/emulator_speed/run.json`; "
        "`--render` rebuilds this file from them.",
        f"Machine: {meta['cores']} cores, Python {meta['python']}, shared with other work (load {meta['load']}).",
        "",
        f"Closed loop: {CONCURRENCY} concurrent streaming clients (/v1/completions, SSE), {REQUESTS} requests of "
        f"{OUTPUT_LEN} tokens (ignore_eos, temperature 0), {INPUT_LEN}-word prompts, NEXTN k={K}, "
        f"--max-running-requests {CONCURRENCY}. *Predicted*: the same run in virtual time through the same scheduler. "
        "*Emitted*: tokens the clients received per second of wall time. The server's CPU comes from /proc "
        "(the client runs in this process, on the other core).",
        "",
        "| run | decoding at once | predicted wall s | predicted tok/s | measured wall s | emitted tok/s | "
        "emitted / predicted | server CPU s | server CPU share | CPU per token | client CPU s | max lag ms | "
        "lag resets | within 2% |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['mrr']} | {r['pred_wall']:.2f} | {r['pred_rate']:.1f} | {r['wall']:.2f} | "
            f"{r['rate']:.1f} | {r['ratio']:.4f} | {r['cpu']:.2f} | {100 * r['cpu_share']:.0f}% | "
            f"{r['cpu_us_per_token']:.1f} µs | {r['client_cpu']:.2f} | {r['max_lag_ms']:.1f} | {r['lag_resets']} | "
            f"{'PASS' if abs(r['ratio'] - 1) <= TOLERANCE else 'FAIL'} |"
        )
    lines += [
        "",
        f"Tokens: every run emitted {REQUESTS} x {OUTPUT_LEN} = {REQUESTS * OUTPUT_LEN} tokens "
        "(server counter: " + ", ".join(f"{int(r['emitted'])}" for r in rows) + ").",
        "",
        f"Result, by the rule (every run's emitted tokens per second within {TOLERANCE:.0%} of the profile's "
        f"prediction and all {REQUESTS} requests done): **{'PASS' if ok else 'FAIL'}**.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
