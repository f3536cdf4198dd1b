"""Fixtures for the tuner's tests: real emulator processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tuner_testlib import emulator


@pytest.fixture(scope="module")
def emu_url() -> Iterator[str]:
    with emulator() as url:
        yield url
