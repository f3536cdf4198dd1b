"""What the deploy play refuses of a configuration for the hosts it would land on.

Beside the spec_* rules (tuner/spec/configs.py `plan_configs`), the role refuses a speculative
config for the host's other settings before any host changes: an algorithm the SGLang release lacks,
UNO without its adapter or above TP 1, LoRA beside speculation by release, a schedule SGLang would run
static (plugins/module_utils/sglang_flags.py `spec_host_errors`). Refused on every slot, every
deployment of it fails in the play's preflight; the plan sets it aside with the play's own words
instead. The settings are the ones the play would see on each node: the sweep's -e over the
inventory's (untemplated) host variables over the role's defaults; a node whose value is a template
is the play's to judge (the tuner does not render it), so it is never counted as refusing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml
from sglang_utils.sglang_flags import spec_host_errors
from sglang_utils.sglang_spec import schedule_settings, spec_settings


class Deployable(Protocol):
    """A configuration (tuner/spec/configs.py SpecConfig): the play variables it is deployed with."""

    def extravars(self) -> dict[str, Any]: ...


# The role's defaults, where a host sets nothing (the play reads the same file).
ROLE_DEFAULTS = Path("roles") / "sglang_server" / "defaults" / "main.yml"
# The host variables the play builds `spec`, `schedule` and the host rules' settings from
# (roles/sglang_server/vars/main.yml `_sglang_server_spec`, `_sglang_server_schedule`,
# `_sglang_server_settings`).
NODE_VARS = (
    "sglang_server_engine",
    "sglang_server_sglang_version",
    "sglang_server_extra_flags",
    "sglang_server_tp_size",
    "sglang_server_spec_steps_default",
    "sglang_server_spec_algorithm_default",
    "sglang_server_spec_max_steps",
    "sglang_server_spec_max_topk",
    "sglang_server_spec_draft_model_path",
)

# One slot's nodes (a host, or a multi-node group's hosts), each node's NODE_VARS or None where
# one of them is a template or unknown.
Slots = Sequence[Sequence[Mapping[str, Any] | None]]


def role_defaults(project: Path) -> dict[str, Any]:
    """NODE_VARS as roles/sglang_server/defaults/main.yml sets them (empty where the project's role
    is not there: an installed tuner without it judges nothing the hosts leave unset)."""
    try:
        doc = yaml.safe_load((Path(project) / ROLE_DEFAULTS).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return {k: doc[k] for k in NODE_VARS if k in doc} if isinstance(doc, dict) else {}


def templated(value: Any) -> bool:
    """A value the play renders with Jinja (anywhere inside it), which the tuner does not."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(templated(k) or templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(templated(v) for v in value)
    return False


def node_refusals(cfg: Deployable, node: Mapping[str, Any]) -> list[str]:
    """The play's refusals of `cfg` on one node, in its words: `spec` and `schedule` built as
    roles/sglang_server/vars/main.yml builds them (the configuration's spec_* over the node's
    defaults), then the role's host rules."""
    v = {**node, **cfg.extravars()}
    algorithm = v.get("spec_algorithm", v["sglang_server_spec_algorithm_default"])
    spec = spec_settings(
        v.get("spec_steps", v["sglang_server_spec_steps_default"]),
        v.get("spec_topk"),
        v.get("spec_draft_tokens"),
        algorithm,
        v["sglang_server_spec_max_steps"],
        v["sglang_server_spec_max_topk"],
        v["sglang_server_spec_draft_model_path"],
    )
    schedule = schedule_settings(
        v.get("spec_schedule"),
        v.get("spec_steps"),
        v.get("spec_topk"),
        v.get("spec_draft_tokens"),
        algorithm,
        v["sglang_server_sglang_version"],
        v["sglang_server_spec_max_steps"],
        v["sglang_server_spec_draft_model_path"],
    )
    settings = {
        "engine": v["sglang_server_engine"],
        "sglang_version": v["sglang_server_sglang_version"],
        "extra_flags": v["sglang_server_extra_flags"],
        "tp_size": v["sglang_server_tp_size"],
        "spec": spec,
        "schedule": schedule,
    }
    return spec_host_errors(settings)


def refused_everywhere(cfg: Deployable, slots: Slots) -> str | None:
    """The play's reason when every slot refuses `cfg` (a multi-node slot refuses when any of its
    nodes does: the group is one server), None when some slot may run it or none is known. Each
    distinct reason once, in slot order."""
    reasons: list[str] = []
    for nodes in slots:
        found = next((errs for node in nodes if node is not None and (errs := node_refusals(cfg, node))), None)
        if not found:
            return None
        reasons += [r for r in found if r not in reasons]
    return "; ".join(reasons) or None
