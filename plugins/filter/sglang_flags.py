"""The sglang_server role's filters (sglang_tune.serving.<name>): a thin entry point over the
rules in plugins/module_utils (sglang_spec, sglang_checks, sglang_flags), which the tuner imports
too (as `sglang_utils`), so the rules the deploy play validates with are the ones the tuner plans
with. The tests call the rules there directly (tests/roles/test_sglang_flags_filter.py).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang_tune.serving.plugins.module_utils import sglang_multinode, sglang_releases
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_checks import host_errors
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_flags import (
    config_api_key,
    decode_graph_bs,
    engine_module,
    gate_url,
    node_settings,
    referenced_paths,
    restored_gate,
    secret_config,
    server_errors,
    server_flags,
    systemd_env_assign,
    systemd_exec_quote,
)
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_spec import schedule_settings, spec_settings


def multinode_errors(group: Any, members: Any, head: Any, hostvars: Any, own: Any) -> list[str]:
    """The group-wide rules of a multi-node server (plugins/module_utils/sglang_multinode.py)."""
    hosts = list(members or [])
    settings = sglang_multinode.member_settings(hosts, hostvars, dict(own or {}))
    errors = list(sglang_multinode.group_errors(group, hosts, head, settings))
    if len(hosts) > 1:
        errors += sglang_multinode.address_errors(group, sglang_multinode.member_addresses(hosts, hostvars))
    return errors


def multinode_verdict(members: Any, group: Any, hostvars: Any, restored: Any = False) -> dict[str, Any]:
    """The gate verdict of a multi-node server's ranks (plugins/module_utils/sglang_multinode.py);
    `restored`: in the ranks of the restored units (the rollback's gate)."""
    return dict(sglang_multinode.group_verdict(group, list(members or []), hostvars, bool(restored)))


def gpus_per_node(extra: Any, tp_size: Any, nnodes: Any = 1) -> int:
    """The GPUs each node must have for the server's ranks (plugins/module_utils/sglang_multinode.py)."""
    return sglang_multinode.gpus_per_node(extra, tp_size, nnodes)


def tp_memory_errors(
    members: Any, hostvars: Any, extra: Any, tp_size: Any, nnodes: Any = 1, environment: Any = None
) -> list[str]:
    """What SGLang's memory-balance check would refuse over the server's nodes, `members` in rank
    order, each one's GPUs from cuda_env's facts in `hostvars` (plugins/module_utils/sglang_multinode.py)."""
    nodes = sglang_multinode.node_gpus(list(members or []), hostvars)
    return sglang_multinode.tp_memory_errors(nodes, extra, tp_size, nnodes, environment)


def pp_size(extra: Any) -> int:
    """The pipeline-parallel size sglang_server_extra_flags gives, 1 without (plugins/module_utils/sglang_multinode.py)."""
    return sglang_multinode.pp_size(extra)


def install_errors(version: Any, python_version: Any = None, driver_cuda: Any = None) -> list[str]:
    """What keeps an SGLang release from installing or running on this host (plugins/module_utils/sglang_releases.py)."""
    return sglang_releases.install_errors(version, python_version, driver_cuda)


def multinode_order(members: Any, head: Any = "") -> list[str]:
    """The group's hosts in node-rank order (plugins/module_utils/sglang_multinode.py)."""
    return list(sglang_multinode.rank_order(list(members or []), head))


class FilterModule:
    """Ansible entry point: the filters the sglang_server role uses."""

    def filters(self) -> dict[str, Any]:
        return {
            "sglang_spec": spec_settings,
            "sglang_schedule": schedule_settings,
            "sglang_node": node_settings,
            "sglang_multinode_errors": multinode_errors,
            "sglang_multinode_order": multinode_order,
            "sglang_multinode_verdict": multinode_verdict,
            "sglang_pp_size": pp_size,
            "sglang_gpus_per_node": gpus_per_node,
            "sglang_tp_memory_errors": tp_memory_errors,
            "sglang_decode_graph_bs": decode_graph_bs,
            "sglang_install_errors": install_errors,
            "sglang_server_errors": server_errors,
            "sglang_server_host_errors": host_errors,
            "sglang_flags": server_flags,
            "sglang_secret_config": secret_config,
            "sglang_engine_module": engine_module,
            "sglang_server_paths": referenced_paths,
            "sglang_gate_url": gate_url,
            "sglang_restored_gate": restored_gate,
            "sglang_config_api_key": config_api_key,
            "systemd_exec_quote": systemd_exec_quote,
            "systemd_env_assign": systemd_env_assign,
        }
