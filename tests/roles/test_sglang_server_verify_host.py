"""verify_outputs on a real host (issue 20): the role's correctness gate, after the health gate.

One emulator host (podman, systemd as PID 1, made by playbooks/emulator_hosts.yml, index 215,
name prefix vg20-). The no-speculation deployment's greedy outputs are captured with
`python -m tuner verify --capture` (the controller reaches the host over its veth); then the deploy
play runs through ansible-runner with `verify_outputs=true` and the baseline file: a correct
speculative configuration passes and becomes the last good one; the same configuration with the
emulator fault `spec-diverge=5` (or `accept-collapse=0`) starts, is healthy, fails the output check
and is rolled back, the failure naming the reason; a missing baseline file fails before the host
changes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import urllib.request

import pytest
from roles_testlib import ROOT, EmulatorHost, ansible_env, deploy_play

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(115)

EMU = EmulatorHost("vg20-verify-215", 215)
HOST, URL, UNIT = EMU.name, EMU.url, EMU.unit
podman, exec_start = EMU.podman, EMU.exec_start


def deploy(tmp_path, inv, name, **extravars):
    """One ansible-runner run of the deploy play: (rc, stdout)."""
    d = deploy_play(tmp_path, inv, name, **extravars)
    return d.rc, d.out


def etc_digest() -> str:
    listing = podman("sh", "-c", f"find /etc/sglang /etc/systemd/system/{UNIT} -type f | sort | xargs cat").stdout
    return hashlib.sha256((listing + EMU.show("InvocationID")).encode()).hexdigest()


@pytest.fixture(scope="module")
def host(need_podman, frozen_wheelhouse, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify-host")
    inv = EMU.inventory(tmp / "inventory.yml", frozen_wheelhouse)
    with EMU.made(inv):
        yield tmp, inv


@pytest.mark.systemd
@pytest.mark.slow
def test_verify_outputs_passes_a_correct_configuration_and_rolls_back_a_wrong_one(host):
    tmp, inv = host
    baseline = tmp / "baseline.json"

    # The campaign's no-speculation deployment, once: its greedy outputs become the baseline.
    rc, out = deploy(tmp, inv, "nospec", spec_steps=0)
    assert rc == 0, out[-6000:]
    cap = subprocess.run(
        [sys.executable, "-m", "tuner", "verify", "--url", URL, "--baseline", str(baseline), "--capture"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=ansible_env(),
    )
    assert cap.returncode == 0, cap.stdout + cap.stderr
    assert json.loads(baseline.read_text())["server_version"].startswith("0.5.9")

    # A correct speculative configuration passes the check and becomes the last good one.
    rc, out = deploy(
        tmp, inv, "spec-ok", spec_steps=3, verify_outputs=True, sglang_server_verify_baseline=str(baseline)
    )
    assert rc == 0, out[-6000:]
    assert "Check the greedy outputs and the acceptance against the stored baseline" in out
    assert "--speculative-num-steps 3" in exec_start()

    # The same with a wrong verify path: healthy, but its outputs differ. Rolled back, reason first.
    rc, out = deploy(
        tmp,
        inv,
        "spec-diverge",
        spec_steps=3,
        verify_outputs=True,
        sglang_server_verify_baseline=str(baseline),
        sglang_server_emulator_faults=["spec-diverge=5"],
    )
    assert rc != 0, out[-6000:]
    assert "output check failed: outputs differ from the no-speculation baseline" in out, out[-6000:]
    assert "first divergence at token 5" in out
    assert "Rolled back sglang-qwen.service" in out and "it is healthy again" in out, out[-6000:]
    assert "spec-diverge" not in exec_start()
    assert podman("systemctl", "is-active", UNIT, check=False).stdout.strip() == "active"

    # Acceptance that collapses while the text stays right is caught too.
    rc, out = deploy(
        tmp,
        inv,
        "collapse",
        spec_steps=3,
        verify_outputs=True,
        sglang_server_verify_baseline=str(baseline),
        sglang_server_emulator_faults=["accept-collapse=0"],
    )
    assert rc != 0, out[-6000:]
    assert "output check failed: acceptance length" in out and "is not above 1.05" in out, out[-6000:]
    assert "Rolled back sglang-qwen.service" in out
    assert "accept-collapse" not in exec_start()
    with urllib.request.urlopen(URL + "/health", timeout=10) as r:
        assert r.status == 200

    # A missing baseline file fails before the host changes, naming the variable.
    before = etc_digest()
    rc, out = deploy(
        tmp, inv, "no-file", spec_steps=4, verify_outputs=True, sglang_server_verify_baseline=str(tmp / "nope.json")
    )
    assert rc != 0
    assert "sglang_server_verify_baseline=" in out and "no such file on the controller" in out, out[-4000:]
    assert etc_digest() == before
