"""Molecule's `default` scenario of roles/sglang_server (systemd as PID 1): converge, idempotence,
verify, on the podman driver and connection. The `rollback` scenario has its own file
(test_sglang_server_molecule_rollback.py), so that the systemd stage's workers run the two side
by side (a file is one worker's: scripts/test.sh)."""

from __future__ import annotations

import pytest
from roles_testlib import molecule_test


@pytest.mark.systemd
@pytest.mark.slow
# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
@pytest.mark.cost(130)
def test_molecule_default_scenario(need_podman, frozen_wheelhouse, tmp_path):
    molecule_test("default", tmp_path, frozen_wheelhouse)
