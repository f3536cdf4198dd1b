"""The role's controller-side check of `sglang_server_verify_baseline` (docs/tuner.md "Verify").

`verify_outputs` compares a deployment's greedy outputs with a stored baseline file. Before any
host is touched the role checks that the file is there and is a baseline that carries its prompts
(plugins/module_utils/sglang_verify.py `baseline_problems`, the rule the tuner reads it by), so a
typo or a wrong file fails with a message naming the variable, not after the server restarted.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from typing import Any


def _rules() -> Any:
    for qualified in (
        "ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_verify",
        "sglang_utils.sglang_verify",
    ):
        try:
            return importlib.import_module(qualified)
        except ImportError:
            continue
    key = "_sglang_tune_module_utils_sglang_verify"
    if key in sys.modules:
        return sys.modules[key]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(key, os.path.join(here, "module_utils", "sglang_verify.py"))
    if spec is None or spec.loader is None:
        raise ImportError("cannot load sglang_verify")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


VAR = "sglang_server_verify_baseline"


def baseline_errors(path: Any, enabled: Any = True) -> list[str]:
    """Problems with the baseline file at `path` (empty when usable, or when the check is off)."""
    if not enabled or str(enabled).strip().lower() in ("false", "no", "0", "off"):
        return []
    text = "" if path is None else str(path).strip()
    if not text:
        return [f"{VAR} is empty: verify_outputs needs the baseline file (python -m tuner verify --capture writes one)"]
    if not os.path.isfile(text):
        return [f"{VAR}={text}: no such file on the controller"]
    try:
        with open(text, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [f"{VAR}={text}: not a readable JSON baseline ({exc})"]
    problems = list(_rules().baseline_problems(doc))
    if not problems and not all(isinstance(r.get("prompt"), str) for r in doc["short"] + doc["long"]):
        problems = ["its outputs do not carry their prompts (write it with python -m tuner verify --capture)"]
    return [f"{VAR}={text}: not a baseline file: {p}" for p in problems[:4]]


class FilterModule:
    """Ansible filters (prefixed: the filter namespace is shared with other plugins)."""

    def filters(self) -> dict[str, Any]:
        return {"sglang_verify_baseline_errors": baseline_errors}
