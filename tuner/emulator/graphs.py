"""What the resolved flags and the profile make of CUDA graphs (and the KV pool's printed dtype):
the largest captured decode batch, the sizes a step pads to, and those that replay a graph when
padding is off. Pure functions of the resolved flag values (tuner/emulator/resolve.py) and the
profile, used by the runner when it builds the engine and prints the pool lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import model
from .profile import Profile


def kv_dtype(prints_dtype: bool, values: Mapping[str, Any]) -> str | None:
    """The KV pool's torch dtype as 0.5.23's pool line prints it (None: releases that do not)."""
    if not prints_dtype:
        return None
    kv = values.get("kv_cache_dtype") or "auto"
    return {
        "fp8_e4m3": "torch.float8_e4m3fn",
        "fp8_e5m2": "torch.float8_e5m2",
        "mxfp8": "torch.float8_e4m3fn",
    }.get(kv, "torch.bfloat16")


def graph_max_bs(values: Mapping[str, Any], p: Profile) -> int:
    """The largest batch a decode graph is captured for (resolve.py settles it, a given list's
    largest size included)."""
    return int(values.get("cuda_graph_max_bs") or values.get("cuda_graph_max_bs_decode") or p.cuda_graph_max_bs)


def graph_bs(values: Mapping[str, Any], p: Profile) -> tuple[int, ...] | None:
    """The decode batch sizes a step pads to: `--cuda-graph-bs` (0.5.9-0.5.12) or
    `--cuda-graph-bs-decode` (0.5.23) as given, else the profile's `cuda_graph_bs`, as SGLang's
    flag replaces its generated capture list (cuda_graph_runner.py get_batch_sizes_to_capture).
    None (no padding) without graphs, with `--disable-cuda-graph-padding` (a batch that is not
    a captured size then runs without a graph, at its own size), or with neither list."""
    if values.get("disable_cuda_graph") or values.get("disable_cuda_graph_padding"):
        return None
    return _listed(values, p)


def _listed(values: Mapping[str, Any], p: Profile) -> tuple[int, ...] | None:
    flag = values.get("cuda_graph_bs") or values.get("cuda_graph_bs_decode")
    if flag:
        return tuple(sorted(set(int(b) for b in flag)))
    if p.cuda_graph_bs is None:
        return None
    return model.listed_up_to(p.cuda_graph_bs, graph_max_bs(values, p))


def graph_exact(values: Mapping[str, Any], p: Profile, pool: int) -> tuple[int, ...] | None:
    """With `--disable-cuda-graph-padding`, the sizes captured: only those replay a graph (None:
    padding on, graphs off, or no list to say which). A list flag is captured as given; the
    profile's `cuda_graph_bs` stands for SGLang's generated list, which without padding is every
    size up to the largest (0.5.9 server_args.py `_generate_cuda_graph_batch_sizes`: `if
    self.disable_cuda_graph_padding: capture_bs = list(range(1, self.cuda_graph_max_bs + 1))`)."""
    if values.get("disable_cuda_graph") or not values.get("disable_cuda_graph_padding"):
        return None
    if not (values.get("cuda_graph_bs") or values.get("cuda_graph_bs_decode")) and p.cuda_graph_bs is not None:
        return model.capture_sizes(tuple(range(1, graph_max_bs(values, p) + 1)), pool)
    return model.capture_sizes(_listed(values, p), pool)
