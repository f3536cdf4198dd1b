"""Stand-ins for the NCCL check's torch worker, so that the parent's real machinery (spawned processes,
queue, watchdog, kill, aggregation, report) runs on a CPU-only machine without torch.

Each behaves like one rank of nccl_allreduce_check.worker: it reports its stages, then a result, an
error, a hang or a crash. They must be importable by name in the spawned children (conftest puts this
directory's siblings on sys.path; pytest puts this directory there).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import nccl_allreduce_check as nc

# Per-size time each fake rank reports: rank r takes (1 + r/10) ms, so the slowest rank is the last.
BASE_SECONDS = 1e-3


def _device(rank: int) -> dict[str, Any]:
    return {
        "rank": rank,
        "device": f"cuda:{rank}",
        "name": "NVIDIA H200",
        "memory_mib": 143771,
        "compute_capability": "9.0",
        "pci_bus_id": f"00000000:{0x18 + rank:02X}:00.0",
    }


def good(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    out.put(("stage", rank, "init_process_group"))
    out.put(("device", rank, _device(rank)))
    results = [{"bytes": s, "seconds": BASE_SECONDS * (1 + rank / 10), "sum_ok": True} for s in cfg["sizes"]]
    out.put(("result", rank, results))


def hang_in_init(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    """Rank 1 never gets past communicator set-up, as with a broken P2P path; the others wait in all_reduce."""
    out.put(("stage", rank, "init_process_group"))
    if rank != 1:
        out.put(("stage", rank, f"all_reduce of {cfg['sizes'][0]} bytes (sum check)"))
    time.sleep(3600)


def wrong_sum_on_rank2(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    out.put(("stage", rank, "init_process_group"))
    size = cfg["sizes"][0]
    if rank == 2:
        mismatch = {"count": 1024, "elements": size // 4, "index": 0, "value": 9.0}
        out.put(("error", rank, "wrong-sum", nc.sum_mismatch_message(rank, size, world_size, mismatch)))
        return
    time.sleep(3600)  # the other ranks would block in the collective


def crash_rank1(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    out.put(("stage", rank, "init_process_group"))
    if rank == 1:
        time.sleep(0.2)
        os._exit(3)
    time.sleep(3600)


def init_fails(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    out.put(("stage", rank, "init_process_group"))
    out.put(
        (
            "error",
            rank,
            "init-failed",
            f"rank {rank} failed in init_process_group: DistBackendError: "
            "NCCL error in: ProcessGroupNCCL.cpp, unhandled system error",
        )
    )


def report_pid(rank: int, world_size: int, port: int, cfg: Mapping[str, Any], out: Any) -> None:
    """Hangs after telling the parent its pid and environment, so a test can check the kill and the env."""
    out.put(("device", rank, {"rank": rank, "pid": os.getpid(), "nvls": os.environ.get("NCCL_NVLS_ENABLE")}))
    time.sleep(3600)
