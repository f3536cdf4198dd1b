"""The sglang_server role's filters (sglang_tune.serving.<name>): a thin entry point over the
rules in plugins/module_utils (sglang_spec, sglang_checks, sglang_flags), which the tuner imports
too (as `sglang_utils`), so the rules the deploy play validates with are the ones the tuner plans
with. The tests call the rules there directly (tests/roles/test_sglang_flags_filter.py).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_checks import host_errors
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_flags import (
    engine_module,
    node_settings,
    secret_config,
    server_errors,
    server_flags,
    systemd_env_assign,
    systemd_exec_quote,
)
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_spec import schedule_settings, spec_settings


class FilterModule:
    """Ansible entry point: the filters the sglang_server role uses."""

    def filters(self) -> dict[str, Any]:
        return {
            "sglang_spec": spec_settings,
            "sglang_schedule": schedule_settings,
            "sglang_node": node_settings,
            "sglang_server_errors": server_errors,
            "sglang_server_host_errors": host_errors,
            "sglang_flags": server_flags,
            "sglang_secret_config": secret_config,
            "sglang_engine_module": engine_module,
            "systemd_exec_quote": systemd_exec_quote,
            "systemd_env_assign": systemd_env_assign,
        }
