# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""One SGLang server over the hosts of an inventory group: rank order and the group's input rules.

SGLang runs a model larger than one node with the same launch command on every node plus
``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` (sgl-project/sglang docs
``references/multi_node_deployment/multi_node.md``). The ``sglang_server`` role derives those
flags from ``sglang_server_multinode_group`` (``plugins/filter/sglang_flags.py`` ``sglang_node``);
this file holds what must hold across the hosts of the group, so a group that cannot form one
server fails on the controller, before any host changes, with a message naming the variable.

Rank order (docs/architecture.md "Multi-node"): ``sglang_server_multinode_head`` when set, else
the group's first host by name, is node rank 0; the other hosts follow by name (natural order:
gpu-2 before gpu-10), not in Ansible's ``groups[G]`` order, which is not stable for hosts that
come from child groups (``rank_order``). The same inventory therefore always gives the same ranks.

Standard library only and Python 3.8 syntax: a filter plugin imports it on the controller.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from .sglang_flags import extra_switch_on, given_value

__all__ = [
    "SAME_ON_EVERY_NODE",
    "rank_order",
    "member_settings",
    "member_addresses",
    "address_errors",
    "group_errors",
    "group_verdict",
]

# Settings every host of the group must agree on: the role variable, and why.
SAME_ON_EVERY_NODE = (
    ("sglang_server_multinode_group", "every host of the group must name the group"),
    ("sglang_server_multinode_head", "every host must agree on rank 0"),
    ("sglang_server_tp_size", "the TP size is the whole server's"),
    ("sglang_server_gpus_per_node", "every node holds the same number of TP ranks"),
    ("sglang_server_dist_init_port", "rank 0's port is the one the others connect to"),
    ("sglang_server_dist_init_addr", "rank 0's address is the one the others connect to"),
    ("sglang_server_dist_timeout", "the ranks give up on the rendezvous together"),
    ("sglang_server_engine", "the nodes run one server"),
    ("sglang_server_sglang_version", "the nodes run one server"),
    ("sglang_server_model_path", "every node loads its shard of the same model"),
    # every rank runs its own scheduler on the requests rank 0 broadcasts: with another pool size,
    # request limit or batch rule it would build other batches and the collectives stop matching
    ("sglang_server_mem_fraction_static", "every rank sizes the same KV pool"),
    ("sglang_server_max_running_requests", "every rank's scheduler builds the same batches"),
    ("sglang_server_context_length", "every rank's scheduler builds the same batches"),
    ("sglang_server_chunked_prefill_size", "every rank's scheduler builds the same batches"),
    ("sglang_server_trust_remote_code", "every node loads the same model code"),
    ("sglang_server_extra_flags", "every rank runs the same server (only --node-rank differs)"),
    # every rank runs the draft passes rank 0 schedules: another depth, tree or draft model puts
    # other collectives in its step (a hang, then a gate timeout after every host changed)
    ("spec_steps", "every rank drafts the same depth"),
    ("spec_topk", "every rank drafts the same tree"),
    ("spec_draft_tokens", "every rank verifies the same draft tokens"),
    ("spec_algorithm", "every rank runs the same speculative algorithm"),
    # what spec_steps and spec_algorithm fall back to where a host leaves them unset: compared as
    # they are, since each host resolves the two above from its own
    ("sglang_server_spec_steps_default", "every rank drafts the same depth"),
    ("sglang_server_spec_algorithm_default", "every rank runs the same speculative algorithm"),
    ("spec_schedule", "every rank switches depth on the same schedule"),
    ("sglang_server_spec_draft_model_path", "every rank loads the same draft model"),
)


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _name_key(name: str) -> list[Any]:
    """Natural order of host names: gpu-2 before gpu-10."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", str(name)) if p]


def rank_order(members: Sequence[str], head: Any = "") -> list[str]:
    """The group's hosts in node-rank order: the head first, then the rest by name (natural order),
    the first by name being rank 0 when no head is named. Not Ansible's order of ``groups[G]``: for
    hosts that come from child groups of G it follows the child groups' memory addresses and
    changes from run to run (ansible-core 2.19 walks them out of a set), which would move the
    ranks, and with them every node's flags, between two runs of an unchanged inventory."""
    hosts = sorted(dict.fromkeys(members or []), key=_name_key)
    h = str(head).strip() if head is not None else ""
    if h and h in hosts:
        return [h] + [m for m in hosts if m != h]
    return hosts


def member_settings(members: Sequence[str], hostvars: Any, own: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each member's values of SAME_ON_EVERY_NODE: its own variable where it sets one, else ``own``'s.

    ``hostvars`` is Ansible's (a mapping of host -> its variables); role defaults are not in it,
    so a host that sets nothing has the value this host resolved.
    """
    out: dict[str, dict[str, Any]] = {}
    for m in members:
        try:
            hv = hostvars[m]
        except (KeyError, TypeError):
            hv = {}
        values: dict[str, Any] = {}
        for var, _why in SAME_ON_EVERY_NODE:
            try:
                # a host that does not set the group is not in it (the role's default is ""): read
                # as this host's value, a group named on the head only passed, and the other host
                # deployed a server of its own while the head waited for it as a rank
                missing = "" if var == "sglang_server_multinode_group" else own.get(var)
                values[var] = hv[var] if var in hv else missing
            except Exception:  # noqa: BLE001 - a value that does not template is this host's problem to report
                values[var] = own.get(var)
        out[m] = values
    return out


def group_verdict(group: Any, members: Sequence[str], hostvars: Any, restored: bool = False) -> dict[str, Any]:
    """The group's gate verdict: the first failed rank in node-rank order, with its log tail.

    Each node set ``__sglang_server_mn_rank_failure`` (empty when it passed) and
    ``__sglang_server_mn_rank_tail``; an empty ``failure`` means every rank passed. ``restored``:
    the rollback's gate, whose ranks are the restored units' (tasks/rollback_multinode.yml): the node
    whose restored unit runs rank 0 (``__sglang_server_mn_restored_head``) comes first, the rest by
    name, as they ran when that configuration passed.
    """
    if restored:
        members = rank_order(members, next((m for m in members if _restored_head(hostvars, m)), ""))
    for rank, m in enumerate(members):
        missing = f"{m} did not report its gate (unreachable or failed earlier)"
        try:
            hv = hostvars[m]
            # a rank that never ran the gate has not passed it (hostvars has every inventory host)
            failure = str(hv["__sglang_server_mn_rank_failure"]) if "__sglang_server_mn_rank_failure" in hv else missing
            tail = list(hv["__sglang_server_mn_rank_tail"]) if "__sglang_server_mn_rank_tail" in hv else []
        except (KeyError, TypeError):
            failure, tail = missing, []
        if failure.strip():
            return {
                "failure": f"{failure.strip()} (on {m}, node rank {rank} of sglang_server_multinode_group={_fmt(group)})",
                "tail": [str(x) for x in tail],
                "host": m,
            }
    return {"failure": "", "tail": [], "host": ""}


def _restored_head(hostvars: Any, member: str) -> bool:
    """Whether `member`'s restored unit runs rank 0 (tasks/rollback_multinode.yml sets it)."""
    try:
        return str(hostvars[member].get("__sglang_server_mn_restored_head")).lower() == "true"
    except (KeyError, TypeError, AttributeError):
        return False


_SERVER_ARGS = (
    "spec_steps",
    "spec_topk",
    "spec_draft_tokens",
    "spec_algorithm",
    "sglang_server_spec_steps_default",
    "sglang_server_spec_algorithm_default",
    "spec_schedule",
    "sglang_server_spec_draft_model_path",
    "sglang_server_mem_fraction_static",
    "sglang_server_max_running_requests",
    "sglang_server_context_length",
    "sglang_server_chunked_prefill_size",
    "sglang_server_trust_remote_code",
    "sglang_server_extra_flags",
)


def _same_form(value: Any) -> Any:
    """A server argument as the flag line would carry it (64 and "64" are one value; unset is one)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value).strip().lower() if isinstance(value, (bool, str)) else str(value)


def member_addresses(members: Sequence[str], hostvars: Any) -> dict[str, str]:
    """Each member's address as Ansible reaches it: ``ansible_host``, else its inventory name, with
    its ``ansible_port`` where it sets one (machines behind one SSH proxy, or Vagrant's, share an
    ``ansible_host`` and differ by port)."""
    out: dict[str, str] = {}
    for m in members:
        try:
            hv = hostvars[m]
            addr = hv["ansible_host"] if "ansible_host" in hv else m
            port = hv["ansible_port"] if "ansible_port" in hv else None
        except Exception:  # noqa: BLE001 - a value that does not template is that host's to report
            addr, port = m, None
        addr = str(addr).strip() or m
        # SSH's default port unset or written out is one port (22, Ansible's default)
        port = "" if port is None else str(port).strip()
        out[m] = addr if port in ("", "22") else f"{addr} port {port}"
    return out


def address_errors(group: Any, addresses: dict[str, str]) -> list[str]:
    """Two hosts of the group that are one machine: both would write the same unit there, and the
    group would be a node short."""
    seen: dict[str, list[str]] = {}
    for m, addr in addresses.items():
        seen.setdefault(addr, []).append(m)
    return [
        f"hosts {', '.join(ms)} of sglang_server_multinode_group={_fmt(group)} are one machine (ansible_host "
        f"{addr}): each node of the group must be a machine of its own"
        for addr, ms in seen.items()
        if len(ms) > 1
    ]


def _flag_int(extra: Any, names: tuple[str, ...]) -> Any:
    """The whole number `sglang_server_extra_flags` gives one of `names` (a flag and its aliases;
    a list's last item: sglang_flags.given_value); None when it gives none that reads as one."""
    return _int(given_value(extra, *names))


def _int(value: Any) -> Any:
    try:
        if isinstance(value, bool):
            return None
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


_PP_FLAGS = ("--pp-size", "--pipeline-parallel-size")  # one argument (srt/server_args.py, 0.5.9-0.5.23)
# `--dp` is argparse's unique prefix of `--dp-size` (SGLang's docs write `--dp 2`)
_DP_FLAGS = ("--dp-size", "--data-parallel-size", "--dp")
# 0.5.23's attention-DP width and its alias (arg_groups/fields/parallel.py)
_ATTN_DP_FLAGS = ("--attn-dp-size", "--attention-data-parallel-size")


def pp_size(extra: Any) -> int:
    """The pipeline-parallel size `sglang_server_extra_flags` gives (1 when it gives none, or none
    that reads as a whole number >= 1): a server runs tp_size x pp_size ranks, one per GPU, spread
    evenly over its nodes (engine.py `_calculate_rank_ranges`: pp_size // nnodes PP ranks of
    tp_size // max(nnodes // pp_size, 1) TP ranks on each)."""
    pp = _flag_int(extra, _PP_FLAGS)
    return pp if pp is not None and pp >= 1 else 1


def _placement(extra: Any, tp_size: Any, nnodes: Any) -> tuple[int, int, int, int]:
    """Where the server's ranks sit on one node: (ranks of one world on it, worlds, base GPU,
    step). A node holds its share of tp x pp ranks (engine.py `_calculate_rank_ranges`), times the
    data-parallel replicas when each is a whole TP group (`--dp-size` without DP attention: SGLang's
    DataParallelController.launch_dp_schedulers gives each replica the next tp x pp x gpu_id_step
    GPUs, data_parallel_controller.py 0.5.9-0.5.23; with `--enable-dp-attention`, or 0.5.23's
    `--attn-dp-size` above 1, the DP ranks live inside the TP group), placed from `--base-gpu-id`
    every `--gpu-id-step` GPUs (scheduler's gpu_id = base_gpu_id + rank x gpu_id_step)."""
    tp = _int(tp_size)
    n = _int(nnodes)
    ranks = max(max(tp or 1, 1) * pp_size(extra) // max(n or 1, 1), 1)
    dp = _flag_int(extra, _DP_FLAGS)
    attn_dp = _flag_int(extra, _ATTN_DP_FLAGS)
    dp_attention = extra_switch_on(extra, "enable-dp-attention") or (attn_dp is not None and attn_dp > 1)
    worlds = dp if dp is not None and dp > 1 and not dp_attention else 1
    base = _flag_int(extra, ("--base-gpu-id",))
    step = _flag_int(extra, ("--gpu-id-step",))
    base = base if base is not None and base >= 0 else 0
    step = step if step is not None and step >= 1 else 1
    return ranks, worlds, base, step


def gpu_worlds(extra: Any, tp_size: Any, nnodes: Any = 1) -> list[list[int]]:
    """The GPUs (CUDA's ordinals among the visible ones) of each world of the server on one node:
    one per data-parallel replica that is a whole TP group, else one (`_placement`)."""
    ranks, worlds, base, step = _placement(extra, tp_size, nnodes)
    return [[base + (w * ranks + i) * step for i in range(ranks)] for w in range(worlds)]


def gpus_per_node(extra: Any, tp_size: Any, nnodes: Any = 1) -> int:
    """The GPUs each node must have for the server's ranks (`_placement`): the highest GPU index
    used, plus one."""
    return max(g for world in gpu_worlds(extra, tp_size, nnodes) for g in world) + 1


# SGLang refuses to start a world (tp x pp ranks) with tp above 1 where one rank's free GPU memory
# is below 0.9 times another's: "The memory capacity is unbalanced. Some GPUs may be occupied by
# other processes." (srt/model_executor/model_runner.py init_torch_distributed, 0.5.9-0.5.23),
# unless SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK reads false (srt/environ.py EnvBool: false, 0, no,
# n, lower-cased). 0.5.9 copies the old SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK, when set, over it
# (`_print_deprecated_env`: "1" then turns the check on), and 0.5.23 reads the old name nowhere.
TP_MEMORY_BALANCE = 0.9
TP_MEMORY_CHECK_ENV = "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"
_TP_MEMORY_CHECK_OLD_ENV = "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK"


def tp_memory_check_off(environment: Any) -> bool:
    """Whether the server's environment turns SGLang's memory-balance check off, in every release
    that has it (the constants above)."""
    env = environment if isinstance(environment, dict) else {}
    if _TP_MEMORY_CHECK_OLD_ENV in env:
        return False
    value = env.get(TP_MEMORY_CHECK_ENV)
    return value is not None and str(value).lower() in ("false", "0", "no", "n")


def node_gpus(members: Sequence[str], hostvars: Any, fact: str = "cuda_env_visible_gpus") -> list[tuple[str, Any]]:
    """(host, its visible GPUs as cuda_env's facts give them, None where unread) of each member, in
    the order given (``hostvars``: Ansible's)."""
    out: list[tuple[str, Any]] = []
    for m in members:
        try:
            hv = hostvars[m]
            out.append((m, hv[fact] if fact in hv else None))
        except Exception:  # noqa: BLE001 - a host whose facts do not read is not compared
            out.append((m, None))
    return out


def tp_memory_errors(nodes: Any, extra: Any, tp_size: Any, nnodes: Any = 1, environment: Any = None) -> list[str]:
    """What SGLang's memory-balance check would refuse, before anything changes: each world
    (`gpu_worlds`: the same GPU ordinals on every node of a multi-node server) whose GPUs' total
    memory differs beyond TP_MEMORY_BALANCE over all the nodes (SGLang takes the minimum over the
    whole world group, every node's ranks). ``nodes``: (host, visible GPUs in CUDA's order, each
    with `memory_mib`, as cuda_env's facts give them) of each node, in rank order; one for a single
    host. Total memory stands in for the free memory SGLang compares at start; a world that needs
    more GPUs than a node has is cuda_env's preflight's to refuse, and a node whose GPUs were not
    read is not compared."""
    tp = _int(tp_size)
    if tp is None or tp <= 1 or tp_memory_check_off(environment):
        return []
    read = [(host, gpus) for host, gpus in nodes if isinstance(gpus, list)]
    several = len(read) > 1
    errors = []
    for world in gpu_worlds(extra, tp_size, nnodes):
        if not read or any(max(world) >= len(gpus) for _host, gpus in read):
            continue
        sizes = [
            (f"{host} {i}" if several else str(i), gpus[i])
            for host, gpus in read
            for i in world
            if isinstance(gpus[i], dict) and isinstance(gpus[i].get("memory_mib"), int)
        ]
        mib = [pair[1]["memory_mib"] for pair in sizes]
        if len(mib) < 2 or min(mib) >= TP_MEMORY_BALANCE * max(mib):
            continue
        listed = ", ".join(f"{where}: {g.get('name', 'GPU')} {g['memory_mib']} MiB" for where, g in sizes)
        errors.append(
            f"the GPUs of one tensor-parallel world differ in memory ({listed}): SGLang refuses to start when one "
            f"GPU's free memory is below {TP_MEMORY_BALANCE:g} times another's, over every node of the world "
            '("The memory capacity is unbalanced"); allowed: GPUs of one size in each world (--base-gpu-id in '
            "sglang_server_extra_flags, or CUDA_VISIBLE_DEVICES in cuda_env_cuda_env, picks them), or "
            f"{TP_MEMORY_CHECK_ENV}=false in sglang_server_environment, which runs every rank in the smallest "
            "GPU's memory"
        )
    return errors


def group_errors(group: Any, members: Sequence[str], head: Any, settings: dict[str, dict[str, Any]]) -> list[str]:
    """What keeps the hosts of ``group`` from forming one server; empty when nothing does.

    ``settings`` maps each member to its values of SAME_ON_EVERY_NODE (the play reads them from
    hostvars, falling back to this host's value where a host sets none).
    """
    errors: list[str] = []
    if not group or not members or len(members) < 2:
        return errors
    hosts = list(members)
    h = str(head).strip() if head is not None else ""
    if h and h not in hosts:
        errors.append(
            f"sglang_server_multinode_head={_fmt(h)} is not a host of sglang_server_multinode_group={_fmt(group)} "
            f"(its hosts: {', '.join(hosts)}): rank 0 must be one of the nodes"
        )
    for var, why in SAME_ON_EVERY_NODE:
        values = {m: (settings.get(m) or {}).get(var) for m in hosts}
        if var in ("sglang_server_tp_size", "sglang_server_gpus_per_node", "sglang_server_dist_init_port"):
            values = {m: (_int(v) if _int(v) is not None else v) for m, v in values.items()}
        elif var == "sglang_server_multinode_head":
            values = {m: (str(v).strip() if v else "") for m, v in values.items()}
        elif var in _SERVER_ARGS:
            values = {m: _same_form(v) for m, v in values.items()}
        if len({_fmt(v) for v in values.values()}) > 1:
            shown = ", ".join(f"{m}={_fmt(v)}" for m, v in values.items())
            errors.append(
                f"{var} differs across the hosts of sglang_server_multinode_group={_fmt(group)} ({shown}): {why}"
            )
    first = settings.get(hosts[0]) or {}
    tp = _int(first.get("sglang_server_tp_size"))
    gpus = _int(first.get("sglang_server_gpus_per_node"))
    pp = pp_size(first.get("sglang_server_extra_flags"))
    n = len(hosts)
    # SGLang checks (tp_size x pp_size) % nnodes == 0 (server_args.py); without pipeline stages that
    # is the TP ranks split evenly over the nodes
    with_pp = f" x pp-size {pp}" if pp > 1 else ""
    # replicas across nodes are refused as such, not counted as GPUs the nodes lack
    replicas = _replica_errors(first.get("sglang_server_extra_flags"), group, n)
    if tp is not None and (tp * pp) % n != 0:
        errors.append(
            f"sglang_server_tp_size={tp}{with_pp} is not divisible by the {n} nodes of sglang_server_multinode_group="
            f"{_fmt(group)}: SGLang splits the {'ranks' if pp > 1 else 'TP ranks'} evenly over the nodes"
        )
    elif (
        not replicas
        and tp is not None
        and gpus is not None
        and gpus != (need := gpus_per_node(first.get("sglang_server_extra_flags"), tp, n))
    ):
        placed = "" if need * n == tp * pp else f" (placed by --base-gpu-id / --gpu-id-step: {need} per node)"
        errors.append(
            f"sglang_server_gpus_per_node={gpus} x {n} nodes of sglang_server_multinode_group={_fmt(group)} "
            f"is not sglang_server_tp_size={tp}{with_pp}: each node runs "
            f"{'tp_size x pp_size' if pp > 1 else 'tp_size'} / nnodes ranks, one per GPU{placed}"
        )
    return errors + replicas


def _replica_errors(extra: Any, group: Any, n: int) -> list[str]:
    """Data-parallel replicas across nodes: SGLang refuses a multi-node server whose `--dp-size` is
    above 1 unless DP attention turns those ranks into attention groups inside the TP group
    (server_args.py check_server_args 0.4.10-0.5.16, arg_groups/validation_hook.py 0.5.20-0.5.21:
    "multi-node data parallel is not supported unless dp attention!"; 0.5.23 validation_hook.py,
    where `--dp-size` counts replicas and the deprecated `--dp-size N --enable-dp-attention` becomes
    `--attn-dp-size N` only when no `--attn-dp-size` is given: "multi-node data-parallel replicas
    are not supported; use attention DP (--attn-dp-size) across nodes"). Every rank would start
    and die on that assertion, so the group is refused before any host changes."""
    dp = _flag_int(extra, _DP_FLAGS)
    if dp is None or dp <= 1:
        return []
    attn_dp = _flag_int(extra, _ATTN_DP_FLAGS)
    if extra_switch_on(extra, "enable-dp-attention") and (attn_dp is None or attn_dp <= 1):
        return []
    return [
        f"sglang_server_extra_flags' dp-size {dp} across the {n} nodes of sglang_server_multinode_group="
        f'{_fmt(group)}: SGLang runs data-parallel replicas on one node only ("multi-node data parallel is not '
        'supported unless dp attention!"; 0.5.23: "multi-node data-parallel replicas are not supported"); use DP '
        "attention (enable-dp-attention with dp-size, or attn-dp-size alone on 0.5.23) or a server per node"
    ]
