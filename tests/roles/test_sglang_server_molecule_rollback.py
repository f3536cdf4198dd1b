"""Molecule's `rollback` scenario of roles/sglang_server (systemd as PID 1): converge, bad
configurations (side_effect), verify, on an emulator host made by playbooks/emulator_hosts.yml and
reached over SSH."""

from __future__ import annotations

import pytest
from roles_testlib import molecule_test


@pytest.mark.systemd
@pytest.mark.slow
# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
@pytest.mark.cost(85)
def test_molecule_rollback_scenario(need_podman, frozen_wheelhouse, tmp_path):
    out = molecule_test("rollback", tmp_path, frozen_wheelhouse)
    # its host is an emulator host, made and removed by molecule's create/destroy
    assert "PLAY [Create or remove the emulator hosts]" in out and "PLAY [Tell molecule the host is gone]" in out
