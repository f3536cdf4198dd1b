"""The NCCL all-reduce check script without torch: its pure logic, and its parent process (spawn,
watchdog, kill, report) driven by fake ranks that are real processes. With torch present (not in this
project's .venv) the gloo backend test runs the real worker on CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import cuda_env_fake_workers as fake
import nccl_allreduce_check as nc
import pytest
from conftest import ROLE

SCRIPT = ROLE / "files" / "nccl_allreduce_check.py"


def fake_detect(devices: int):
    def detect(backend: str) -> dict:
        return {"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.27.7", "device_count": devices}

    return detect


def args(*argv: str):
    return nc.parse_args(list(argv))


# --- pure parts ----------------------------------------------------------------------------------------


def test_parse_sizes() -> None:
    assert nc.parse_sizes("1M,32M,256M") == [1 << 20, 32 << 20, 256 << 20]
    assert nc.parse_sizes("4, 1K,2G") == [4, 1024, 2 << 30]
    for bad in ("", "3", "1.5M", "1T", "-4"):
        with pytest.raises(nc.UsageError):
            nc.parse_sizes(bad)


def test_parse_args_limits() -> None:
    a = args()
    assert (a.size_list, a.iters, a.warmup, a.timeout, a.backend) == (
        [1 << 20, 32 << 20, 256 << 20],
        20,
        5,
        120.0,
        "nccl",
    )
    for bad in (["--iters", "0"], ["--timeout", "0"], ["--min-gpus", "0"], ["--min-busbw", "-1"], ["--backend", "mpi"]):
        with pytest.raises(nc.UsageError):
            args(*bad)


def test_expected_sum() -> None:
    assert [nc.expected_sum(n) for n in (1, 2, 4, 8)] == [1, 3, 10, 36]


def test_bus_bandwidth_is_nccl_tests_definition() -> None:
    # nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw * 2(n-1)/n
    size, t = 256 << 20, 0.01
    algbw = size / t / 1e9
    for n, factor in ((1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)):
        a, b = nc.bandwidth(size, t, n)
        assert a == pytest.approx(algbw) and b == pytest.approx(algbw * factor)
    assert nc.bandwidth(size, 0.0, 4) == (0.0, 0.0)


def test_summary_takes_the_slowest_rank() -> None:
    per_rank = {
        0: [{"bytes": 1 << 20, "seconds": 0.001, "sum_ok": True}],
        1: [{"bytes": 1 << 20, "seconds": 0.002, "sum_ok": True}],
    }
    [row] = nc.summarize_sizes(per_rank, 2)
    assert row["time_us"] == 2000.0
    assert row["busbw_gbps"] == pytest.approx((1 << 20) / 0.002 / 1e9, abs=1e-3)


def test_env_snapshot_and_failure_message() -> None:
    env = nc.env_snapshot(
        {"NCCL_P2P_LEVEL": "SYS", "CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/root", "GLOO_SOCKET_IFNAME": "eth0"}
    )
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_P2P_LEVEL": "SYS"}
    msg = nc.failure_message("timeout", "no result after 5 s", env, {"torch": "2.11.0", "nccl": "2.27.7"})
    assert msg.startswith("NCCL all-reduce check FAILED (timeout): no result after 5 s.")
    assert "NCCL environment used: CUDA_VISIBLE_DEVICES=0,1 GLOO_SOCKET_IFNAME=eth0 NCCL_P2P_LEVEL=SYS." in msg
    assert "Versions: torch 2.11.0, nccl 2.27.7." in msg and "NCCL_DEBUG=INFO" in msg
    assert "(no NCCL_*/CUDA_* variables set)" in nc.failure_message("no-gpus", "x", {}, {})


# --- the parent with fake ranks (real processes) -------------------------------------------------------


def test_four_ranks_ok_report() -> None:
    env: dict = {"NCCL_P2P_LEVEL": "SYS"}
    report, status = nc.run_check(args("--sizes", "1M,64M"), environ=env, detect=fake_detect(4), target=fake.good)
    assert status == 0 and report["ok"] and report["reason"] is None
    assert report["world_size"] == 4 and not report["single_gpu"] and report["expected_sum"] == 10
    assert [g["rank"] for g in report["gpus"]] == [0, 1, 2, 3]
    slowest = fake.BASE_SECONDS * 1.3
    big = report["sizes"][1]
    assert big["bytes"] == 64 << 20 and big["time_us"] == pytest.approx(slowest * 1e6)
    assert big["busbw_gbps"] == pytest.approx((64 << 20) / slowest / 1e9 * 1.5, abs=1e-3)
    assert report["busbw_gbps"] == {str(1 << 20): report["sizes"][0]["busbw_gbps"], str(64 << 20): big["busbw_gbps"]}
    # NVLink multicast is off by default, the caller's own settings are kept and reported
    assert report["env"] == {
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_P2P_LEVEL": "SYS",
        "NVSHMEM_DISABLE_NVLS": "1",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    }
    assert report["versions"] == {"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.27.7"}
    assert "passed on 4 GPU(s)" in report["message"]
    json.dumps(report)


def test_single_gpu_is_the_degenerate_case() -> None:
    report, status = nc.run_check(args("--sizes", "1M"), environ={}, detect=fake_detect(1), target=fake.good)
    assert status == 0 and report["world_size"] == 1 and report["single_gpu"]
    assert report["expected_sum"] == 1 and report["sizes"][0]["busbw_gbps"] == 0.0
    assert "one-rank NCCL communicator" in report["note"] and "single GPU" in report["message"]


def test_caller_may_turn_nvls_back_on() -> None:
    report, _ = nc.run_check(
        args("--sizes", "4"), environ={"NCCL_NVLS_ENABLE": "1"}, detect=fake_detect(1), target=fake.good
    )
    assert report["env"]["NCCL_NVLS_ENABLE"] == "1"


def test_hang_is_killed_by_the_watchdog_and_explained() -> None:
    started = time.monotonic()
    report, status = nc.run_check(
        args("--timeout", "3"), environ={"NCCL_P2P_LEVEL": "SYS"}, detect=fake_detect(4), target=fake.hang_in_init
    )
    assert time.monotonic() - started < 15
    assert status == 1 and report["reason"] == "timeout"
    assert (
        "no result after 3 s; ranks still waiting: rank 0 in all_reduce of 1048576 bytes (sum check); rank 1 in init_process_group"
        in report["message"]
    )
    assert "NCCL environment used: NCCL_NVLS_ENABLE=0 NCCL_P2P_LEVEL=SYS" in report["message"]
    assert "the hang SGLang would show at start-up" in report["message"]


def test_watchdog_leaves_no_process_behind() -> None:
    import multiprocessing

    # Each worker reports its pid, then hangs until the watchdog kills it. On a loaded machine
    # (the stages side by side, SGLANG_TUNE_SIDE_BY_SIDE=1) spawning a worker took over 2 s, so
    # one of the two had not reported when the watchdog fired: 5 s leaves room for both.
    run = nc.run_workers(2, {"sizes": [4]}, 5.0, target=fake.report_pid)
    assert run["error"][0] == "timeout"
    # run_workers itself sets nothing: the children see the parent's environment as it is
    assert [d["nvls"] for d in run["devices"]] == [os.environ.get("NCCL_NVLS_ENABLE")] * 2
    for d in run["devices"]:
        with pytest.raises(ProcessLookupError):
            os.kill(d["pid"], 0)
    assert multiprocessing.active_children() == []


def test_wrong_sum_fails_fast_with_the_rank_and_values() -> None:
    started = time.monotonic()
    report, status = nc.run_check(
        args("--sizes", "1M", "--timeout", "60"), environ={}, detect=fake_detect(4), target=fake.wrong_sum_on_rank2
    )
    assert time.monotonic() - started < 20  # not the 60 s watchdog
    assert status == 1 and report["reason"] == "wrong-sum"
    assert (
        "rank 2 after all-reduce of 1048576 bytes: 1024 of 262144 elements differ, first at index 0: "
        "got 9.0, expected 10.0 (= sum of rank+1 over 4 ranks)"
    ) in report["message"]
    assert "NCCL_P2P_DISABLE=1" in report["message"]


def test_crashed_rank_is_reported() -> None:
    report, status = nc.run_check(args("--timeout", "30"), environ={}, detect=fake_detect(2), target=fake.crash_rank1)
    assert status == 1 and report["reason"] == "worker-crashed"
    assert "rank 1 exited with status 3 during init_process_group" in report["message"]


def test_init_failure() -> None:
    report, status = nc.run_check(args(), environ={}, detect=fake_detect(2), target=fake.init_fails)
    assert status == 1 and report["reason"] == "init-failed"
    assert "DistBackendError" in report["message"] and "could not build a communicator" in report["message"]


def test_no_gpus_and_too_few_gpus() -> None:
    report, status = nc.run_check(args(), environ={}, detect=fake_detect(0), target=fake.good)
    assert status == 1 and report["reason"] == "no-gpus" and "sees no CUDA device" in report["message"]
    report, _ = nc.run_check(args("--world-size", "4"), environ={}, detect=fake_detect(2), target=fake.good)
    assert report["reason"] == "too-few-gpus" and "--world-size 4 but only 2 GPU(s) are visible" in report["message"]
    report, _ = nc.run_check(args("--min-gpus", "4"), environ={}, detect=fake_detect(2), target=fake.good)
    assert report["reason"] == "too-few-gpus" and "2 GPU(s) take part but --min-gpus is 4" in report["message"]


def test_bandwidth_floor() -> None:
    report, status = nc.run_check(
        args("--sizes", "1M", "--min-busbw", "500"), environ={}, detect=fake_detect(4), target=fake.good
    )
    assert status == 1 and report["reason"] == "low-bandwidth"
    assert "is below --min-busbw 500 GB/s" in report["message"] and report["sizes"]
    # the floor is the largest size's, in whatever order the sizes come (the last one was taken)
    for order in ("1M,256M", "256M,1M"):
        report, status = nc.run_check(
            args("--sizes", order, "--min-busbw", "100"), environ={}, detect=fake_detect(2), target=fake.good
        )
        assert status == 0, (order, report["message"])
        assert "largest 268435456 bytes" in report["message"]
    # one GPU has no bus traffic, so the floor does not apply
    report, status = nc.run_check(
        args("--sizes", "1M", "--min-busbw", "500"), environ={}, detect=fake_detect(1), target=fake.good
    )
    assert status == 0


# --- the script as a program -----------------------------------------------------------------------------


def _run_script(*argv: str, python: str = sys.executable, env: dict | None = None) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [python, str(SCRIPT), *argv], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="this python has torch")
def test_without_torch_it_fails_clearly() -> None:
    rc, report, stderr = _run_script("--sizes", "1M", env={"NCCL_P2P_LEVEL": "PHB"})
    assert rc == 1 and report["reason"] == "torch-missing" and not report["ok"]
    assert f"cannot import torch with {sys.executable}" in report["message"]
    assert "NCCL_P2P_LEVEL=PHB" in report["message"] and "cuda_env_nccl_check_python" in report["message"]
    assert report["message"] in stderr


def test_bad_arguments_exit_2_with_json() -> None:
    rc, report, _ = _run_script("--sizes", "1.5M")
    assert rc == 2 and report["reason"] == "bad-arguments"
    assert "size '1.5M'" in report["message"]


def test_json_out(tmp_path) -> None:
    out = tmp_path / "report.json"
    rc, report, _ = _run_script("--json-out", str(out), "--sizes", "4", "--iters", "1")
    assert json.loads(out.read_text()) == report and rc == (0 if report["ok"] else 1)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed in this python")
def test_gloo_on_cpu_runs_the_real_worker() -> None:
    rc, report, stderr = _run_script(
        "--backend", "gloo", "--world-size", "2", "--sizes", "4K,64K", "--iters", "3", "--timeout", "120"
    )
    assert rc == 0, stderr
    assert report["ok"] and report["world_size"] == 2 and len(report["sizes"]) == 2
    assert all(s["sum_ok"] for s in report["sizes"])


def test_the_process_groups_timeout_outlasts_the_watchdog():
    """torch aborts a collective after the process group's timeout and the rank crashes
    (init_process_group's docs): at the 60 s set-up timeout a hung all-reduce ended its ranks with
    SIGABRT before the parent's watchdog, and the check said "worker-crashed" instead of the hang it
    exists to catch, with its stage and hints. The group's timeout now runs past the watchdog."""
    assert nc.group_timeout({"init_timeout": 60.0, "watchdog_timeout": 180.0}) == 210.0
    assert nc.group_timeout({"init_timeout": 600.0, "watchdog_timeout": 180.0}) == 600.0
    assert nc.group_timeout({"init_timeout": 60.0}) == 60.0
