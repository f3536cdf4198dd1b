"""Multi-node: two emulator processes on loopback form one server over real TCP (multinode.py)."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
import yaml
from emu_testlib import START_FAILURE_EXIT_S, free_port, spec_flags

from tuner.emulator import model, multinode
from tuner.emulator import parse as P
from tuner.emulator import resolve as R
from tuner.emulator.faults import FaultSet, parse_faults
from tuner.emulator.profile import DEFAULT_PROFILE_NAME, PROFILE_DIR, load_profile
from tuner.emulator.simulate import SpecSetting, closed_loop, engine_spec

ROOT = Path(__file__).resolve().parents[2]

JOINED = "Init torch distributed ends."


def _pair(emulator, *, head_args=(), worker_args=(), start_worker=True, timeout="30"):
    addr = f"127.0.0.1:{free_port()}"
    common = ["--tp-size", "2", "--nnodes", "2", "--dist-init-addr", addr, "--dist-timeout", timeout]
    head = emulator(*common, "--node-rank", "0", "--emulator-startup-s", "0.3", *head_args)
    worker = None
    if start_worker:
        worker = emulator(*common, "--node-rank", "1", "--emulator-startup-s", "0.3", *worker_args)
    return head, worker, addr


def _health(e) -> int:
    try:
        return e.get("/health", timeout=2)[0]
    except OSError:
        return -1


def test_rank0_waits_for_the_worker_and_the_pair_serves_as_one(emulator):
    head, _, addr = _pair(emulator, start_worker=False)
    time.sleep(1.0)
    # alone, rank 0 is stuck in the rendezvous: no join line, no HTTP port
    assert JOINED not in head.log()
    assert _health(head) == -1
    worker = emulator(
        "--tp-size",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--dist-init-addr",
        addr,
        "--emulator-startup-s",
        "0.3",
        "--enable-metrics",
    )
    head.wait_ready(60)
    worker.wait_for_line(JOINED)
    assert " TP1] Init torch distributed ends." in worker.log() and " TP0] Init torch distributed ends." in head.log()
    # the worker's dummy health endpoints answer 200 without being a server
    deadline = time.time() + 10
    while _health(worker) != 200 and time.time() < deadline:
        time.sleep(0.05)
    for path in ("/health", "/health_generate", "/ping"):
        assert worker.get(path)[0] == 200, path
    assert worker.post_json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})[0] == 404
    status, body = head.post_json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 4}})
    assert status == 200 and body["meta_info"]["completion_tokens"] >= 1
    # SGLang's worker-node lines: its dummy health server's, none of uvicorn's (log_level warning)
    wlog = worker.log()
    assert (
        f"Dummy health check server started in background thread at 127.0.0.1:{worker.port}" in wlog
        and "Uvicorn running" not in wlog
    )
    assert worker.get("/metrics")[0] == 200  # the Prometheus middleware with --enable-metrics
    # rank 0's shutdown ends the group in order (the role stops rank 0 first), and the worker follows
    assert head.terminate() == 0
    assert worker.wait_exit(10) == 0
    assert "Rank 0 shut the group down; node_rank=1 exiting." in worker.log()
    # a graceful stop leaves no traceback behind (the gate reads one as a failure)
    assert "Traceback" not in head.log() and "Traceback" not in worker.log()


def test_sigterm_ends_a_worker_at_once_and_rank0_fails_its_next_collective(emulator):
    """Up to 0.5.20 SGLang has no SIGTERM handler on a worker node: it ends by the signal (the
    emulator waited for rank 0 before), and rank 0, still up, loses the group."""
    head, worker, _ = _pair(emulator)
    head.wait_ready(60)
    worker.wait_for_line(JOINED)
    worker.proc.send_signal(15)
    assert worker.wait_exit(10) == -15
    assert head.wait_exit(15) != 0
    assert "Connection closed by peer" in head.log() and "Scheduler hit an exception" in head.log()


def test_a_0_5_23_worker_waits_for_rank_0_after_sigterm(emulator):
    """0.5.23 installs a SIGTERM handler on a worker node that only logs: it cannot drain on its
    own and waits for rank 0's ShutdownReq broadcast (entrypoints/engine.py, node_rank >= 1)."""
    v23 = ("--emulator-sglang-version", "0.5.23")
    head, worker, _ = _pair(emulator, head_args=v23, worker_args=v23)
    head.wait_ready(60)
    worker.wait_for_line("Init parallel ends.")
    worker.proc.send_signal(15)
    worker.wait_for_line("SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast")
    time.sleep(0.5)
    assert worker.proc.poll() is None and _health(head) == 200
    assert head.terminate() == 0
    assert worker.wait_exit(10) == 0


