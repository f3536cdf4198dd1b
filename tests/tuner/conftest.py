"""Fixtures for the tuner's tests: real emulator processes on loopback, and a guard that fails a test
which would deploy anything."""

from __future__ import annotations

from collections.abc import Iterator

import ansible_runner
import pytest
from tuner_testlib import emulator

from tuner.run import deploy


@pytest.fixture(scope="module")
def emu_url() -> Iterator[str]:
    with emulator() as url:
        yield url


@pytest.fixture
def no_hosts(monkeypatch):
    """Fail the test if anything would deploy."""

    def boom(*a, **k):
        raise AssertionError("a host was touched")

    monkeypatch.setattr(ansible_runner, "run", boom)
    monkeypatch.setattr(deploy.Deployer, "deploy", boom)
