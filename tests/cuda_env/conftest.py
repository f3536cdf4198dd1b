"""Shared paths and module loaders for the cuda_env tests.

plugins/filter/gpu_facts.py and roles/cuda_env/files/nccl_allreduce_check.py are plain files (an Ansible
filter plugin and a script the role copies to hosts), not packages: their directories go on sys.path so
that the tests and the processes the NCCL check spawns import them by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROLE = REPO / "roles" / "cuda_env"
for _p in (REPO / "plugins" / "filter", ROLE / "files"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
