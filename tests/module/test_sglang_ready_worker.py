"""sglang_ready `worker: true`: a worker node of a multi-node server is gated on its log, never on
its dummy /health (issue 21; SGLang's launch_dummy_health_check_server answers 200 regardless)."""

from __future__ import annotations

from ready_testlib import appending_writer

START = [
    "[2026-12-01 16:28:12] server_args=ServerArgs(model_path='/m', tp_size=2, nnodes=2, node_rank=1)",
    "[2026-12-01 16:28:12 TP1] Init torch distributed begin.",
]
JOINED = ["[2026-12-01 16:28:14 TP1] Init torch distributed ends. elapsed=2.00 s, mem usage=0.09 GB"]
LOST = [
    "[2026-12-01 16:28:20 TP1] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "<sglang-emulator>", line 1, in broadcast_pyobj',
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.1]:50000",
    "",
    "[2026-12-01 16:28:20] Received sigquit from a child process. It usually means the child failed.",
]


def _args(fake, log, **kw):
    args = {"url": fake.url, "unit": "", "log_path": str(log), "interval": 0.1, "timeout": 20, "worker": True}
    args.update(kw)
    return args


def test_a_worker_passes_only_once_its_log_shows_it_joined(fake_sglang, run_module, tmp_path):
    log = tmp_path / "worker.log"
    log.write_text("\n".join(START) + "\n")
    fake_sglang.health = lambda t: 200  # the dummy health server: 200 from the start
    with appending_writer(log, JOINED, start_after_s=1.0):
        res, failed = run_module(_args(fake_sglang, log))
    assert not failed, res.get("msg")
    # it waited for the line: the writer's second starts before the module's clock does (the
    # module's own start-up, longer on a loaded machine), so a little less than 1 s is on it
    assert res["joined"] is True and res["waited_seconds"] >= 0.75
    assert not [r for r in fake_sglang.requests if r["path"] in ("/health", "/server_info")]
    assert "capacity" not in res


def test_a_worker_that_never_joins_times_out_saying_so(fake_sglang, run_module, tmp_path):
    log = tmp_path / "worker.log"
    log.write_text("\n".join(START) + "\n")
    res, failed = run_module(_args(fake_sglang, log, timeout=1))
    assert failed
    assert "waiting for this worker node to join the group" in res["msg"]
    assert "no 'Init torch distributed ends.' or 'Init parallel ends.' line" in res["msg"]


def test_a_worker_whose_group_broke_fails_with_the_reason(fake_sglang, run_module, tmp_path):
    log = tmp_path / "worker.log"
    log.write_text("\n".join(START) + "\n")
    with appending_writer(log, LOST, delay_s=0.01, start_after_s=0.3):
        res, failed = run_module(_args(fake_sglang, log))
    assert failed
    assert "Connection closed by peer" in res["msg"], res["msg"]
