"""Prove that NCCL works across this host's GPUs before SGLang is started on them.

SGLang with tensor parallelism > 1 all-reduces through NCCL (on PCIe-only hosts with more than two
GPUs custom all-reduce is off and NCCL does it all, docs/reference/sglang.md §7.5). A broken NCCL set-up
shows up there only as a server that never becomes ready. This script turns that hang into a
fast, explained failure: one process per GPU, a real NCCL communicator, an all-reduce of known
values at a few sizes with an exact sum check, timed, reported as one JSON object on stdout.

Bandwidth follows nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md): algbw = bytes / time and, for
all-reduce, busbw = algbw * 2(n-1)/n, the figure comparable with the hardware's link speed. With one
GPU the check still builds a one-rank NCCL communicator (the degenerate case): the sum is trivially
right and busbw is 0 by that definition.

Only the standard library and torch (imported lazily, so that everything but the workers runs and
is tested without it). Exit status: 0 ok, 1 check failed, 2 bad arguments; the JSON says why.

NVLink multicast (NVLS) stays off unless the caller's environment says otherwise: on shared
machines a program using it can take the host's GPUs out of service (the lent machines' README), and
SGLang's all-reduce does not need it. So NCCL_NVLS_ENABLE=0 and its PyTorch/NVSHMEM equivalents are
set by default.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import queue
import re
import socket
import sys
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, Mapping, MutableMapping, NoReturn, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
ELEMENT_BYTES = 4  # float32: small integers and their sums are exact in it
DEFAULT_SIZES = "1M,32M,256M"
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
ENV_PREFIXES = ("NCCL_", "CUDA_", "GLOO_", "TORCH_NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_", "PYTORCH_CUDA_")

# What to try next, per failure; the message always carries the NCCL environment that was used.
HINTS = {
    "torch-missing": "run the check with the engine venv's python (cuda_env_nccl_check_python), which has torch",
    "no-gpus": "torch sees no CUDA device: check the driver (nvidia-smi), CUDA_VISIBLE_DEVICES and that this "
    "torch is a CUDA build",
    "too-few-gpus": "fewer GPUs are visible than the check needs; check CUDA_VISIBLE_DEVICES and nvidia-smi",
    "init-failed": "NCCL could not build a communicator; rerun with NCCL_DEBUG=INFO to see the transport and the error",
    "timeout": "this is the hang SGLang would show at start-up; rerun with NCCL_DEBUG=INFO to see where it stops. "
    "On PCIe hosts without NVLink check NCCL_P2P_LEVEL, try NCCL_P2P_DISABLE=1, and check that the IOMMU/ACS "
    "settings allow peer-to-peer transfers",
    "wrong-sum": "data arrived corrupted: peer-to-peer over PCIe with ACS or the IOMMU on is a known cause; "
    "try NCCL_P2P_DISABLE=1 and rerun with NCCL_DEBUG=INFO",
    "worker-crashed": "a worker process died without a report; its stderr above says why",
    "low-bandwidth": "all-reduce works but is slower than cuda_env_nccl_check_min_busbw_gbps; rerun with "
    "NCCL_DEBUG=INFO to see whether NCCL fell back to shared memory or sockets instead of P2P/NVLink",
    "worker-error": "a worker raised an error (its traceback is in the detail); rerun with NCCL_DEBUG=INFO",
    "bad-arguments": "see the usage (--help)",
}


class UsageError(Exception):
    """Bad command-line input; reported as JSON with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print and exit; we report JSON instead
        raise UsageError(message)


# ----------------------------------------------------------------------------------------------
# Pure helpers (tested without torch)
# ----------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """'256M' -> 268435456 bytes (K/M/G are binary, as nccl-tests' -b/-e); a multiple of 4 bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KkMmGg]?)(?:i?[Bb])?\s*", str(text))
    if not m:
        raise UsageError(f"size {text!r}: allowed: a byte count with an optional K, M or G suffix, e.g. 32M")
    value = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    if value < ELEMENT_BYTES or value % ELEMENT_BYTES:
        raise UsageError(f"size {text!r} is {value} bytes; allowed: a positive multiple of {ELEMENT_BYTES} bytes")
    return value


