#!/usr/bin/env python3
"""Measure one decode/verify forward's cost on a real GPU, by batch and verify width.

What an emulator profile's `step_time_ms` table stands for (docs/emulator.md "Step time measured on a GPU"): one
full forward of a decoder-only model for B requests x q new tokens each (q = steps + 1 for a
chain's verify; q = 1 is plain decode), embedding -> layers -> LM head over every new token, each
request with a `--context` token KV cache. bf16, random weights, CUDA graphs (SGLang replays its
decode and verify forwards as graphs: `cuda_graph_runner.py`), the median of `--replays` replays
per cell timed with CUDA events. GEMMs are cuBLAS; attention packs each KV head's query group into
one head (GQA) and runs PyTorch's scaled-dot-product attention, which reads each request's KV once
per layer, as serving engines' decode kernels do. Also measured: one step of an EAGLE-3-style
draft head (one decoder layer of the target's width plus the full-vocabulary LM head) by batch,
and the KV read's cost per cached token (the slope of a decode step over contexts).

It is the shape of a GPU's cost, not any engine's numbers: no tensor parallelism, FP8, paged KV or
scheduler time. Run on the GPU machine (needs only PyTorch):

    python3 scripts/device_step_cost.py --shape qwen2.5-14b --out step-cost.json

and render a kept run's page anywhere: `--render step-cost.json --out page.md`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from typing import Any

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --render reads a kept run and needs no GPU
    torch = None  # type: ignore[assignment]

# Public model shapes (each model's config.json on the Hugging Face hub).
SHAPES = {
    # meta-llama/Meta-Llama-3-8B
    "llama3-8b": {
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "mlp": 14336,
        "vocab": 128256,
    },
    # Qwen/Qwen2.5-14B
    "qwen2.5-14b": {
        "layers": 48,
        "hidden": 5120,
        "heads": 40,
        "kv_heads": 8,
        "head_dim": 128,
        "mlp": 13824,
        "vocab": 152064,
    },
}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
WIDTHS = (1, 2, 3, 4, 5, 6, 8)
CONTEXTS = (256, 1024, 4096, 16384)


class Model:
    """Random bf16 weights and a KV cache for `max_batch` requests of `context` + 8 tokens."""

    def __init__(self, shape: dict[str, int], layers: int, max_batch: int, context: int, dev: torch.device):
        h, hd, nh, kvh, m = shape["hidden"], shape["head_dim"], shape["heads"], shape["kv_heads"], shape["mlp"]
        self.shape, self.context = shape, context

        def w(*size: int) -> torch.Tensor:
            return torch.randn(*size, dtype=torch.bfloat16, device=dev) * 0.02

        self.layers = [
            {
                "norm1": torch.ones(h, dtype=torch.bfloat16, device=dev),
                "qkv": w(h, (nh + 2 * kvh) * hd),
                "o": w(nh * hd, h),
                "norm2": torch.ones(h, dtype=torch.bfloat16, device=dev),
                "gate_up": w(h, 2 * m),
                "down": w(m, h),
                "k": torch.randn(max_batch, kvh, context + 8, hd, dtype=torch.bfloat16, device=dev),
                "v": torch.randn(max_batch, kvh, context + 8, hd, dtype=torch.bfloat16, device=dev),
            }
            for _ in range(layers)
        ]
        self.embed = w(shape["vocab"], h)
        self.norm = torch.ones(h, dtype=torch.bfloat16, device=dev)
        self.lm_head = w(h, shape["vocab"])

    def forward(self, ids: torch.Tensor, batch: int, width: int, context: int) -> torch.Tensor:
        s = self.shape
        hd, nh, kvh = s["head_dim"], s["heads"], s["kv_heads"]
        group = nh // kvh
        x = self.embed[ids]  # [batch * width, hidden]
        for layer in self.layers:
            y = F.rms_norm(x, (s["hidden"],), layer["norm1"])
            qkv = y @ layer["qkv"]
            q = qkv[:, : nh * hd]
            # the query heads of each KV head packed together: [batch, kv_heads, group * width, hd]
            q = q.view(batch, width, kvh, group, hd).permute(0, 2, 3, 1, 4).reshape(batch, kvh, group * width, hd)
            k = layer["k"][:batch, :, : context + width]
            v = layer["v"][:batch, :, : context + width]
            a = F.scaled_dot_product_attention(q, k, v)
            a = a.reshape(batch, kvh, group, width, hd).permute(0, 3, 1, 2, 4).reshape(batch * width, nh * hd)
            x = x + a @ layer["o"]
            y = F.rms_norm(x, (s["hidden"],), layer["norm2"])
            gu = y @ layer["gate_up"]
            g, u = gu.chunk(2, dim=-1)
            x = x + (F.silu(g) * u) @ layer["down"]
        return F.rms_norm(x, (s["hidden"],), self.norm) @ self.lm_head


def time_graph(fn, replays: int) -> float:
    """Median ms of `replays` replays of `fn` captured as one CUDA graph (after warm-ups)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times)


