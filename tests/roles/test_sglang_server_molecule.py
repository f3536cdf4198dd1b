"""The molecule scenarios of roles/sglang_server (systemd as PID 1): default (converge,
idempotence, verify; podman driver and connection) and rollback (converge, bad configurations,
verify; an emulator host made by playbooks/emulator_hosts.yml, reached over SSH)."""

from __future__ import annotations

import pytest
from roles_testlib import ROOT, remove_container, run

ROLE = ROOT / "roles" / "sglang_server"
KEY = "molecule-Secret-Key-7f3a"  # molecule/base.yml


@pytest.mark.systemd
@pytest.mark.slow
# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
@pytest.mark.cost(270)
@pytest.mark.parametrize("scenario", ["default", "rollback"])
def test_molecule_scenario(need_podman, frozen_wheelhouse, tmp_path, scenario):
    home = tmp_path / "home"
    home.mkdir()
    try:
        proc = run(
            ["molecule", "-c", "molecule/base.yml", "test", "-s", scenario],
            cwd=ROLE,
            timeout=1200,
            HOME=str(home),
            MOLECULE_SGLANG_WHEELHOUSE=str(frozen_wheelhouse),
            VIRTUAL_ENV=str(ROOT / ".venv"),
        )
    finally:
        remove_container(f"sgt-mol-{scenario}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert f"{scenario}" in out and "failed=0" in out
    if scenario == "rollback":  # its host is an emulator host, made and removed by molecule's create/destroy
        assert "PLAY [Create or remove the emulator hosts]" in out and "PLAY [Tell molecule the host is gone]" in out
    # The key reached the server (verify checks it) but never the play's output.
    assert KEY not in out
