"""The `podman run` of a test's or bench's own container, labelled as every emulator host is.

scripts/cleanup_hosts.sh removes a run's containers by their labels (`io.sglang-tune=1` and
`io.sglang-tune.run=<SGLANG_TUNE_RUN>`, "user" when unset: tests/conftest.py): this is the one place
a container outside playbooks/emulator_hosts.yml gets them, so the trap finds it.
"""

from __future__ import annotations

import os


def labelled_run(name: str, image: str, *command: str, systemd: bool = False) -> list[str]:
    """`podman run -d` arguments (without `podman`) for a detached container without network,
    labelled with this run's id; with `systemd`, systemd is PID 1 (`--systemd=always`)."""
    run = os.environ.get("SGLANG_TUNE_RUN", "user")
    args = ["run", "-d", "--name", name, "--label", "io.sglang-tune=1", "--label", f"io.sglang-tune.run={run}"]
    args += ["--network", "none", *(["--systemd=always"] if systemd else []), image, *command]
    return args
