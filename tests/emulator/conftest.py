"""Fixtures for the emulator tests (helpers live in emu_testlib.py)."""

from __future__ import annotations

import pytest
from emu_testlib import Emulator


@pytest.fixture
def emulator(tmp_path):
    """Factory: emulator(args...) starts a process; every one is stopped (SIGTERM, then SIGKILL) at the end."""
    procs: list[Emulator] = []

    def start(*args: str, env: dict[str, str] | None = None, with_defaults: bool = True) -> Emulator:
        e = Emulator(tmp_path, list(args), env=env, with_defaults=with_defaults)
        procs.append(e)
        return e

    yield start
    for p in procs:
        p.kill()


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("emu")