def test_a_0_5_23_worker_still_joining_ends_by_sigterm(emulator):
    """0.5.23 installs that handler only once the node's schedulers are ready (entrypoints/engine.py:
    `scheduler_init_result.wait_for_ready()` first): a worker whose rank 0 never listens ends by the
    signal at once, as up to 0.5.20, where it waited out its dist timeout or systemd's stop timeout."""
    addr = f"127.0.0.1:{free_port()}"
    w = emulator(
        *("--tp-size", "2", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", addr),
        *("--dist-timeout", "60", "--emulator-startup-s", "0.1", "--emulator-sglang-version", "0.5.23"),
    )
    w.wait_for_line("Init parallel begin.")
    time.sleep(0.5)  # connecting to a rank 0 that never listens
    w.proc.send_signal(15)
    assert w.wait_exit(10) == -15
    assert "SIGTERM received on node_rank" not in w.log()


def test_a_worker_that_never_joins_fails_rank0_at_the_dist_timeout(emulator):
    head, worker, _ = _pair(emulator, worker_args=("--emulator-fault", "worker-never-joins"), timeout="2")
    t0 = time.monotonic()
    assert head.wait_exit(START_FAILURE_EXIT_S) != 0
    assert time.monotonic() - t0 >= 1.5
    log = head.log()
    assert "torch.distributed.DistStoreError: Timed out after 3 seconds waiting for clients. 1/2 clients joined." in log
    assert "Received sigquit from a child process" in log
    assert JOINED not in log
    assert worker.proc.poll() is None  # the worker hangs in its init, as the real one would
    assert JOINED not in worker.log()


def test_a_worker_crash_after_ready_takes_rank0_down(emulator):
    head, worker, _ = _pair(emulator, worker_args=("--emulator-fault", "worker-crash-after-ready=1"))
    head.wait_ready(60)
    assert worker.wait_exit(15) != 0
    assert "emulated fault worker-crash-after-ready" in worker.log()
    assert head.wait_exit(10) != 0
    assert "Connection closed by peer" in head.log()
    assert "Scheduler hit an exception" in head.log()


def test_rank0_dying_takes_the_worker_down(emulator):
    head, worker, _ = _pair(emulator)
    head.wait_ready(60)
    worker.wait_for_line(JOINED)
    head.kill()
    assert worker.wait_exit(10) != 0
    log = worker.log()
    assert "Connection closed by peer [127.0.0.1]" in log and "Scheduler hit an exception" in log


def test_a_worker_with_no_rank0_times_out_connecting(emulator):
    addr = f"127.0.0.1:{free_port()}"
    w = emulator(
        "--tp-size",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--dist-init-addr",
        addr,
        "--dist-timeout",
        "1",
        "--emulator-startup-s",
        "0.1",
    )
    assert w.wait_exit(START_FAILURE_EXIT_S) != 0
    assert (
        "DistNetworkError: The client socket has timed out after 1s while trying to connect to (127.0.0.1," in w.log()
    )


def test_a_dist_init_port_in_use_fails_rank0(emulator):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen(1)
        port = s.getsockname()[1]
        head = emulator(
            "--tp-size",
            "2",
            "--nnodes",
            "2",
            "--node-rank",
            "0",
            "--dist-init-addr",
            f"127.0.0.1:{port}",
            "--emulator-startup-s",
            "0.1",
        )
        assert head.wait_exit(START_FAILURE_EXIT_S) != 0
    assert "The server socket has failed to listen on any local network address. port: " + str(port) in head.log()


def test_multi_node_needs_a_dist_init_addr(emulator):
    e = emulator("--tp-size", "2", "--nnodes", "2", "--node-rank", "0", "--emulator-startup-s", "0.1")
    assert e.wait_exit(START_FAILURE_EXIT_S) != 0
    assert "--dist-init-addr HOST:PORT is required" in e.log()


# ---- the model: capacity and step time of a split TP group ------------------------------------


def test_cross_node_cost_adds_to_every_step():
    p = load_profile()
    q = multinode.adjust_profile(p, 4, 2)
    assert model.step_time_ms(q, 8, 0) == pytest.approx(model.step_time_ms(p, 8, 0) + p.t_cross_node_ms)
    assert model.step_time_ms(q, 8, 3) == pytest.approx(model.step_time_ms(p, 8, 3) + p.t_cross_node_ms)
    r = multinode.adjust_profile(p, 16, 4)  # ceil(log2 4) = 2 hops
    assert model.step_time_ms(r, 8, 0) == pytest.approx(model.step_time_ms(p, 8, 0) + 2 * p.t_cross_node_ms)
    assert multinode.adjust_profile(p, 4, 1) is p


def test_cross_node_cost_adds_to_a_measured_step_table():
    """A profile whose step cost is a table measured on one node (`step_time_ms`) pays the
    cross-node all-reduces too: the table replaces the linear terms, not the network."""
    p = load_profile(ROOT / "bench" / "profiles" / "h200-llama3-8b.yaml")
    assert p.step_table is not None
    q = multinode.adjust_profile(p, p.tp_size or 1, 2)
    for batch, k in ((1, 0), (8, 0), (8, 3), (32, 5)):
        assert model.step_time_ms(q, batch, k) == pytest.approx(model.step_time_ms(p, batch, k) + p.t_cross_node_ms)


def test_kv_capacity_grows_when_the_tp_group_spans_more_gpus():
    import dataclasses

    p = dataclasses.replace(load_profile(), tp_size=4)
    same = multinode.adjust_profile(p, 4, 1)
    assert same is p
    wide = multinode.adjust_profile(p, 8, 2)
    # half the weights and half of each token's KV per GPU: more than twice the tokens
    assert wide.kv_tokens_nospec > 2 * p.kv_tokens_nospec
    assert wide.weights_gb == pytest.approx(p.weights_gb / 2)
    assert model.max_total_num_tokens(wide, 0) > model.max_total_num_tokens(p, 0)
    # every depth's pool by the one rule, measured depths and the line between them alike: each
    # step costs the same tokens (here twice the profile's: half the bytes per token per GPU)
    pools = [model.max_total_num_tokens(wide, k) for k in range(8)]
    steps = [a - b for a, b in zip(pools, pools[1:], strict=False)]
    assert all(s > 0 for s in steps) and max(steps) < 1.25 * min(steps), pools


def test_a_profile_without_memory_rules_keeps_its_pool_at_another_tp_size():
    """kv_bytes_per_token 0 switches the memory rules off: at another TP size the pool kept its
    tokens but each token became 1 byte, so --mem-fraction-static 0.85 made a 5-billion-token pool."""
    import dataclasses

    p = dataclasses.replace(load_profile(), tp_size=1, kv_bytes_per_token=0)
    q = multinode.adjust_profile(p, 4, 1)
    assert q.kv_bytes_per_token == 0
    assert (q.kv_tokens_nospec, q.kv_tokens_per_step) == (p.kv_tokens_nospec, p.kv_tokens_per_step)
    assert model.max_total_num_tokens(q, 2, 0.85) == model.max_total_num_tokens(p, 2)


def test_multinode_faults_parse_and_describe():
    fs = FaultSet.from_list(parse_faults(["worker-crash-after-ready=2.5", "worker-never-joins"]))
    assert fs.worker_crash_after_ready_s == 2.5 and fs.worker_never_joins
    assert fs.describe() == ["worker-crash-after-ready=2.5", "worker-never-joins"]


def test_split_addr():
    assert multinode.split_addr("10.0.0.1:50000") == ("10.0.0.1", 50000)
    assert multinode.split_addr("[fd00::1]:5") == ("fd00::1", 5)
    for bad in ("10.0.0.1", "h:0", ":5", "h:x"):
        with pytest.raises(ValueError):
            multinode.split_addr(bad)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_the_nodes_divide_tp_times_pp_as_sglang_checks(version):
    """SGLang checks (tp_size x pp_size) % nnodes (0.5.9 server_args.py check_server_args, 0.5.23
    arg_groups/validation_hook.py), not the TP size alone: one GPU per node in two pipeline stages is
    a valid group (which the emulator says it does not model), three TP ranks over two nodes is not."""

    def resolve(*argv: str):
        args = ["--model-path", "/models/x", "--dist-init-addr", "127.0.0.1:5000", *argv]
        return R.resolve(P.parse_flags(args, version=version), load_profile())

    with pytest.raises(R.EmulatorUnsupported, match="--pp-size 2: pipeline parallelism is not modelled"):
        resolve("--tp-size", "1", "--pp-size", "2", "--nnodes", "2")
    with pytest.raises(AssertionError, match="tp_size must be divisible by number of nodes"):
        resolve("--tp-size", "3", "--nnodes", "2")
    assert resolve("--tp-size", "2", "--nnodes", "2").values["nnodes"] == 2


@pytest.mark.parametrize(
    ("version", "flags", "message"),
    [
        ("0.5.9", ("--dp-size", "2"), "multi-node data parallel is not supported unless dp attention!"),
        ("0.5.9", ("--dp-size", "2", "--enable-dp-attention"), None),
        ("0.5.23", ("--dp-size", "2"), "multi-node data-parallel replicas are not supported"),
        ("0.5.23", ("--dp-size", "2", "--enable-dp-attention"), None),  # becomes --attn-dp-size 2
        ("0.5.23", ("--dp-size", "2", "--attn-dp-size", "2"), "multi-node data-parallel replicas are not supported"),
        ("0.5.23", ("--attn-dp-size", "2"), None),
    ],
)
def test_data_parallel_replicas_across_nodes_fail_as_sglang_fails_them(version, flags, message):
    """SGLang's check_server_args (0.5.9 server_args.py; 0.5.23 arg_groups/validation_hook.py, after
    parallel_hook.py turned the deprecated `--dp-size N --enable-dp-attention` into `--attn-dp-size
    N`) refuses data-parallel replicas over several nodes; the emulator started them."""
    args = ["--model-path", "/models/x", "--dist-init-addr", "127.0.0.1:5000", "--tp-size", "2", "--nnodes", "2"]
    parsed = P.parse_flags([*args, *flags], version=version)
    if message is None:
        assert R.resolve(parsed, load_profile()).values["nnodes"] == 2
    else:
        with pytest.raises(AssertionError, match=message):
            R.resolve(parsed, load_profile())
    # one node: replicas are fine (each a whole TP group on its GPUs)
    one = P.parse_flags(["--model-path", "/models/x", "--tp-size", "2", *flags], version=version)
    assert R.resolve(one, load_profile()).values["nnodes"] == 1


def test_simulate_serves_a_profile_at_another_tp_size_as_the_live_server_does(emulator, tmp_path):
    """A profile measured at TP 2 (`tp_size: 2`), served at --tp-size 4: the emulator process
    rescales it (__main__.py multinode.adjust_profile: half the weights and KV bytes per GPU, a
    larger pool); the virtual-time scheduler (simulate.py) used the profile as measured, so its
    pool, request cap and hence step costs were another server's. Both now go through the one
    function; across nodes its cross-node term is in every simulated step as in the live one's."""
    raw = yaml.safe_load((PROFILE_DIR / DEFAULT_PROFILE_NAME).read_text())
    raw.update(tp_size=2, startup_s=0.1)
    path = tmp_path / "tp2.yaml"
    path.write_text(yaml.safe_dump(raw))
    e = emulator("--tp-size", "4", *spec_flags(3), "--emulator-profile", str(path)).wait_ready()
    cap = re.search(r"max_total_num_tokens=(\d+), .*max_running_requests=(\d+)", e.log())
    live = (int(cap.group(1)), int(cap.group(2)))
    p = load_profile(str(path))
    simulated = engine_spec(p, SpecSetting(3, tp_size=4))
    assert (simulated.max_total_num_tokens, simulated.max_running_requests) == live
    assert engine_spec(p, SpecSetting(3)).max_total_num_tokens < live[0]  # the profile's own TP 2 pool
    # two nodes: each decode step costs what the live server's adjusted profile says it costs
    served = multinode.adjust_profile(p, 4, 2)
    r = closed_loop(p, SpecSetting(0, tp_size=4, nnodes=2), concurrency=1, n_requests=2, input_len=64, output_len=200)
    step_s = model.step_time_ms(served, 1, 0, spec=False) / 1000
    assert served.cross_node_step_ms > 0
    assert r.per_request_tok_s == pytest.approx(1 / step_s, rel=0.02)
