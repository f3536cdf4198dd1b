"""Fixtures for tests/roles (helpers live in roles_testlib.py)."""

from __future__ import annotations

import pytest
from roles_testlib import podman_ready


@pytest.fixture(scope="session")
def need_podman() -> None:
    reason = podman_ready()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def frozen_wheelhouse(tmp_path_factory):
    """A copy of the emulator wheelhouse, built once: code edited while a slow test runs must not
    look like a configuration change (the play rebuilds build/wheelhouse when sources change)."""
    import shutil
    import subprocess

    from roles_testlib import ROOT, VENV_BIN

    subprocess.run(
        [str(VENV_BIN / "python"), str(ROOT / "scripts/build_wheelhouse.py"), "--quiet"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    dest = tmp_path_factory.mktemp("wheelhouse") / "wheelhouse"
    shutil.copytree(ROOT / "build" / "wheelhouse", dest)
    return dest