def parse_sizes(text: str) -> list[int]:
    sizes = [parse_size(part) for part in str(text).split(",") if part.strip()]
    if not sizes:
        raise UsageError("--sizes is empty; allowed: a comma-separated list such as 1M,32M,256M")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(description=__doc__.split("\n\n", maxsplit=1)[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--sizes", default=DEFAULT_SIZES, help=f"all-reduce sizes in bytes (K/M/G suffixes), default {DEFAULT_SIZES}"
    )
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size first (default 5)")
    p.add_argument(
        "--timeout", type=float, default=120.0, help="seconds before the watchdog kills the workers (default 120)"
    )
    p.add_argument(
        "--init-timeout",
        type=float,
        default=60.0,
        help="process-group timeout in seconds, at least (default 60; raised past --timeout: group_timeout)",
    )
    p.add_argument("--world-size", type=int, default=0, help="processes (GPUs) to use; default: every visible GPU")
    p.add_argument("--min-gpus", type=int, default=1, help="fail unless at least this many GPUs take part (default 1)")
    p.add_argument(
        "--min-busbw", type=float, default=0.0, help="fail if the largest size's bus bandwidth (GB/s) is lower; 0 = off"
    )
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl", help="gloo runs on CPU (logic tests only)")
    p.add_argument("--json-out", default="", help="also write the JSON report to this file")
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = build_parser().parse_args(list(argv))
    args.size_list = parse_sizes(args.sizes)
    for name, low in (("iters", 1), ("warmup", 0), ("min_gpus", 1), ("world_size", 0)):
        if getattr(args, name) < low:
            raise UsageError(f"--{name.replace('_', '-')} is {getattr(args, name)}; allowed: an integer >= {low}")
    for name in ("timeout", "init_timeout"):
        if not getattr(args, name) > 0:
            raise UsageError(f"--{name.replace('_', '-')} is {getattr(args, name)}; allowed: seconds > 0")
    if args.min_busbw < 0:
        raise UsageError(f"--min-busbw is {args.min_busbw}; allowed: GB/s >= 0 (0 = off)")
    return args


def expected_sum(world_size: int) -> float:
    """Rank r contributes r+1, so every element must end as 1+2+...+n = n(n+1)/2."""
    return world_size * (world_size + 1) / 2


def bandwidth(size_bytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (10^9 bytes), as nccl-tests reports all-reduce (doc/PERFORMANCE.md)."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * (2 * (world_size - 1) / world_size)


def sum_mismatch_message(rank: int, size_bytes: int, world_size: int, mismatch: Mapping[str, Any]) -> str:
    return (
        f"rank {rank} after all-reduce of {size_bytes} bytes: {mismatch['count']} of {mismatch['elements']} "
        f"elements differ, first at index {mismatch['index']}: got {mismatch['value']}, "
        f"expected {expected_sum(world_size)} (= sum of rank+1 over {world_size} ranks)"
    )


def env_snapshot(environ: Mapping[str, str]) -> dict[str, str]:
    """The NCCL/CUDA/PyTorch-distributed variables in force: part of every report and failure message."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENV_PREFIXES)}


def format_env(env: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items()) if env else "(no NCCL_*/CUDA_* variables set)"


def failure_message(reason: str, detail: str, env: Mapping[str, str], versions: Mapping[str, Any]) -> str:
    """One paragraph an operator can act on: what failed, where, with which NCCL set-up, what next."""
    vers = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    hint = HINTS.get(reason, "")
    return (
        f"NCCL all-reduce check FAILED ({reason}): {detail}. "
        f"NCCL environment used: {format_env(env)}. "
        f"{('Versions: ' + vers + '. ') if vers else ''}"
        f"{('Next: ' + hint + '.') if hint else ''}"
    ).strip()


def summarize_sizes(per_rank: Mapping[int, Sequence[Mapping[str, Any]]], world_size: int) -> list[dict[str, Any]]:
    """Per size, the slowest rank's time (the collective ends when its last rank does) and its bandwidth."""
    if not per_rank:
        return []
    first = next(iter(per_rank.values()))
    rows = []
    for i, entry in enumerate(first):
        seconds = max(float(per_rank[r][i]["seconds"]) for r in per_rank)
        algbw, busbw = bandwidth(int(entry["bytes"]), seconds, world_size)
        rows.append(
            {
                "bytes": int(entry["bytes"]),
                "time_us": round(seconds * 1e6, 2),
                "algbw_gbps": round(algbw, 3),
                "busbw_gbps": round(busbw, 3),
                "sum_ok": all(per_rank[r][i].get("sum_ok", False) for r in per_rank),
            }
        )
    return rows


def largest(sizes: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The largest size's row (the sizes may come in any order): what --min-busbw and the summary read."""
    return max(sizes, key=lambda r: r["bytes"]) if sizes else None


def build_report(
    *,
    ok: bool,
    reason: str | None,
    detail: str,
    args: argparse.Namespace | None,
    world_size: int,
    gpus: Sequence[Mapping[str, Any]],
    sizes: Sequence[Mapping[str, Any]],
    env: Mapping[str, str],
    versions: Mapping[str, Any],
    elapsed_s: float,
) -> dict[str, Any]:
    """The one JSON object the check prints (and the role parses)."""
    note = ""
    top = largest(sizes)
    if world_size == 1:
        note = (
            "single GPU: a real one-rank NCCL communicator; the sum check is trivial (expected 1) and the bus "
            "bandwidth is 0 by definition (busbw = algbw * 2(n-1)/n)"
        )
    report: dict[str, Any] = {
        "ok": ok,
        "reason": reason,
        "message": (
            f"NCCL all-reduce check passed on {world_size} GPU(s): {len(sizes)} sizes, exact sums"
            + (
                f"; largest {top['bytes']} bytes at {top['busbw_gbps']} GB/s bus bandwidth"
                if top and world_size > 1
                else ""
            )
            + (f" ({note})" if note else "")
            if ok
            else failure_message(reason or "failed", detail, env, versions)
        ),
        "backend": getattr(args, "backend", None),
        "world_size": world_size,
        "single_gpu": world_size == 1,
        "note": note,
        "expected_sum": expected_sum(world_size) if world_size else None,
        "iters": getattr(args, "iters", None),
        "warmup": getattr(args, "warmup", None),
        "gpus": list(gpus),
        "sizes": list(sizes),
        "busbw_gbps": {str(s["bytes"]): s["busbw_gbps"] for s in sizes},
        "env": dict(env),
        "versions": dict(versions),
        "host": platform.node(),
        "elapsed_s": round(elapsed_s, 3),
    }
    return report


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------------------------------
# torch-dependent parts (the parent's probe and the per-GPU worker)
# ----------------------------------------------------------------------------------------------


def detect_torch(backend: str) -> dict[str, Any]:
    """Versions and visible device count, without creating a CUDA context in the parent."""
    info: dict[str, Any] = {"python": platform.python_version(), "python_executable": sys.executable}
    try:
        import torch  # noqa: PLC0415 - lazy on purpose: the rest of the script works without torch
    except Exception as exc:  # ImportError, or a broken CUDA build failing at import
        info["error"] = f"cannot import torch with {sys.executable}: {type(exc).__name__}: {exc}"
        return info
    info["torch"] = torch.__version__
    info["cuda"] = getattr(torch.version, "cuda", None)
    try:
        v = torch.cuda.nccl.version()
        info["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # torch without NCCL (CPU build)
        info["nccl"] = None
    info["device_count"] = torch.cuda.device_count() if backend == "nccl" else 0
    return info


def _device_info(torch: Any, rank: int, backend: str) -> dict[str, Any]:
    if backend != "nccl":
        return {"rank": rank, "device": "cpu"}
    props = torch.cuda.get_device_properties(rank)
    info: dict[str, Any] = {
        "rank": rank,
        "device": f"cuda:{rank}",
        "name": props.name,
        "memory_mib": int(props.total_memory // (1 << 20)),
        "compute_capability": f"{props.major}.{props.minor}",
    }
    if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        info["pci_bus_id"] = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    if getattr(props, "uuid", None) is not None:
        info["uuid"] = f"GPU-{props.uuid}"
    return info


def group_timeout(cfg: Mapping[str, Any]) -> float:
    """The process group's timeout: at least --init-timeout, and past the parent's watchdog. torch
    uses it for the collectives too ("the duration after which collectives will be aborted
    asynchronously and the process will crash": init_process_group's docs), so at 60 s a hung
    all-reduce ended its ranks with SIGABRT before the watchdog (`run_workers`) could report the
    hang with its stage and hints: the check said a worker crashed, which hid the hang it is for."""
    return max(float(cfg["init_timeout"]), float(cfg.get("watchdog_timeout") or 0.0) + 30.0)


def worker(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    """One rank: set up the process group, then for each size check the sum exactly and time it."""
    stage = "import torch"
    try:
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415

        backend = cfg["backend"]
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        else:
            device = torch.device("cpu")
        stage = "init_process_group"
        out.put(("stage", rank, stage))
        kwargs: dict[str, Any] = {
            "backend": backend,
            "init_method": f"tcp://127.0.0.1:{port}",
            "rank": rank,
            "world_size": world_size,
            "timeout": timedelta(seconds=group_timeout(cfg)),
        }
        try:  # device_id makes NCCL build its communicator now, inside this stage (torch >= 2.3)
            dist.init_process_group(**kwargs, **({"device_id": device} if backend == "nccl" else {}))
        except TypeError:
            dist.init_process_group(**kwargs)
        out.put(("device", rank, _device_info(torch, rank, backend)))

        def sync() -> None:
            if backend == "nccl":
                torch.cuda.synchronize(device)

        want = expected_sum(world_size)
        results = []
        for size in cfg["sizes"]:
            numel = size // ELEMENT_BYTES
            stage = f"all_reduce of {size} bytes (sum check)"
            out.put(("stage", rank, stage))
            t = torch.full((numel,), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(t)
            sync()
            bad = t != want
            count = int(bad.sum().item())
            if count:
                index = int(bad.nonzero()[0].item())
                mismatch = {"count": count, "elements": numel, "index": index, "value": float(t[index].item())}
                out.put(("error", rank, "wrong-sum", sum_mismatch_message(rank, size, world_size, mismatch)))
                return
            stage = f"all_reduce of {size} bytes (timing)"
            out.put(("stage", rank, stage))
            t.zero_()  # timing on zeros keeps the repeated in-place sums finite
            for _warmup in range(cfg["warmup"]):
                dist.all_reduce(t)
            sync()
            start = time.perf_counter()
            for _iteration in range(cfg["iters"]):
                dist.all_reduce(t)
            sync()
            seconds = (time.perf_counter() - start) / cfg["iters"]
            results.append({"bytes": size, "seconds": seconds, "sum_ok": True})
        stage = "destroy_process_group"
        dist.destroy_process_group()
        out.put(("result", rank, results))
    except Exception as exc:  # every failure becomes a report, never a silent exit
        kind = "init-failed" if stage == "init_process_group" else "worker-error"
        out.put(
            (
                "error",
                rank,
                kind,
                f"rank {rank} failed in {stage}: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}",
            )
        )


# ----------------------------------------------------------------------------------------------
# The parent: spawn, watch, aggregate
# ----------------------------------------------------------------------------------------------


def _stop(procs: Sequence[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)


def run_workers(
    world_size: int,
    cfg: Mapping[str, Any],
    timeout: float,
    target: Callable[..., None] = worker,
) -> dict[str, Any]:
    """Spawn one process per rank and watch them; kill them all at the first error or at the deadline.

    The parent-side watchdog is what turns an NCCL hang (which no in-process timeout reliably
    bounds: communicator set-up and kernels can block in the driver) into a report.
    """
    ctx = multiprocessing.get_context("spawn")  # fresh processes: no CUDA state inherited
    out = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=target, args=(r, world_size, port, dict(cfg), out), daemon=True) for r in range(world_size)
    ]
    stages = {r: "start" for r in range(world_size)}
    devices: dict[int, dict[str, Any]] = {}
    results: dict[int, list[dict[str, Any]]] = {}
    error: tuple[str, str] | None = None
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world_size and error is None:
            if time.monotonic() > deadline:
                waiting = {r: s for r, s in stages.items() if r not in results}
                error = (
                    "timeout",
                    f"no result after {timeout:g} s; ranks still waiting: "
                    + "; ".join(f"rank {r} in {s}" for r, s in sorted(waiting.items())),
                )
                break
            try:
                msg = out.get(timeout=0.2)
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in results]
                if dead:
                    try:  # a last message may still be in the pipe
                        msg = out.get(timeout=0.5)
                    except queue.Empty:
                        error = (
                            "worker-crashed",
                            "; ".join(
                                f"rank {r} exited with status {procs[r].exitcode} during {stages[r]}" for r in dead
                            ),
                        )
                        break
                else:
                    continue
            kind, rank = msg[0], msg[1]
            if kind == "stage":
                stages[rank] = msg[2]
            elif kind == "device":
                devices[rank] = msg[2]
            elif kind == "result":
                results[rank] = msg[2]
                stages[rank] = "done"
            elif kind == "error":
                error = (msg[2], msg[3])
    finally:
        _stop(procs)
    return {"devices": [devices[r] for r in sorted(devices)], "results": results, "error": error, "stages": stages}


def run_check(
    args: argparse.Namespace,
    *,
    environ: MutableMapping[str, str] | None = None,
    detect: Callable[[str], dict[str, Any]] = detect_torch,
    target: Callable[..., None] = worker,
) -> tuple[dict[str, Any], int]:
    """The whole check; returns (report, exit status). `detect` and `target` are seams for CPU tests."""
    started = time.monotonic()
    env_now: MutableMapping[str, str] = os.environ if environ is None else environ
    for key, value in MULTICAST_OFF.items():
        env_now.setdefault(key, value)  # children inherit os.environ
    env = env_snapshot(env_now)
    info = detect(args.backend)
    versions = {k: info.get(k) for k in ("python", "torch", "cuda", "nccl")}

    def fail(
        reason: str, detail: str, world: int = 0, gpus: Sequence[Any] = (), sizes: Sequence[Any] = ()
    ) -> tuple[dict[str, Any], int]:
        return build_report(
            ok=False,
            reason=reason,
            detail=detail,
            args=args,
            world_size=world,
            gpus=gpus,
            sizes=sizes,
            env=env,
            versions=versions,
            elapsed_s=time.monotonic() - started,
        ), EXIT_FAILED

    if "error" in info:
        return fail("torch-missing", info["error"])
    if args.backend == "nccl":
        visible = int(info.get("device_count") or 0)
        if visible == 0:
            return fail("no-gpus", f"torch {info.get('torch')} (CUDA {info.get('cuda')}) sees no CUDA device")
        world = args.world_size or visible
        if world > visible:
            return fail("too-few-gpus", f"--world-size {world} but only {visible} GPU(s) are visible")
    else:
        world = args.world_size or 2
    if world < args.min_gpus:
        return fail("too-few-gpus", f"{world} GPU(s) take part but --min-gpus is {args.min_gpus}", world)
    cfg = {
        "backend": args.backend,
        "sizes": args.size_list,
        "iters": args.iters,
        "warmup": args.warmup,
        "init_timeout": args.init_timeout,
        "watchdog_timeout": args.timeout,
    }
    run = run_workers(world, cfg, args.timeout, target=target)
    sizes = summarize_sizes(run["results"], world) if len(run["results"]) == world else []
    if run["error"]:
        reason, detail = run["error"]
        return fail(reason, detail.strip(), world, run["devices"], sizes)
    top = largest(sizes)
    if args.min_busbw and world > 1 and top and top["busbw_gbps"] < args.min_busbw:
        return fail(
            "low-bandwidth",
            f"bus bandwidth {top['busbw_gbps']} GB/s at {top['bytes']} bytes "
            f"is below --min-busbw {args.min_busbw:g} GB/s",
            world,
            run["devices"],
            sizes,
        )
    report = build_report(
        ok=True,
        reason=None,
        detail="",
        args=args,
        world_size=world,
        gpus=run["devices"],
        sizes=sizes,
        env=env,
        versions=versions,
        elapsed_s=time.monotonic() - started,
    )
    return report, EXIT_OK


def human_summary(report: Mapping[str, Any]) -> str:
    lines = [report["message"]]
    if report.get("sizes"):
        lines.append(f"{'bytes':>12} {'time_us':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}")
        for s in report["sizes"]:
            lines.append(f"{s['bytes']:>12} {s['time_us']:>12.2f} {s['algbw_gbps']:>11.3f} {s['busbw_gbps']:>11.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        env = env_snapshot(os.environ)
        report = build_report(
            ok=False,
            reason="bad-arguments",
            detail=str(exc),
            args=None,
            world_size=0,
            gpus=(),
            sizes=(),
            env=env,
            versions={"python": platform.python_version()},
            elapsed_s=0.0,
        )
        print(json.dumps(report, sort_keys=True))
        print(report["message"], file=sys.stderr)
        return EXIT_USAGE
    report, status = run_check(args)
    text = json.dumps(report, sort_keys=True)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(human_summary(report), file=sys.stderr)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
