#!/usr/bin/env python3
"""Fit the seed profile to docs/reference/seed-campaign.md and print the table kept in bench/emulator_calibration.md.

What it does
  * Replays the seed's benchmark procedure (closed-loop concurrency C in {1,4,16,32,64},
    max(4, 2C) requests per level, 1000 output tokens with ignore_eos, temperature 0) through the
    emulator's own scheduler in virtual time (tuner/emulator/simulate.py), for k = 0..5.
  * Compares every measured cell with the emulator (±12% is the bar) and checks that, among steps
    1..4, the best depth per concurrency is the seed's (4 at C=1-4, 3 at C>=16). Steps 5 is
    printed as the model's own answer, never fitted.
  * --fit: least-squares fit of the timing constants to the measured cells (scipy, at fit time
    only), written into the profile file's `key: value` lines (comments are kept).
  * --http: re-measures a subset of cells through the real server over HTTP on loopback (the
    emulator process with a short start-up, and a small streaming aiohttp client defined here).

Metric definitions (the seed's): aggregate tok/s = output tokens / wall time of the level;
per-request tok/s = mean over requests of (output_tokens - 1) / (e2e - ttft), the decode rate
(at C=64 with ~21 running slots the seed shows ~99 tok/s per request, which only a rate that
excludes queueing can be). The seed's prompt length is not recorded; prompts here are 256 words
(the tuner's default), and the fitted per-request overhead absorbs the C=1 gap between the
aggregate and per-request columns.

Usage: .venv/bin/python bench/emulator_calibration.py [--fit] [--http] [--out bench/emulator_calibration.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import git_rev  # noqa: E402  (bench/: the script's own directory)

sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from emulator_proc import emulator_cmd, emulator_process, free_port  # noqa: E402

from tuner.emulator import model, workload  # noqa: E402
from tuner.emulator.profile import DEFAULT_PROFILE_NAME, PROFILE_DIR, Profile, load_profile  # noqa: E402
from tuner.emulator.simulate import SpecSetting, closed_loop  # noqa: E402
from tuner.spec import prompts  # noqa: E402

LEVELS = (1, 4, 16, 32, 64)
INPUT_LEN = 256
OUTPUT_LEN = 1000
TOLERANCE = 0.12
SEEDS_FIT = (11,)
SEEDS_TABLE = (101, 202, 303)


@dataclass(frozen=True)
class Cell:
    k: int  # 0 = no speculation
    c: int
    metric: str  # "aggregate" | "per_request"
    value: float
    source: str


# docs/reference/seed-campaign.md, "Results" (every number it gives for throughput)
SEED_CELLS: tuple[Cell, ...] = (
    Cell(0, 1, "per_request", 122.0, "no speculation, C=1: 'about 122'"),
    Cell(1, 1, "aggregate", 122.9, "steps 1, C=1"),
    Cell(1, 1, "per_request", 124.3, "steps 1, C=1"),
    Cell(2, 1, "aggregate", 182.7, "steps 2 table, C=1"),
    Cell(2, 1, "per_request", 185.7, "steps 2 table, C=1"),
    Cell(3, 1, "aggregate", 229.1, "steps 3, C=1"),
    Cell(3, 1, "per_request", 234.0, "steps 3, C=1 headline (above its aggregate: per request)"),
    Cell(4, 1, "per_request", 277.0, "steps 4, C=1 headline (kind not recorded; read as per request)"),
    Cell(2, 4, "aggregate", 542.6, "steps 2 table"),
    Cell(2, 4, "per_request", 162.4, "steps 2 table"),
    Cell(2, 16, "aggregate", 1530.1, "steps 2 table"),
    Cell(2, 16, "per_request", 107.5, "steps 2 table"),
    Cell(2, 32, "aggregate", 1672.5, "steps 2 table"),
    Cell(2, 32, "per_request", 97.9, "steps 2 table"),
    Cell(2, 64, "aggregate", 1844.0, "steps 2 table"),
    Cell(2, 64, "per_request", 99.1, "steps 2 table"),
    Cell(1, 4, "per_request", 118.9, "steps 1 per-request list"),
    Cell(1, 16, "per_request", 84.9, "steps 1 per-request list"),
    Cell(1, 32, "per_request", 62.5, "steps 1 per-request list"),
    Cell(1, 64, "per_request", 65.3, "steps 1 per-request list"),
    Cell(1, 64, "aggregate", 1582.0, "C=64 aggregates (another run: 1566)"),
    Cell(3, 64, "aggregate", 1914.0, "C=64 aggregates"),
)
# "At concurrency 16 and above the aggregate peaked at num_steps 3; steps 4 was better only at 1-4."
SEED_BEST_K = {1: 4, 4: 4, 16: 3, 32: 3, 64: 3}
# KV-cache capacity read from the journal: k -> (max_running_requests, max_total_num_tokens or None)
SEED_CAPACITY = {1: (26, 455357), 2: (21, 377207), 3: (17, 295931), 4: (13, None)}

FIT_KEYS = ("alpha0", "t_spec_ms", "t_draft_ms", "c_verify_ms", "t_base_ms")
BOUNDS = {
    "alpha0": (0.80, 0.9995),
    "t_spec_ms": (4.0, 40.0),
    "t_draft_ms": (0.0, 4.0),
    "c_verify_ms": (0.01, 1.5),
    "t_base_ms": (1.0, 12.0),
}
# Inside the ±12% bar every cell counts by its log error; beyond BAND a cell is pushed back hard,
# so the fit minimises the errors subject to (in effect) every cell being within the bar.
BAND = 0.09
BAND_WEIGHT = 10.0


def c1_gap_s() -> float:
    """Per-request time at C=1 outside decoding: 1000/aggregate - 999/per-request, seed steps 1 and 2.

    In a closed loop at C=1 a request takes overhead + prefill + 999 decoded tokens, so this gap is
    exactly the emulator's time to first token (the seed shows ~0.1 s for both depths).
    """
    gaps = []
    for k in (1, 2):
        agg = next(c.value for c in SEED_CELLS if (c.k, c.c, c.metric) == (k, 1, "aggregate"))
        per = next(c.value for c in SEED_CELLS if (c.k, c.c, c.metric) == (k, 1, "per_request"))
        gaps.append(OUTPUT_LEN / agg - (OUTPUT_LEN - 1) / per)
    return statistics.fmean(gaps)


def request_overhead_ms(p: Profile) -> float:
    """The pre-admission overhead that makes the emulator's TTFT at C=1 equal the seed's gap."""
    return max(0.0, 1000.0 * c1_gap_s() - model.prefill_time_ms(p, INPUT_LEN))


def with_params(p: Profile, x: dict[str, float]) -> Profile:
    """The profile with the fitted constants; c_tok = c_verify (see the profile's comments)."""
    alpha = tuple((t, (x["alpha0"] if t == 0.0 else a)) for t, a in p.alpha)
    return replace(
        p,
        alpha=alpha,
        t_spec_ms=x["t_spec_ms"],
        t_draft_ms=x["t_draft_ms"],
        c_verify_ms=x["c_verify_ms"],
        c_tok_ms=x["c_verify_ms"],
        t_base_ms=x["t_base_ms"],
        t_request_overhead_ms=request_overhead_ms(p),
    )


def params_of(p: Profile) -> dict[str, float]:
    return {
        "alpha0": p.alpha_at(0.0),
        "t_spec_ms": p.t_spec_ms,
        "t_draft_ms": p.t_draft_ms,
        "c_verify_ms": p.c_verify_ms,
        "t_base_ms": p.t_base_ms,
        "t_request_overhead_ms": p.t_request_overhead_ms,
    }


def simulate_grid(
    p: Profile, ks: tuple[int, ...], seeds: tuple[int, ...], levels: tuple[int, ...] = LEVELS
) -> dict[tuple[int, int], dict[str, float]]:
    """(k, C) -> mean aggregate / per-request tok/s over the seeds (virtual time)."""
    out: dict[tuple[int, int], dict[str, float]] = {}
    for k in ks:
        for c in levels:
            if k == 0 and c != 1:
                continue
            aggs, pers, accs = [], [], []
            for s in seeds:
                r = closed_loop(
                    p,
                    SpecSetting(k),
                    concurrency=c,
                    n_requests=max(4, 2 * c),
                    input_len=INPUT_LEN,
                    output_len=OUTPUT_LEN,
                    temperature=0.0,
                    seed=s * 1000 + 10 * k + c,
                )
                aggs.append(r.aggregate_tok_s)
                pers.append(r.per_request_tok_s)
                accs.append(r.accept_length)
                mrr, kv = r.max_running_requests, r.max_total_num_tokens
            out[(k, c)] = {
                "aggregate": statistics.fmean(aggs),
                "per_request": statistics.fmean(pers),
                "accept_length": statistics.fmean(accs),
                "mrr": mrr,
                "kv": kv,
            }
    return out


def residuals(p: Profile, seeds: tuple[int, ...]) -> list[float]:
    grid = simulate_grid(p, (0, 1, 2, 3, 4), seeds)
    res = []
    for c in SEED_CELLS:
        e = math.log(grid[(c.k, c.c)][c.metric] / c.value)
        res.append(e)
        res.append(BAND_WEIGHT * max(0.0, abs(e) - BAND))
    # the seed's measured ordering among steps 1..4 (hinge: zero once the best k wins by 1%)
    for c, best in SEED_BEST_K.items():
        top = grid[(best, c)]["aggregate"]
        for k in (1, 2, 3, 4):
            if k != best:
                res.append(3.0 * max(0.0, math.log(grid[(k, c)]["aggregate"] / top) + 0.01))
    return res


def minimax_objective(p: Profile, seeds: tuple[int, ...]) -> float:
    """Worst cell error (soft), plus a little RMS and the ordering penalty: the ±12% bar is a max."""
    res = residuals(p, seeds)
    cells = [r for i, r in enumerate(res[: 2 * len(SEED_CELLS)]) if i % 2 == 0]
    order = res[2 * len(SEED_CELLS) :]
    worst = max(abs(e) for e in cells)
    rms = math.sqrt(sum(e * e for e in cells) / len(cells))
    return worst + 0.1 * rms + 5.0 * sum(order)


def fit(p: Profile) -> Profile:
    """Least squares over the cells (with a band penalty), then a Nelder-Mead polish of the worst cell."""
    import numpy as np  # fit-time only; the emulator itself never needs numpy/scipy
    from scipy.optimize import least_squares, minimize

    x0 = params_of(p)
    lo = np.array([BOUNDS[k][0] for k in FIT_KEYS])
    hi = np.array([BOUNDS[k][1] for k in FIT_KEYS])
    v0 = np.clip(np.array([x0[k] for k in FIT_KEYS]), lo + 1e-9, hi - 1e-9)

    def f(v: np.ndarray) -> np.ndarray:
        return np.array(residuals(with_params(p, dict(zip(FIT_KEYS, v, strict=False))), SEEDS_FIT))

    sol = least_squares(f, v0, bounds=(lo, hi), diff_step=1e-2, x_scale="jac", max_nfev=400, verbose=0)
    print(f"fit: least squares cost={sol.cost:.5f} nfev={sol.nfev}", file=sys.stderr)

    def g(v: np.ndarray) -> float:
        if np.any(v < lo) or np.any(v > hi):
            return 10.0
        return minimax_objective(with_params(p, dict(zip(FIT_KEYS, v, strict=False))), SEEDS_FIT)

    nm = minimize(g, sol.x, method="Nelder-Mead", options={"maxfev": 250, "xatol": 1e-4, "fatol": 1e-5})
    best = nm.x if nm.fun < g(sol.x) else sol.x
    print(f"fit: Nelder-Mead worst-cell objective {g(sol.x):.4f} -> {nm.fun:.4f} (nfev={nm.nfev})", file=sys.stderr)
    return with_params(p, dict(zip(FIT_KEYS, (float(v) for v in best), strict=False)))


def write_profile(path: Path, p: Profile) -> None:
    """Replace the fitted `key: value` lines in place; comments and other keys stay as written."""
    text = path.read_text(encoding="utf-8")
    x = params_of(p)
    values = {
        "t_spec_ms": round(x["t_spec_ms"], 3),
        "t_draft_ms": round(x["t_draft_ms"], 3),
        "c_verify_ms": round(x["c_verify_ms"], 4),
        "c_tok_ms": round(x["c_verify_ms"], 4),
        "t_base_ms": round(x["t_base_ms"], 3),
        "t_request_overhead_ms": round(x["t_request_overhead_ms"], 1),
    }
    for key, val in values.items():
        text, n = re.subn(rf"^({key}:\s*)[-0-9.eE]+", rf"\g<1>{val}", text, flags=re.M)
        if n != 1:
            raise SystemExit(f"profile {path}: expected one '{key}:' line, found {n}")
    text, n = re.subn(r"^(\s+0\.0:\s*)[0-9.]+", rf"\g<1>{round(x['alpha0'], 4)}", text, flags=re.M)
    if n != 1:
        raise SystemExit(f"profile {path}: expected one alpha '0.0:' line, found {n}")
    path.write_text(text, encoding="utf-8")


# ---- the HTTP check: the real server on loopback, measured by a small streaming client -------------


async def _one_request(session, url: str, index: int) -> dict[str, float]:
    import aiohttp  # noqa: F401

    prompt = " ".join(f"w{index}x{i}" for i in range(INPUT_LEN))
    body = {
        "prompt": prompt,
        "max_tokens": OUTPUT_LEN,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    ttft = None
    tokens = 0
    async with session.post(url + "/v1/completions", json=body) as resp:
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}")
        async for line in resp.content:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                break
            obj = json.loads(data)
            if obj.get("choices") and obj["choices"][0].get("text"):
                if ttft is None:
                    ttft = time.perf_counter() - t0
            if obj.get("usage"):
                tokens = obj["usage"]["completion_tokens"]
    e2e = time.perf_counter() - t0
    return {"ttft": ttft or e2e, "e2e": e2e, "tokens": tokens}


async def _closed_loop_http(url: str, c: int, n: int) -> dict[str, float]:
    import aiohttp

    results: list[dict[str, float]] = []
    next_index = 0
    t0 = time.perf_counter()

    async def client(session) -> None:
        nonlocal next_index
        while next_index < n:
            i = next_index
            next_index += 1
            results.append(await _one_request(session, url, i))

    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as session:
        await asyncio.gather(*(client(session) for _ in range(c)))
    wall = time.perf_counter() - t0
    total = sum(r["tokens"] for r in results)
    per = [(r["tokens"] - 1) / (r["e2e"] - r["ttft"]) for r in results if r["tokens"] > 1 and r["e2e"] > r["ttft"]]
    return {"aggregate": total / wall, "per_request": statistics.fmean(per), "wall": wall, "tokens": total}


def http_measure(profile_path: Path, k: int, levels: tuple[int, ...]) -> dict[int, dict[str, float]]:
    port = free_port()
    cmd = emulator_cmd(
        "--tp-size",
        "4",
        "--emulator-profile",
        str(profile_path),
        "--emulator-startup-s",
        "0.5",
        "--random-seed",
        str(1000 + k),
        "--log-level",
        "warning",
        port=port,
        model="/shared/models/Qwen3.5-122B-A10B",
    )
    if k:
        cmd += [
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(k + 1),
        ]
    # the one helper (tests/helpers/emulator_proc.py): an emulator that dies says so at once
    with emulator_process(cmd, f"http://127.0.0.1:{port}", timeout=30):
        out = {}
        for c in levels:
            out[c] = asyncio.run(_closed_loop_http(f"http://127.0.0.1:{port}", c, max(4, 2 * c)))
            print(
                f"  http k={k} C={c}: agg {out[c]['aggregate']:.1f} per-req {out[c]['per_request']:.1f} "
                f"wall {out[c]['wall']:.1f}s",
                file=sys.stderr,
            )
        return out


HTTP_SUBSET = {1: (64,), 2: (1, 16, 64), 3: (64,), 4: (1, 4)}


# ---- the report ---------------------------------------------------------------------------------


def pct(a: float, b: float) -> float:
    return 100.0 * (a / b - 1.0)


def prompt_rule_section(p: Profile) -> list[str]:
    """The calibration holds for the prompts the seed's numbers are matched with: the acceptance rule
    of docs/emulator.md ("Acceptance") applied to the tuner's synthetic prompts and to this script's."""
    kinds = [
        ("this script's HTTP prompts (unique words)", [f"w0x{i}" for i in range(INPUT_LEN)]),
        ("the tuner's /generate prompts (token ids, tuner/spec/prompts.py)", prompts.prompt_ids(0, INPUT_LEN)),
        ("the tuner's OpenAI prompts (random common words)", prompts.prompt_words(0, INPUT_LEN)),
    ]
    a0 = p.alpha_at(0.0)
    out = [
        "## The prompts behind the seed's numbers (acceptance rule, docs/emulator.md)",
        "",
        f"alpha(T=0) of the profile: {a0:.4f}. Each kind of prompt's content score and the alpha the rule gives it;",
        "tau(3) / tau(4) move the C=1 cells in proportion.",
        "",
        "| prompts | score | alpha | tau(3) | tau(4) | tau(4) vs profile |",
        "|---|---|---|---|---|---|",
    ]
    for name, toks in kinds:
        a = workload.request_alpha(p, 0.0, 1.0, toks)
        score = workload.content_score(toks) or 0.0
        t4 = model.tau(a, 4)
        out.append(
            f"| {name} | {score:.4f} | {a:.4f} | {model.tau(a, 3):.3f} | {t4:.3f} | {t4 / model.tau(a0, 4) - 1:+.1%} |"
        )
    return out + [""]


def render(p: Profile, grid, http: dict[tuple[int, int], dict[str, float]], elapsed: float) -> tuple[str, bool]:
    lines: list[str] = []
    ok_all = True
    x = params_of(p)
    lines += [
        "# Emulator calibration: seed profile vs docs/reference/seed-campaign.md",
        "",
        "Generated by `.venv/bin/python bench/emulator_calibration.py"
        + (" --http" if http else "")
        + "` (do not edit by hand).",
        f"Profile: `{Path(p.path).relative_to(ROOT) if p.path.startswith(str(ROOT)) else p.path}`.",
        "",
        "Procedure (the seed's): closed-loop concurrency C, max(4, 2C) requests per level, 1000 output tokens,",
        f"ignore_eos, temperature 0; prompts of {INPUT_LEN} words. *Emulator* = the server's own scheduler in virtual",
        f"time, mean of {len(SEEDS_TABLE)} random seeds (not the fit's seed). *HTTP* = the real emulator process on loopback",
        "measured by a streaming client (a subset of cells; a few minutes of real time).",
        "aggregate = output tokens / wall time; per-request = mean of (tokens-1)/(e2e-ttft) (the decode rate).",
        "",
        "Fit (`--fit`): least squares over the log errors of every cell below, with a steep penalty beyond 9%",
        "and a hinge on the seed's measured ordering (aggregate peaks at 4 for C=1-4 and at 3 for C>=16, among",
        "steps 1..4), then a Nelder-Mead polish of the worst cell. Free: alpha(T=0), t_spec, t_draft, c_verify",
        "(= c_tok), t_base. Fixed: prefill constants (hardware estimate), capacity (the journal), the per-request",
        "overhead (derived from the C=1 gap). Steps 5 is in no residual.",
        "",
        "## Fitted constants",
        "",
        "| constant | value |",
        "|---|---|",
        f"| alpha at temperature 0 | {x['alpha0']:.4f} (tau(1..5) = "
        + ", ".join(f"{model.tau(x['alpha0'], k):.2f}" for k in range(1, 6))
        + ") |",
        f"| t_base_ms / c_tok_ms (no speculation) | {p.t_base_ms:.3f} / {p.c_tok_ms:.4f} |",
        f"| t_spec_ms | {p.t_spec_ms:.3f} |",
        f"| t_draft_ms | {p.t_draft_ms:.3f} |",
        f"| c_verify_ms | {p.c_verify_ms:.4f} |",
        f"| t_prefill_base_ms / t_prefill_tok_ms (fixed, see profile) | {p.t_prefill_base_ms:g} / {p.t_prefill_tok_ms:g} |",
        f"| t_request_overhead_ms (from the seed's C=1 gap of {1000 * c1_gap_s():.1f} ms, minus prefill) | {p.t_request_overhead_ms:.1f} |",
        "",
        "## Every measured cell (tolerance ±12%)",
        "",
        "| steps | C | metric | seed | emulator | error | HTTP | error | pass |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in SEED_CELLS:
        em = grid[(c.k, c.c)][c.metric]
        e = pct(em, c.value)
        h = http.get((c.k, c.c))
        hv = f"{h[c.metric]:.1f}" if h else ""
        he = f"{pct(h[c.metric], c.value):+.1f}%" if h else ""
        ok = abs(e) <= 100 * TOLERANCE and (not h or abs(pct(h[c.metric], c.value)) <= 100 * TOLERANCE)
        ok_all &= ok
        lines.append(
            f"| {c.k if c.k else 'none'} | {c.c} | {c.metric.replace('_', '-')} | {c.value:g} | {em:.1f} | "
            f"{e:+.1f}% | {hv} | {he} | {'PASS' if ok else 'FAIL'} |"
        )
    worst = max(SEED_CELLS, key=lambda c: abs(pct(grid[(c.k, c.c)][c.metric], c.value)))
    lines += [
        "",
        f"Worst cell (emulator): steps {worst.k}, C={worst.c}, {worst.metric.replace('_', '-')}: "
        f"{pct(grid[(worst.k, worst.c)][worst.metric], worst.value):+.1f}%.",
    ]
    if http:
        hw = max(
            ((c, http[(c.k, c.c)]) for c in SEED_CELLS if (c.k, c.c) in http),
            key=lambda x: abs(pct(x[1][x[0].metric], x[0].value)),
        )
        lines.append(
            f"Worst HTTP cell: steps {hw[0].k}, C={hw[0].c}, {hw[0].metric.replace('_', '-')}: "
            f"{pct(hw[1][hw[0].metric], hw[0].value):+.1f}%; HTTP vs emulator over the subset: "
            + ", ".join(f"{pct(h[m], grid[key][m]):+.1f}%" for key, h in sorted(http.items()) for m in ("aggregate",))
            + " (aggregate)."
        )
    lines += [
        "",
        "Seed numbers: docs/reference/seed-campaign.md, Results (each row's source is noted in `SEED_CELLS` in the",
        "script). The seed's token totals at C>=4 are below requests x 1000 (unexplained), so its aggregate",
        "column there is lower than its per-request column implies; the emulator always emits the requested",
        "1000 tokens, and the fit balances the two columns (see the signs of the errors).",
        "",
    ]

    lines += prompt_rule_section(p)
    lines += [
        "## Capacity (from the profile; the journal's numbers)",
        "",
        "| steps | max_running_requests seed | emulator | max_total_num_tokens seed | emulator |",
        "|---|---|---|---|---|",
    ]
    for k, (mrr, kv) in SEED_CAPACITY.items():
        cap = model.capacity(p, k, 48, None)
        ok = cap.max_running_requests == mrr and (kv is None or kv == cap.max_total_num_tokens)
        ok_all &= ok
        lines.append(
            f"| {k} | {mrr} | {cap.max_running_requests} | {kv if kv else 'not recorded'} | "
            f"{cap.max_total_num_tokens} |"
        )
    lines.append("")

    lines += [
        "## Best steps per concurrency (aggregate tok/s, emulator)",
        "",
        "| C | " + " | ".join(f"k={k}" for k in (1, 2, 3, 4, 5)) + " | best of 1..4 | seed | match | best of 1..5 |",
        "|---|" + "---|" * 5 + "---|---|---|---|",
    ]
    for c in LEVELS:
        aggs = {k: grid[(k, c)]["aggregate"] for k in (1, 2, 3, 4, 5)}
        best4 = max((1, 2, 3, 4), key=lambda k: aggs[k])
        best5 = max((1, 2, 3, 4, 5), key=lambda k: aggs[k])
        ok = best4 == SEED_BEST_K[c]
        ok_all &= ok
        lines.append(
            f"| {c} | "
            + " | ".join(f"{aggs[k]:.1f}" for k in (1, 2, 3, 4, 5))
            + f" | {best4} | {SEED_BEST_K[c]} | {'PASS' if ok else 'FAIL'} | {best5} |"
        )
    lines += ["", "k=5 was never measured on the seed machine; its column is the fitted model's own prediction.", ""]

    lines += [
        "## Predicted grid (emulator, virtual time)",
        "",
        "| steps | max_running_requests | max_total_num_tokens | accept len | "
        + " | ".join(f"C={c} agg / per-req" for c in LEVELS)
        + " |",
        "|---|---|---|---|" + "---|" * len(LEVELS),
    ]
    for k in (0, 1, 2, 3, 4, 5):
        cells = []
        for c in LEVELS:
            g = grid.get((k, c))
            cells.append(f"{g['aggregate']:.0f} / {g['per_request']:.0f}" if g else "")
        g1 = grid[(k, 1)]
        lines.append(
            f"| {k if k else 'none'} | {g1['mrr']} | {g1['kv']} | {g1['accept_length']:.2f} | "
            + " | ".join(cells)
            + " |"
        )
    rule = (
        f"every seed cell within {TOLERANCE:.0%} (simulated and over HTTP), the capacity lines equal, and the best "
        "of steps 1-4 at each concurrency the seed's"
    )
    lines += [
        "",
        f"Result, by the rule ({rule}): **{'ALL PASS' if ok_all else 'SOME FAIL'}** (table computed in {elapsed:.0f} s).",
        "",
    ]
    return "\n".join(lines), ok_all


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default=str(PROFILE_DIR / DEFAULT_PROFILE_NAME))
    ap.add_argument("--fit", action="store_true", help="fit the timing constants and write them into the profile")
    ap.add_argument("--http", action="store_true", help="also measure a subset of cells through the real server")
    ap.add_argument("--out", default=str(ROOT / "bench" / "emulator_calibration.md"))
    ap.add_argument(
        "--render", action="store_true", help="measure nothing: rebuild from bench/emulator_calibration/run.json"
    )
    a = ap.parse_args()
    kept = ROOT / "bench" / "emulator_calibration" / "run.json"
    path = Path(a.profile)
    if a.render:
        if not kept.exists():
            raise SystemExit(f"{kept}: no kept run (run the script without --render)")
        data = json.loads(kept.read_text())
        p = load_profile(path)
        grid = {(int(k), int(c)): v for k, c, v in data["grid"]}
        http = {(int(k), int(c)): v for k, c, v in data["http"]}
        elapsed = float(data["elapsed_s"])
    else:
        t0 = time.time()
        p = load_profile(path)
        if a.fit:
            p = fit(p)
            write_profile(path, p)
            p = load_profile(path)
        grid = simulate_grid(p, (0, 1, 2, 3, 4, 5), SEEDS_TABLE)
        http = {}
        if a.http:
            for k, levels in HTTP_SUBSET.items():
                for c, r in http_measure(path, k, levels).items():
                    http[(k, c)] = r
        elapsed = time.time() - t0
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(
            json.dumps(
                {
                    "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "revision": git_rev(),
                    "profile": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
                    "elapsed_s": round(elapsed, 1),
                    "grid": [[k, c, v] for (k, c), v in sorted(grid.items())],
                    "http": [[k, c, v] for (k, c), v in sorted(http.items())],
                },
                indent=1,
            )
            + "\n"
        )
    text, ok = render(p, grid, http, elapsed)
    text = text.rstrip("\n") + (
        "\n\nRaw data: `bench/emulator_calibration/run.json` (the simulated grid and the HTTP cells as measured); "
        "`.venv/bin/python bench/emulator_calibration.py --render` rebuilds this file from it.\n"
    )
    print(text)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
