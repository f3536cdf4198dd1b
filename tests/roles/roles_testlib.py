"""Shared helpers for the tests of the deployment half (roles/sglang_server, playbooks, inventory).

Imported by the tests of this directory (pytest puts it on sys.path); conftest.py holds the fixtures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
IMAGE = "localhost/sglang-emulator-host:bookworm"

# The collection as Ansible imports it (the link `make setup` makes): the filter plugin imports its
# rules by FQCN (ansible_collections.sglang_tune.serving.plugins.module_utils...).
sys.path.insert(0, str(ROOT / ".ansible" / "collections"))


def ansible_env(**extra: str) -> dict[str, str]:
    """The environment ansible-playbook/molecule need: the venv on PATH, the repo's ansible.cfg."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PY_COLORS"] = "0"
    env["NO_COLOR"] = "1"
    env.pop("SGLANG_API_KEY", None)
    env.update(extra)
    return env


def run(cmd: list[str], timeout: float = 300, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=ansible_env(**env), capture_output=True, text=True, timeout=timeout)


def podman_ready() -> str | None:
    """Why systemd-container tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (podman, network namespaces)"
    if shutil.which("podman") is None:
        return "podman is not installed (make setup)"
    if subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True).returncode != 0:
        return f"image {IMAGE} is missing (make setup)"
    return None


def remove_container(name: str) -> None:
    subprocess.run(["podman", "rm", "-f", "-t", "2", name], capture_output=True)