def step_table(shape: dict[str, int], context: int, replays: int, dev: torch.device) -> list[list[float]]:
    model = Model(shape, shape["layers"], max(BATCHES), context, dev)
    out = []
    for b in BATCHES:
        row = []
        for q in WIDTHS:
            ids = torch.randint(0, shape["vocab"], (b * q,), device=dev)
            row.append(round(time_graph(lambda m=model, ids=ids, b=b, q=q: m.forward(ids, b, q, context), replays), 3))
        out.append(row)
        print(f"  B={b}: {row}", flush=True)
    del model
    torch.cuda.empty_cache()
    return out


def draft_row(shape: dict[str, int], context: int, replays: int, dev: torch.device) -> list[float]:
    """One EAGLE-3-style head step (one decoder layer plus the LM head) by batch, one token each."""
    head = Model(shape, 1, max(BATCHES), context, dev)
    out = []
    for b in BATCHES:
        ids = torch.randint(0, shape["vocab"], (b,), device=dev)
        out.append(round(time_graph(lambda m=head, ids=ids, b=b: m.forward(ids, b, 1, context), replays), 3))
    del head
    torch.cuda.empty_cache()
    return out


def kv_read(shape: dict[str, int], batch: int, replays: int, dev: torch.device) -> dict[str, object]:
    """Decode steps of `batch` requests over CONTEXTS: the slope is the KV read per cached token."""
    model = Model(shape, shape["layers"], batch, max(CONTEXTS), dev)
    ids = torch.randint(0, shape["vocab"], (batch,), device=dev)
    cells = {c: time_graph(lambda m=model, c=c: m.forward(ids, batch, 1, c), replays) for c in CONTEXTS}
    del model
    torch.cuda.empty_cache()
    xs = [batch * c for c in CONTEXTS]
    ys = [cells[c] for c in CONTEXTS]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    fit_err = max(abs(my + slope * (x - mx) - y) / y for x, y in zip(xs, ys, strict=True))
    return {
        "batch": batch,
        "ms_by_context": {str(c): round(cells[c], 3) for c in CONTEXTS},
        "ns_per_cached_token": round(slope * 1e6, 2),
        "fit_max_rel_error": round(fit_err, 4),
    }


def _table(run: dict[str, Any], rows: list[list[float]]) -> list[str]:
    """A batch x verify-width table of the run's grid as markdown lines, two decimals a cell."""
    q = run["tokens_per_request"]
    head = ["| B \\ q | " + " | ".join(str(x) for x in q) + " |", "|---|" + "---:|" * len(q)]
    return head + [
        f"| {b} | " + " | ".join(f"{v:.2f}" for v in row) + " |" for b, row in zip(run["batch"], rows, strict=True)
    ]


