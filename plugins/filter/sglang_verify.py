"""The role's controller-side check of `sglang_server_verify_baseline` (docs/tuner.md "Verify").

`verify_outputs` compares a deployment's greedy outputs with a stored baseline file. Before any
host is touched the role checks that the file is there and is a baseline that carries its prompts
(plugins/module_utils/sglang_verify.py `baseline_file_errors`, by the rule the tuner reads it by),
so a typo or a wrong file fails with a message naming the variable, not after the server restarted.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_verify import baseline_file_errors


class FilterModule:
    """Ansible filters (prefixed: the filter namespace is shared with other plugins)."""

    def filters(self) -> dict[str, Any]:
        return {"sglang_verify_baseline_errors": baseline_file_errors}
