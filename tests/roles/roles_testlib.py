"""Shared helpers for the tests of the deployment half (roles/sglang_server, playbooks, inventory).

Imported by the tests of this directory (pytest puts it on sys.path); conftest.py holds the fixtures.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

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


@dataclass(frozen=True)
class Deployed:
    """One ansible-runner run of the deploy play on an emulator host: its exit code, its output (and,
    when asked, its artifacts), its events."""

    rc: int
    out: str
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, Any]:
        """The play's `playbook_on_stats` event data (changed counts, set_stats artifacts)."""
        return next((e["event_data"] for e in self.events if e["event"] == "playbook_on_stats"), {})

    def report(self, host: str) -> dict[str, Any]:
        """The gate's report of `host` (the role's set_stats `sglang_ready`)."""
        return self.stats["artifact_data"]["sglang_ready"][host]["report"]


@dataclass(frozen=True)
class EmulatorHost:
    """The podman emulator host a systemd test file owns (playbooks/emulator_hosts.yml), reached at
    10.213.<index>.2: each file has its own name and index so that files run side by side (see
    docs/architecture.md "Emulator hosts (this machine)"). One place for what every such file did
    with it: its inventory (`emulator_inventory`), commands in the container, and making and removing
    it; the deploy play runs through `deploy_play`."""

    name: str
    index: int
    unit: str = "sglang-qwen.service"

    @property
    def url(self) -> str:
        return f"http://10.213.{self.index}.2:30000"

    def podman(
        self, *args: str, check: bool = True, user: str | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`podman exec` in the host (as `user`, with `stdin`)."""
        cmd = ["podman", "exec"] + (["-i"] if stdin is not None else []) + (["--user", user] if user else [])
        return subprocess.run(
            cmd + [self.name, *args], input=stdin, capture_output=True, text=True, check=check, timeout=120
        )

    def show(self, prop: str) -> str:
        """`systemctl show` of the unit, one property's value."""
        return self.podman("systemctl", "show", self.unit, "-p", prop, "--value").stdout

    def exec_start(self) -> str:
        return self.show("ExecStart")

    def invocation(self) -> str:
        """The unit's InvocationID: it changes exactly when systemd (re)starts the server."""
        return self.show("InvocationID").strip()

    def inventory(self, path: Path, wheelhouse: Path, hosts: dict[str, Any] | None = None, **group_vars: Any) -> Path:
        """`emulator_inventory` with this host only (or `hosts`)."""
        return emulator_inventory(
            path, wheelhouse, hosts or {self.name: {"emulator_host_index": self.index}}, **group_vars
        )

    @contextlib.contextmanager
    def made(self, inv: Path, timeout: float = 300) -> Iterator[None]:
        """The host, made by playbooks/emulator_hosts.yml and removed afterwards, whatever happens."""
        play = [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "playbooks/emulator_hosts.yml"]
        try:
            made = run(play, timeout=timeout)
            assert made.returncode == 0, made.stdout[-4000:]
            yield
        finally:
            run(play + ["-e", "emulator_hosts_state=absent"], timeout=timeout)
            remove_container(self.name)


def emulator_inventory(
    path: Path,
    wheelhouse: Path,
    hosts: dict[str, Any],
    groups: dict[str, list[str]] | None = None,
    **group_vars: Any,
) -> Path:
    """inventory/emulator.yml with `hosts` in its emulator_hosts group, the frozen wheelhouse, a 1 s
    emulated start and `group_vars` on top, written to `path`; `groups` adds groups of those hosts
    beside emulator_hosts (a multi-node server's `sglang_server_multinode_group`)."""
    inv = yaml.safe_load(base_inventory())
    group = inv["all"]["children"]["emulator_hosts"]
    group["hosts"] = hosts
    group["vars"].update(
        sglang_server_emulator_build_wheelhouse=False,
        sglang_server_emulator_wheelhouse_dir=str(wheelhouse),
        sglang_server_emulator_startup_s=1,
        **group_vars,
    )
    for name, members in (groups or {}).items():
        inv["all"]["children"][name] = {"hosts": {h: {} for h in members}}
    path.write_text(yaml.safe_dump(inv))
    return path


def base_inventory() -> str:
    """The text of inventory/emulator.yml, the inventory every emulator host test starts from."""
    return (ROOT / "inventory" / "emulator.yml").read_text()


MOLECULE_KEY = "molecule-Secret-Key-7f3a"  # roles/sglang_server/molecule/base.yml


def molecule_test(scenario: str, tmp_path: Path, wheelhouse: Path) -> str:
    """`molecule test -s SCENARIO` of roles/sglang_server, as its molecule/base.yml says to run it
    (from the role directory, HOME on scratch space, the frozen wheelhouse); asserts it passed and
    that the API key it deploys (verify checks it reached the server) never showed in the play's
    output. Returns the output."""
    home = tmp_path / "home"
    home.mkdir()
    try:
        proc = run(
            ["molecule", "-c", "molecule/base.yml", "test", "-s", scenario],
            cwd=ROOT / "roles" / "sglang_server",
            timeout=1200,
            HOME=str(home),
            MOLECULE_SGLANG_WHEELHOUSE=str(wheelhouse),
            VIRTUAL_ENV=str(ROOT / ".venv"),
        )
    finally:
        remove_container(f"sgt-mol-{scenario}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert scenario in out and "failed=0" in out
    assert MOLECULE_KEY not in out
    return out


def deploy_play(
    tmp: Path,
    inv: Path,
    name: str,
    *,
    tags: str | None = None,
    env: dict[str, str] | None = None,
    artifacts: bool = False,
    **extravars: Any,
) -> Deployed:
    """One ansible-runner run of deploy.yml on `inv` (private data dir `tmp/runner-<name>`), in the
    environment `ansible_env` gives plus `env`. With `artifacts`, the text of ansible-runner's
    artifacts follows the output, all but `command` (it records the environment the run was
    started with, the test's own input, not something the play wrote)."""
    import ansible_runner  # the deploy half's tests only; the helpers above need none of it

    private = tmp / f"runner-{name}"
    private.mkdir()
    saved = dict(os.environ)
    run_env = ansible_env(**(env or {}))  # from the environment as it is, before it is replaced
    os.environ.clear()
    os.environ.update(run_env)
    try:
        r = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(ROOT),
            playbook="deploy.yml",
            inventory=str(inv),
            extravars=extravars,
            quiet=True,
            tags=tags,
            timeout=900,  # a stuck play fails its test (status "timeout") rather than hold the stage
        )
        events = list(r.events)
        out = r.stdout.read()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if artifacts:
        for path in sorted((private / "artifacts").rglob("*")):
            if path.is_file() and path.name != "command":
                out += "\n" + path.read_text(errors="replace")
    return Deployed(int(r.rc), out, events)
