"""Two emulator hosts that form one SGLang server (a multi-node group), for the systemd tests.

Each test file that needs such a pair owns one `TwoNodes` with its own names and indexes, so the
files run on different pytest-xdist workers side by side (tests/conftest.py). Each host's own veth
pair only reaches the controller (10.213.<idx>.1/30, no forwarding); `node_link` adds the cluster
network real nodes have between them: a veth pair from one host's network namespace to the
other's, 10.213.<link>.1/30 (rank 0) and 10.213.<link>.2/30 (the worker), and rank 0's
`sglang_server_dist_init_host` is its address there. The namespaces go with the hosts
(playbooks/emulator_hosts.yml absent), and the pair with them.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from roles_testlib import VENV_BIN, EmulatorHost, base_inventory, emulator_inventory, remove_container, run

UNIT = "sglang-qwen.service"


@dataclass(frozen=True)
class TwoNodes:
    """Rank 0 `head` and rank 1 `worker` (and `ghost`, a group member never made) by index."""

    head: str
    worker: str
    ghost: str
    index: dict[str, int]
    link_index: int
    dist_port: int
    group: str

    @property
    def head_link_addr(self) -> str:
        return f"10.213.{self.link_index}.1"

    def url(self, host: str) -> str:
        return f"http://10.213.{self.index[host]}.2:30000"

    def emu(self, host: str) -> EmulatorHost:
        return EmulatorHost(host, self.index[host])

    def podman(self, host: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.emu(host).podman(*args, check=check)

    def active(self, host: str) -> str:
        return self.podman(host, "systemctl", "is-active", UNIT, check=False).stdout.strip()

    def inventory(self, path: Path, wheelhouse: Path, hosts: tuple[str, ...] | None = None) -> Path:
        """`emulator_inventory` with `hosts` as one TP-2 server (the group), one GPU declared per host."""
        hosts = hosts or (self.head, self.worker)
        base = yaml.safe_load(base_inventory())["all"]["children"]["emulator_hosts"]["vars"]
        gpu = base["cuda_env_declared_gpus"][0]
        spec = {h: {"emulator_host_index": self.index[h]} for h in hosts}
        spec[self.head]["sglang_server_dist_init_host"] = self.head_link_addr
        return emulator_inventory(
            path,
            wheelhouse,
            spec,
            groups={self.group: list(hosts)},
            sglang_server_tp_size=2,
            sglang_server_multinode_group=self.group,
            sglang_server_dist_init_port=self.dist_port,
            sglang_server_dist_timeout=60,
            # A dead rank stays dead, so the test sees what the gate sees (no systemd restart).
            sglang_server_restart="no",
            cuda_env_declared_gpus=[dict(gpu, count=1)],
        )

    def node_link(self, up: bool) -> None:
        """The cluster network between the two hosts' namespaces (see the module docstring)."""
        a, b = f"sgt-{self.head}", f"sgt-{self.worker}"
        ca, cb = f"sgtm{self.link_index}a", f"sgtm{self.link_index}b"
        if not up:
            subprocess.run(["ip", "-n", a, "link", "del", ca], capture_output=True)
            return
        if subprocess.run(["ip", "-n", a, "link", "show", ca], capture_output=True).returncode == 0:
            return
        for cmd in (
            ["ip", "-n", a, "link", "add", ca, "type", "veth", "peer", "name", cb, "netns", b],
            ["ip", "-n", a, "addr", "add", f"{self.head_link_addr}/30", "dev", ca],
            ["ip", "-n", b, "addr", "add", f"10.213.{self.link_index}.2/30", "dev", cb],
            ["ip", "-n", a, "link", "set", ca, "up"],
            ["ip", "-n", b, "link", "set", cb, "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)

    @contextlib.contextmanager
    def made(self, tmp: Path, wheelhouse: Path) -> Iterator[tuple[Path, Path]]:
        """Both hosts made, linked and, whatever happens, removed again: yields (tmp, inventory)."""
        inv = self.inventory(tmp / "inventory.yml", wheelhouse)
        hosts = [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "playbooks/emulator_hosts.yml"]
        try:  # made inside: a create play past its timeout leaves half-made hosts for the finally
            made = run(hosts, timeout=300)
            assert made.returncode == 0, made.stdout[-4000:]
            self.node_link(True)
            yield tmp, inv
        finally:
            self.node_link(False)
            run(hosts + ["-e", "emulator_hosts_state=absent"], timeout=300)
            for h in (self.head, self.worker):
                remove_container(h)
