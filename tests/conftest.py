"""Session-wide settings for every test directory (each has its own conftest.py for fixtures).

Every emulator host, container and emulator process a test run makes carries the run's id: the
podman label and link alias io.sglang-tune.run=<id> (playbooks/emulator_hosts.yml, molecule's
base.yml, the tests' own `podman run`), and SGLANG_TUNE_RUN=<id> in the environment of processes.
scripts/test.sh sets the id and its trap removes only that run's hosts
(`scripts/cleanup_hosts.sh --run <id>`), so the user's own hosts (`make demo`) survive `make test`.
Run directly, pytest makes an id of its own here, before any test starts a subprocess.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

os.environ.setdefault("SGLANG_TUNE_RUN", f"pytest-{uuid.uuid4().hex[:12]}")

# tests/helpers/emulator_proc.py: the one way tests start an emulator (and benches import it too)
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))
