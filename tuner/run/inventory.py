"""The hosts a sweep may use: `ansible-inventory` read once (group `sglang_servers`, `--limit`),
and the slots configurations run in (a host, or a multi-node group deployed as one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_utils.sglang_checks import parse_whole_number
from sglang_utils.sglang_flags import is_loopback
from sglang_utils.sglang_multinode import rank_order

from ..spec.flags import host_patterns
from ..spec.refusals import templated

SERVER_GROUP = "sglang_servers"


class InventoryError(RuntimeError):
    pass


def _group_hosts(inv: dict[str, Any], group: str, seen: set[str] | None = None) -> list[str]:
    seen = seen or set()
    if group in seen or group not in inv:
        return []
    seen.add(group)
    g = inv.get(group) or {}
    hosts = list(g.get("hosts") or [])
    for child in g.get("children") or []:
        hosts.extend(h for h in _group_hosts(inv, child, seen) if h not in hosts)
    return hosts


def _ipv4(address: str) -> bool:
    """An IPv4 address literal."""
    return re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", address) is not None


@dataclass
class Inventory:
    hosts: list[str]  # the sweep's hosts (group sglang_servers, --limit applied)
    hostvars: dict[str, Any]  # untemplated
    groups: dict[str, list[str]]  # every group's hosts, in inventory order
    has_group: bool = True  # the inventory has the group (else `hosts` are every host)

    def slots(self) -> dict[str, list[str]]:
        """Where one configuration runs: a host, or a multi-node tensor-parallel group as a whole.

        A host with `sglang_server_multinode_group: G` serves one model together with the other
        hosts of G (the role's contract: `sglang_server_multinode_head`, else G's first host by name, is the
        head, rank 0, which serves HTTP; the rest follow by name, the role's own rule in
        plugins/module_utils/sglang_multinode.py), so a configuration is deployed to all of G at
        once and benchmarked at its head. Other hosts are a slot each. Slot name: the host, or G.
        """
        out: dict[str, list[str]] = {}
        for h in self.hosts:
            g = self._group_of(h)
            if g is not None and g not in out:
                members = [m for m in self.groups[g] if m in self.hosts]
                head = (self.hostvars.get(h) or {}).get("sglang_server_multinode_head") or ""
                if isinstance(head, str) and "{{" not in head:
                    members = rank_order(members, head)
                out[g] = members or [h]
        # a member of a group's slot is never a slot of its own as well (one that does not name the
        # group itself is refused by the role's group check, before any host changes)
        grouped = {m for members in out.values() for m in members}
        for h in self.hosts:
            if h not in grouped and self._group_of(h) is None:
                out[h] = [h]
        return out

    def slot_errors(self) -> list[tuple[str, str]]:
        """(flag, why) for a host of a multi-node group that names another group: it would be a
        rank of two servers at once, and the role refuses both groups' plays, so those slots
        recorded every configuration as failed in seconds while the other slots measured them.
        (A `--limit` that keeps part of a group is the role's to refuse: ansible-inventory lists
        a limited group without the hosts left out.)"""
        out: list[tuple[str, str]] = []
        named = dict.fromkeys(g for h in self.hosts if (g := self._group_of(h)) is not None)
        for g in named:
            for m in self.groups[g]:
                other = self._group_of(m)
                if m in self.hosts and other is not None and other != g:
                    out.append(
                        ("--inventory", f"{m} is a host of group {g}, a multi-node group, but names group {other}")
                    )
        return out

    def unreachable_binds(self, extra_vars: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
        """(host, why) for each slot's HTTP host whose server the tuner's client, on this machine,
        could not reach at the URL the role publishes: one that listens only on its own loopback
        (`sglang_server_host`) while this machine reaches it over another machine's connection, or
        one on `::`, which listens on IPv6 only (asyncio's create_server, which uvicorn's server
        uses, sets IPV6_V6ONLY), reached at an IPv4 address. Every configuration would deploy, pass
        its gate (which runs on the host) and fail its warm-up. A host given a client URL or host
        of its own, or whose values are templates (the tuner does not render them), is not judged.
        `extra_vars` (the sweep's `-e`) override the inventory's, as they do in the play."""
        out = []
        for members in self.slots().values():
            host = members[0]
            v = {**(self.hostvars.get(host) or {}), **(extra_vars or {})}
            bind, conn = v.get("sglang_server_host"), v.get("ansible_connection", "ssh")
            addr = v.get("ansible_host", host)
            if not (isinstance(bind, str) and isinstance(conn, str) and isinstance(addr, str)):
                continue
            if "{{" in bind + conn + addr or "sglang_server_client_url" in v or "sglang_server_client_host" in v:
                continue
            if is_loopback(bind) and conn not in ("local", "ansible.builtin.local") and not is_loopback(addr):
                out.append(
                    (
                        host,
                        f"{host} binds its server to {bind} (sglang_server_host), which only {host} itself reaches, "
                        f"and the tuner benchmarks from this machine ({conn} connection)",
                    )
                )
            elif bind == "::" and _ipv4(addr):
                out.append(
                    (
                        host,
                        f"{host} binds its server to :: (sglang_server_host), which listens on IPv6 only, and is "
                        f"reached at the IPv4 address {addr}",
                    )
                )
        return out

    def plan_vars(self, limits: Mapping[str, int], paths: Sequence[str]) -> dict[str, Any]:
        """What the plan must hold for every slot, of the variables the play checks a configuration
        against (tuner/spec/configs.py PLAN_LIMITS and PLAN_PATHS): each limit the least of the
        slots' (a configuration may land on any host), a slot without one counting the role's
        default (`limits`' value), a templated one (the tuner does not render it) left to the play;
        a path only where every slot has one (a templated one counts as given). Every node of a
        multi-node slot counts, not its head alone: the play checks each node against its own."""
        out: dict[str, Any] = {}
        heads = [(self.hostvars.get(m) or {}) for members in self.slots().values() for m in members]
        for name, default in limits.items():
            vals = [v.get(name) for v in heads]
            if all(v in (None, "") for v in vals):
                continue
            known = []
            for v in vals:
                if v in (None, ""):
                    known.append(default)
                elif not (isinstance(v, str) and "{{" in v):
                    n = parse_whole_number(v)
                    if n is None:
                        out[name] = v  # the play refuses it too: the plan says so in its words
                        break
                    known.append(n)
            else:
                if known:
                    out[name] = min(known)
        for name in paths:
            given = [v.get(name) for v in heads]
            if given and all(isinstance(v, str) and v for v in given):
                out[name] = given[0]
        return out

    def slot_nodes(
        self, names: Sequence[str], extra_vars: Mapping[str, Any], defaults: Mapping[str, Any]
    ) -> list[list[dict[str, Any] | None]]:
        """Per slot, per node, the values of `names` the play would see there: the sweep's -e over
        the host's (untemplated) variables over the role's `defaults`, as Ansible ranks them. None
        for a node where one is a template (the tuner does not render it) or set nowhere: the play
        judges that node itself (tuner/spec/refusals.py never counts it as refusing)."""
        out: list[list[dict[str, Any] | None]] = []
        for members in self.slots().values():
            nodes: list[dict[str, Any] | None] = []
            for m in members:
                layers = (extra_vars, self.hostvars.get(m) or {}, defaults)
                v = {n: next(layer[n] for layer in layers if n in layer) for n in names if any(n in x for x in layers)}
                nodes.append(v if len(v) == len(names) and not templated(v) else None)
            out.append(nodes)
        return out

    def slot_extra_flags(self, slot: str) -> dict[str, Any] | str:
        """The sglang_server_extra_flags the inventory gives a slot's deploys (every node's alike, {}
        where none sets them), or why the tuner cannot tell: a template it does not render, or
        nodes that differ. What a redeploy that adds a flag must start from, since an -e of the
        variable replaces the inventory's whole (tuner/verify/phase.py `_deterministic_vars`)."""
        values = [(self.hostvars.get(m) or {}).get("sglang_server_extra_flags") for m in self.slots().get(slot, [slot])]
        if any(v is not None and (not isinstance(v, dict) or templated(v)) for v in values):
            return f"{slot}'s sglang_server_extra_flags are a template the tuner does not render"
        flags = [dict(v or {}) for v in values]
        if any(f != flags[0] for f in flags):
            return f"the nodes of {slot} set different sglang_server_extra_flags"
        return flags[0] if flags else {}

    def _group_of(self, host: str) -> str | None:
        """The multi-node group a host names (`sglang_server_multinode_group`), when it is one of
        the inventory's groups; None for a host of its own (also when the name is still a template,
        which the tuner does not render)."""
        g = (self.hostvars.get(host) or {}).get("sglang_server_multinode_group")
        return g if isinstance(g, str) and g and "{{" not in g and g in self.groups else None


def inventory_hosts(
    inventory: Path, limit: str | None, project_dir: Path, group: str = SERVER_GROUP
) -> tuple[list[str], dict[str, Any]]:
    inv = read_inventory(inventory, limit, project_dir, group)
    return inv.hosts, inv.hostvars


def read_inventory(
    inventory: Path, limit: str | None, project_dir: Path, group: str = SERVER_GROUP, playbook_dir: Path | None = None
) -> Inventory:
    """The hosts a sweep may use, and their (untemplated) variables, via `ansible-inventory`.

    Group `sglang_servers` when the inventory has it, else every host; `--limit` applies as it
    does for the play; with `playbook_dir`, the host_vars/ and group_vars/ beside the play count
    too, as the play reads them. Nothing here connects to a host.
    """
    # The group's hosts alone first (the user's --limit within it): Ansible works out the variables
    # of every host a listing holds, and a vaulted group_vars file of hosts the sweep never deploys
    # needed its password here, though the play never reads it. Every host only for an inventory
    # without the group.
    within = ",".join([*host_patterns(limit), f"&{group}"]) if limit else group
    inv = _listing(inventory, within, project_dir, playbook_dir)
    # `--limit` drops a group none of whose hosts it matches from the listing's keys, but not from
    # its parents' `children`: such a group is still the play's (playbooks/deploy.yml targets it), so
    # it selects no host, never every host.
    named = group in inv or any(group in ((g or {}).get("children") or []) for k, g in inv.items() if k != "_meta")
    if not named:
        inv = _listing(inventory, limit, project_dir, playbook_dir)
    hosts = _group_hosts(inv, group) if named else _group_hosts(inv, "all")
    hostvars = (inv.get("_meta") or {}).get("hostvars") or {}
    groups = {g: _group_hosts(inv, g) for g in inv if g != "_meta"}
    return Inventory(hosts=hosts, hostvars=hostvars, groups=groups, has_group=named)


def _listing(inventory: Path, limit: str | None, project_dir: Path, playbook_dir: Path | None) -> dict[str, Any]:
    """`ansible-inventory --list` of the inventory (within `limit`), as JSON, else InventoryError."""
    exe = Path(sys.executable).with_name("ansible-inventory")
    cmd = [str(exe) if exe.exists() else "ansible-inventory", "-i", str(inventory), "--list"]
    if playbook_dir is not None:
        cmd += ["--playbook-dir", str(playbook_dir)]
    if limit:
        cmd += ["--limit", limit]
    # An inventory Ansible cannot use is an error here, not a warning and an empty host list; one
    # file of an inventory directory that no plugin reads (a README) is a warning, as in the play.
    env = {
        **os.environ,
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1",
        # a pattern that matches nothing (the group, in an inventory without it) is answered below
        "ANSIBLE_HOST_PATTERN_MISMATCH": "warning",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CONFIG": str(Path(project_dir) / "ansible.cfg"),
    }
    try:
        p = subprocess.run(cmd, cwd=project_dir, capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InventoryError(f"ansible-inventory failed: {exc}") from None
    if p.returncode != 0:
        lines = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("[WARNING]")] or lines
        why = [ln for ln in lines if re.search(r"parsing failed|Unable to parse|ERROR|Failed to parse", ln)]
        raise InventoryError((why or lines or [f"ansible-inventory rc {p.returncode}"])[0][:300])
    try:
        listing: dict[str, Any] = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise InventoryError("ansible-inventory printed no JSON") from None
    return listing
