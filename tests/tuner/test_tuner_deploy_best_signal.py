"""A SIGTERM while --deploy-best deploys (systemd stopping the tuner, `timeout`, a CI cancel) is an
interrupt like one during the sweep: the play is cancelled and the run ends with 1 and its outputs,
where the tuner's signal handlers were gone by then and the signal killed it at once (exit 143),
its play left running."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys, threading, time, types
    sys.path.insert(0, sys.argv[1])
    from tuner.run import sweep as sw

    class Deployer:
        cancel = threading.Event()
        def deploy(self, cfg, host, **kw):
            print("play running", flush=True)
            for _ in range(300):  # ansible-runner polls its cancel callback so
                if self.cancel.is_set():
                    print("play canceled by the tuner", flush=True)
                    return None
                time.sleep(0.05)
            print("play ran to its end", flush=True)

    class Progress:
        def line(self, s):
            print(s, flush=True)

    written = []
    chosen = types.SimpleNamespace(config=types.SimpleNamespace(label="k3", config_id="k3-t1"))
    summary = types.SimpleNamespace(recommendation=types.SimpleNamespace(chosen=chosen, reason=""))
    sw.outputs.write_all = lambda *a, **k: written.append(1) or summary
    s = sw.Sweep.__new__(sw.Sweep)
    s.spec = types.SimpleNamespace(deploy_best=True, schedule=False)
    s.verify, s._baseline, s.hosts, s.deployer, s.progress = None, None, ["emu1"], Deployer(), Progress()
    s.plan = types.SimpleNamespace(infeasible=[])
    s.planner = types.SimpleNamespace(runs=lambda cfg, host: True, set_aside=lambda: None)  # every host's role runs it
    s.store = types.SimpleNamespace(state=lambda: types.SimpleNamespace(skipped={}))
    async def nothing(*a, **k):
        return None
    s._worker = nothing
    s._confirm_round = nothing
    def stop_later():
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=stop_later, daemon=True).start()
    rc = asyncio.run(s.run())
    print(f"rc={rc} outputs={len(written)}", flush=True)
    sys.exit(rc)
    """
)


def test_a_sigterm_during_deploy_best_cancels_the_play_and_exits_1(tmp_path):
    script = tmp_path / "deploy_best_sigterm.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), str(ROOT)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "play canceled by the tuner" in p.stdout and "play ran to its end" not in p.stdout
    assert "interrupted during --deploy-best" in p.stdout
    assert "rc=1 outputs=2" in p.stdout  # after the sweep, and again after the interrupted deploy