def render(run: dict[str, Any], source: str) -> str:
    """The kept run as a page: each shape's table, its draft head's row and its KV read."""
    out = [
        f"# One forward's cost on a {run['gpu']}, by batch and verify width",
        "",
        f"Written by `scripts/device_step_cost.py --render {source}` from the run kept beside it "
        f"({run['date']}; {run['gpu']}, {run['memory_gib']} GiB, {run['multiprocessors']} multiprocessors; "
        f"torch {run['torch']}, CUDA {run['cuda']}).",
        "",
        run["method"],
        f"Each request holds a {run['context_tokens']}-token KV cache; each cell is the median of "
        f"{run['replays']} CUDA-graph replays.",
    ]
    for name, e in run["shapes"].items():
        s = e["shape"]
        out += [
            "",
            f"## {name} ({e['parameters_billion']} B parameters: {s['layers']} layers, hidden {s['hidden']}, "
            f"{s['heads']}/{s['kv_heads']} heads x {s['head_dim']}, MLP {s['mlp']}, vocabulary {s['vocab']})",
            "",
            "Median ms per forward (rows: batch B; columns: tokens per request q):",
            "",
            *_table(run, [list(row) for row in e["ms"]]),
            "",
            "t(B, q) / t(B, 1): how many tokens a verify of width q must yield per step to break even:",
            "",
            *_table(run, [[v / row[0] for v in row] for row in e["ms"]]),
        ]
        kv = e["kv_read"]
        out += [
            "",
            "One EAGLE-3-style draft head step (one decoder layer plus the LM head), ms by batch: "
            + ", ".join(f"B={b} {v:.3f}" for b, v in zip(run["batch"], e["draft_ms"], strict=True))
            + ".",
            "",
            f"KV read: {kv['ns_per_cached_token']} ns per cached token and request (decode steps of "
            f"{kv['batch']} requests at contexts "
            + ", ".join(f"{c} ({ms:.2f} ms)" for c, ms in kv["ms_by_context"].items())
            + f"; the line is within {kv['fit_max_rel_error']:.1%} of every cell).",
        ]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--render", metavar="RUN_JSON", help="write the page of a kept run to --out instead of measuring")
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES))
    ap.add_argument("--context", type=int, default=1024, help="cached tokens per request for the table (default 1024)")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--kv-batch", type=int, default=8, help="requests for the KV-read slope (default 8)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            page = render(json.load(f), args.render)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(page)
        return 0
    if not args.shape:
        ap.error("--shape is required to measure")
    if torch is None or not torch.cuda.is_available():
        print("device_step_cost: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(dev)
    result: dict[str, object] = {
        "gpu": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
        "batch": list(BATCHES),
        "tokens_per_request": list(WIDTHS),
        "context_tokens": args.context,
        "replays": args.replays,
    }
    shapes: dict[str, dict[str, Any]] = {}
    result["shapes"] = shapes
    for name in args.shape:
        shape = SHAPES[name]
        params = (
            shape["layers"]
            * (
                shape["hidden"] * (shape["heads"] + 2 * shape["kv_heads"]) * shape["head_dim"]
                + shape["heads"] * shape["head_dim"] * shape["hidden"]
                + 3 * shape["hidden"] * shape["mlp"]
            )
            + 2 * shape["vocab"] * shape["hidden"]
        )
        print(f"{name}: {params / 1e9:.1f} B parameters", flush=True)
        t0 = time.time()
        entry: dict[str, Any] = {
            "shape": shape,
            "parameters_billion": round(params / 1e9, 2),
            "ms": step_table(shape, args.context, args.replays, dev),
            "draft_ms": draft_row(shape, args.context, args.replays, dev),
            "kv_read": kv_read(shape, args.kv_batch, args.replays, dev),
        }
        entry["seconds"] = round(time.time() - t0, 1)
        print(f"  draft: {entry['draft_ms']}\n  kv: {entry['kv_read']}", flush=True)
        shapes[name] = entry
        with open(args.out, "w", encoding="utf-8") as f:  # after each shape: a run stopped later keeps it
            json.dump(result, f, indent=1)
    return 0 if all(math.isfinite(v) for e in shapes.values() for row in e["ms"] for v in row) else 1


if __name__ == "__main__":
    sys.exit(main())
