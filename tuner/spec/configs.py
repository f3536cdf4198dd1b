"""The configurations a sweep deploys: what one is, its id, its play variables, and the plan.

A configuration is what needs a server restart to change (speculative depth, tree width, draft
tokens, algorithm). What a benchmark sends to a running server (concurrency, temperature, prompts)
is the workload (tuner/spec/sweepspec.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sglang_utils.sglang_adaptive import (
    default_launch_steps,
    launch_steps,
    load_per_bs,
    schedule_config,
    schedule_id,
    schedule_label,
)
from sglang_utils.sglang_spec import DEFAULT_MAX_STEPS, DEFAULT_MAX_TOPK, TOPK1_RULE_ALGORITHMS, spec_settings

from .refusals import Slots, refused_everywhere

if TYPE_CHECKING:
    from .sweepspec import SweepSpec

# The algorithms whose chain verifies steps + 1 tokens whatever is given or unset: a window of
# steps + 1 is the same configuration as none (sglang_spec: the EAGLE family's rule, NGRAM's default)
_STEPS_PLUS_ONE = (*TOPK1_RULE_ALGORITHMS, "NGRAM")


@dataclass(frozen=True)
class SpecConfig:
    """One speculative-decoding configuration the sweep deploys."""

    spec_steps: int
    spec_topk: int = 1
    spec_draft_tokens: int | None = None
    spec_algorithm: str = "NEXTN"
    # A per-batch-size schedule (SGLang's --speculative-adaptive, tuner/decide/schedule.py): batch-size
    # lower bound -> steps. `adaptive` without buckets is SGLang's own default adaptive config.
    # spec_steps then holds the steps the server starts with (sglang_adaptive.launch_steps, the
    # role's own rule; SGLang's middle candidate for its default config).
    schedule: tuple[tuple[int, int], ...] | None = None
    adaptive: bool = False
    # A tuned adaptive config with candidate ladders or hysteresis (tuner/decide/adaptive_search.py):
    # SGLang's per-batch-size JSON, canonical text. spec_steps then holds the role's launch depth.
    ladder: str | None = None

    @property
    def is_schedule(self) -> bool:
        """Adaptive (a schedule, a tuned ladder config or SGLang's default): measured after the static
        sweep, never on its steps axis, early stop or search."""
        return self.adaptive or self.schedule is not None or self.ladder is not None

    @property
    def schedule_value(self) -> str | None:
        """The `spec_schedule` play variable: SGLang's JSON of the buckets, or `default`."""
        if self.ladder is not None:
            return self.ladder
        if self.schedule is not None:
            return json.dumps(schedule_config(dict(self.schedule)))
        return "default" if self.adaptive else None

    def adaptive_document(self) -> dict[str, Any] | None:
        """SGLang's adaptive config this configuration runs (the built-in table for SGLang's
        default), or None for a static depth."""
        if self.ladder is not None:
            return dict(json.loads(self.ladder))
        if self.schedule is not None:
            return schedule_config(dict(self.schedule))
        if self.adaptive:
            default: dict[str, Any] = load_per_bs(None)[0]
            return default
        return None

    @property
    def config_id(self) -> str:
        """A stable, file-name-safe id (`k3-t1`, `k4-t2-d8`, `k0` = no speculation, `sched-1k4-16k3`
        for a schedule, `adaptive-default` for SGLang's default adaptive config)."""
        if self.ladder is not None:
            return ladder_id(json.loads(self.ladder))
        if self.schedule is not None:
            return schedule_id(self.schedule)
        if self.adaptive:
            return "adaptive-default"
        if self.spec_steps == 0:
            return "k0"
        cid = f"k{self.spec_steps}-t{self.spec_topk}"
        if self.spec_draft_tokens is not None:
            cid += f"-d{self.spec_draft_tokens}"
        if self.spec_algorithm.upper() != "NEXTN":
            cid += "-" + re.sub(r"[^A-Za-z0-9]+", "", self.spec_algorithm).lower()
        return cid

    @property
    def series(self) -> tuple[int, int | None, str]:
        """Configurations that differ only in steps form one series (early stop runs along it);
        each adaptive configuration is a series of its own."""
        if self.is_schedule:
            return (self.spec_topk, self.spec_draft_tokens, f"{self.spec_algorithm}/{self.config_id}")
        return (self.spec_topk, self.spec_draft_tokens, self.spec_algorithm)

    @property
    def order_key(self) -> tuple[int, int, int, str]:
        """Smaller is cheaper: fewer steps, then a narrower tree, then fewer draft tokens."""
        return (self.spec_steps, self.spec_topk, self.spec_draft_tokens or 0, self.config_id)

    @property
    def label(self) -> str:
        """How progress lines and reports name it: `k=3`, `k=4 topk=2 draft=8`, `schedule B>=1:
        k=4, B>=16: k=3`, `SGLang default adaptive`."""
        if self.ladder is not None:
            return "adaptive " + ladder_label(json.loads(self.ladder))
        if self.schedule is not None:
            return "schedule " + schedule_label(self.schedule)
        if self.adaptive:
            return "SGLang default adaptive"
        if self.spec_steps == 0:
            return "k=0 (no speculation)"
        s = f"k={self.spec_steps}"
        if self.spec_topk != 1:
            s += f" topk={self.spec_topk}"
        if self.spec_draft_tokens is not None:
            s += f" draft={self.spec_draft_tokens}"
        return s

    def extravars(self) -> dict[str, Any]:
        """The play-level variables; draft tokens only when the user gave them; `spec_schedule`
        for an adaptive configuration (the role passes --speculative-adaptive and picks the
        starting steps itself; a tuned ladder names its launch depth, one of its candidates, which
        may be shallower than the role's own rule where that depth could not start)."""
        if self.is_schedule:
            sched: dict[str, Any] = {
                "spec_schedule": self.schedule_value,
                "spec_topk": 1,
                "spec_algorithm": self.spec_algorithm,
            }
            if self.ladder is not None:
                sched["spec_steps"] = self.spec_steps
            return sched
        out: dict[str, Any] = {
            "spec_steps": self.spec_steps,
            "spec_topk": self.spec_topk,
            "spec_algorithm": self.spec_algorithm,
        }
        if self.spec_draft_tokens is not None:
            out["spec_draft_tokens"] = self.spec_draft_tokens
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "spec_steps": self.spec_steps,
            "spec_topk": self.spec_topk,
            "spec_draft_tokens": self.spec_draft_tokens,
            "spec_algorithm": self.spec_algorithm,
            **({"spec_schedule": self.schedule_value} if self.is_schedule else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SpecConfig:
        draft = d.get("spec_draft_tokens")
        sched = d.get("spec_schedule")
        buckets = None
        ladder = None
        if isinstance(sched, str) and sched not in ("", "default"):
            doc = json.loads(sched)
            # a pinned schedule named no launch depth of its own unless it differs from the role's rule
            if _pinned(doc) and int(d.get("spec_steps") or 0) in (0, launch_steps(doc)):
                buckets = tuple(sorted((int(b), int(e["candidate_steps"][0])) for b, e in doc.items()))
            else:
                ladder = json.dumps(doc)
        # A schedule starts at its launch depth whatever an older record says (they held the
        # high-load bucket's steps, which the server does not start at when that bucket is 0).
        steps = launch_steps(schedule_config(dict(buckets))) if buckets else int(d.get("spec_steps") or 0)
        return cls(
            steps,
            int(d.get("spec_topk") or 1),
            None if draft in (None, "") else int(draft),
            str(d.get("spec_algorithm") or "NEXTN"),
            schedule=buckets,
            adaptive=sched == "default",
            ladder=ladder,
        )

    @classmethod
    def for_adaptive(cls, doc: Mapping[str, Any], algorithm: str, launch: int) -> SpecConfig:
        """A tuned adaptive config (SGLang's per-batch-size JSON, buckets in increasing order): a
        plain schedule when every bucket pins one depth with SGLang's own hysteresis, else a ladder
        config; `launch` is the role's launch depth (`schedule_launch_steps`)."""
        entries = {str(k): dict(v) for k, v in sorted(doc.items(), key=lambda kv: int(kv[0]))}
        if _pinned(entries) and int(launch) == launch_steps(entries):
            return cls.for_schedule(
                tuple((int(b), int(e["candidate_steps"][0])) for b, e in entries.items()), algorithm
            )
        # a ladder, or a pinned schedule launched elsewhere than the role's rule: it names its depth
        return cls(int(launch), 1, None, algorithm, ladder=json.dumps(entries))

    @classmethod
    def for_schedule(cls, buckets: tuple[tuple[int, int], ...], algorithm: str = "NEXTN") -> SpecConfig:
        """The configuration that deploys a schedule; it starts at the depth the role launches it
        with (plugins/module_utils/sglang_adaptive.py launch_steps: the high-load bucket's, or the
        smallest drafting depth when that bucket does not draft)."""
        return cls(launch_steps(schedule_config(dict(buckets))), 1, None, algorithm, schedule=buckets)

    @classmethod
    def default_adaptive(cls, algorithm: str = "NEXTN") -> SpecConfig:
        """SGLang's default adaptive config (no file); it starts at the middle of its candidates'
        union (0.5.23 speculative_hook.py `_init_adaptive_speculative_params`)."""
        return cls(default_launch_steps(load_per_bs(None)[1]), 1, None, algorithm, adaptive=True)


def _pinned(doc: Mapping[str, Any]) -> bool:
    """One candidate per bucket and SGLang's own hysteresis: a plain per-batch-size schedule."""
    return all(
        isinstance(e, dict) and list(e) == ["candidate_steps"] and len(e["candidate_steps"]) == 1 for e in doc.values()
    )


def ladder_id(doc: Mapping[str, Any]) -> str:
    """`adapt-1k5.7.9-8k3-18k2` (bucket bound, `k`, its candidates joined by dots), with `-h` and
    a short digest of the JSON when some bucket sets hysteresis: file-name safe and stable."""
    parts = []
    hyst = False
    for b, e in sorted(doc.items(), key=lambda kv: int(kv[0])):
        parts.append(f"{int(b)}k" + ".".join(str(int(s)) for s in e["candidate_steps"]))
        hyst = hyst or any(k != "candidate_steps" for k in e)
    cid = "adapt-" + "-".join(parts)
    if hyst:
        cid += "-h" + hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:6]
    return cid


def ladder_label(doc: Mapping[str, Any]) -> str:
    """`B>=1: [5, 7, 9] (up 0.3), B>=8: k=3`."""
    out = []
    for b, e in sorted(doc.items(), key=lambda kv: int(kv[0])):
        steps = e["candidate_steps"]
        s = f"B>={int(b)}: " + (f"k={steps[0]}" if len(steps) == 1 else str(list(steps)))
        extra = [f"{k.split('_')[0]} {v:g}" for k, v in e.items() if k.endswith("_hysteresis")]
        if extra:
            s += " (hysteresis " + ", ".join(extra) + ")"
        out.append(s)
    return ", ".join(out)


@dataclass
class ConfigPlan:
    configs: list[SpecConfig] = field(default_factory=list)
    infeasible: list[tuple[SpecConfig, str]] = field(default_factory=list)
    # what the play sees on each slot's nodes, in the sweep's hosts' order (tuner/spec/refusals.py;
    # empty: not known, nothing judged)
    nodes: Slots = ()

    def refusal(self, cfg: SpecConfig) -> str | None:
        """The play's reason when the role refuses `cfg` on every slot for the hosts' settings (the
        schedule phase asks this of an adaptive configuration before it deploys one)."""
        return refused_everywhere(cfg, self.nodes)

    def slot_refusal(self, cfg: SpecConfig, slot: int) -> str | None:
        """The play's reason when the role refuses `cfg` on the `slot`-th slot alone (the same rule,
        over that one slot): a configuration another slot runs stays planned, and the sweep keeps it
        off this one (tuner/run/planner.py `Planner.refusal`). None where nothing is known of it."""
        return refused_everywhere(cfg, self.nodes[slot : slot + 1])

    def set_aside_refused(self) -> None:
        """Move the configurations every slot's play would refuse to `infeasible`, with its reason,
        ahead of the spec rules' refusals: with nothing left to run, the host setting that refused
        every configuration the spec rules let through is the one to change (cli.py names the first)."""
        kept, refused = [], []
        for cfg in self.configs:
            why = self.refusal(cfg)
            if why is None:
                kept.append(cfg)
            else:
                refused.append((cfg, why))
        self.configs, self.infeasible = kept, refused + self.infeasible


# What the deploy play checks a configuration against besides its own spec_* values: the spec
# limits (with the role's defaults, roles/sglang_server/defaults/main.yml, as sglang_spec's) and
# the draft model path (run/inventory.py `plan_vars` reads the hosts' values).
PLAN_LIMITS = {"sglang_server_spec_max_steps": DEFAULT_MAX_STEPS, "sglang_server_spec_max_topk": DEFAULT_MAX_TOPK}
DRAFT_PATH_VAR = "sglang_server_spec_draft_model_path"
PLAN_PATHS = (DRAFT_PATH_VAR,)


def plan_configs(
    steps: tuple[int, ...],
    topks: tuple[int, ...],
    drafts: tuple[int | None, ...],
    algorithm: str = "NEXTN",
    play_vars: Mapping[str, Any] | None = None,
    draft_path_unknown: bool = False,
) -> ConfigPlan:
    """The configurations to sweep, ascending in steps within each (topk, draft) series.

    Combinations the deploy play would refuse are set aside with the play's own reason instead of
    deployed: the rule is plugins/module_utils/sglang_spec.py's `spec_settings`, the one the play
    validates spec_* with (a chain verifies steps + 1 tokens; a tree at most
    topk + (steps - 1) x topk^2 + 1 and needs explicit draft tokens). `play_vars` are the values of
    PLAN_LIMITS and PLAN_PATHS the play would see (the inventory's, under the user's -e). `draft_path_unknown`: the
    inventory was not read (a report rebuilt from sweep.json), so a draft model path -e does not give
    is not held against the plan (the sweep itself checked it against the inventory).
    """
    pv = dict(play_vars or {})
    if draft_path_unknown and not pv.get(DRAFT_PATH_VAR):
        pv[DRAFT_PATH_VAR] = "(the inventory's)"
    limits = {
        name: pv[var]
        for name, var in (
            ("max_steps", "sglang_server_spec_max_steps"),
            ("max_topk", "sglang_server_spec_max_topk"),
            ("draft_model_path", "sglang_server_spec_draft_model_path"),
        )
        if var in pv
    }
    plan = ConfigPlan()
    seen: set[str] = set()
    for topk in topks:
        for draft in drafts:
            for k in steps:
                # a chain's draft tokens are steps + 1 whether given or not: one configuration, not two
                # (the EAGLE family's rule, and NGRAM's default; DFLASH, DSPARK and UNO take the window given)
                d = None if topk == 1 and draft == k + 1 and algorithm.strip().upper() in _STEPS_PLUS_ONE else draft
                cfg = SpecConfig(0, 1, None, algorithm) if k == 0 else SpecConfig(k, topk, d, algorithm)
                if cfg.config_id in seen:
                    continue
                seen.add(cfg.config_id)
                if k > 0:
                    errors = spec_settings(k, topk, d, algorithm, **limits)["errors"]
                    if errors:
                        plan.infeasible.append((cfg, "; ".join(errors)))
                        continue
                plan.configs.append(cfg)
    # Steps 0 (the baseline) first, then each series ascending in steps.
    plan.configs.sort(key=lambda c: (c.spec_steps != 0, c.series[0], c.series[1] or 0, c.spec_steps))
    return plan


# The flag that sets each variable the play's rules name (plugins/module_utils/sglang_spec.py
# `spec_settings`), so that a plan with nothing left to run names the flag to change.
# A limit of the play's own (sglang_server_spec_max_*) is named as the variable: it comes from -e or
# the inventory, which the caller tells apart.
_RULE_FLAGS = (
    ("sglang_server_spec_draft_model_path", "--algorithm"),  # the algorithm needs a draft model
    ("sglang_server_spec_max_topk", "sglang_server_spec_max_topk"),
    ("sglang_server_spec_max_steps", "sglang_server_spec_max_steps"),
    ("spec_draft_tokens", "--draft-tokens"),
    ("spec_topk", "--topk"),
    ("spec_algorithm", "--algorithm"),
    ("speculative_num_steps", "--steps"),
    ("spec_steps", "--steps"),
    # the host's settings the role judges the configuration against (tuner/spec/refusals.py)
    ("sglang_server_extra_flags", "sglang_server_extra_flags"),
    ("sglang_server_sglang_version", "sglang_server_sglang_version"),
    ("sglang_server_tp_size", "sglang_server_tp_size"),
)


def infeasible_flag(reason: str) -> str:
    """The flag whose value the play's first complaint in `reason` is about (`--steps` when it
    names none): the variable the message names first, longer names before the ones inside them;
    a play variable's own name where no flag sets it."""
    found = [(reason.find(var), -len(var), flag) for var, flag in _RULE_FLAGS if var in reason]
    return min(found)[2] if found else "--steps"


def spec_plan(spec: SweepSpec, inventory_vars: Mapping[str, Any] | None = None, nodes: Slots = ()) -> ConfigPlan:
    """The plan of a sweep's own flags (--steps, --topk, --draft-tokens, --algorithm, -e): what the
    CLI sweeps (`inventory_vars`: what its hosts set of PLAN_LIMITS and PLAN_PATHS, run/inventory.py `plan_vars`; -e
    wins, as in the play), the report counts as planned and the replay walks (without the inventory).
    `nodes`: what each slot's play sees of the host settings (run/inventory.py `slot_nodes`); a
    configuration every slot's role refuses for them is set aside too (the replay reads those from
    the sweep's skip records)."""
    play_vars = {**(inventory_vars or {}), **spec.extra_vars}
    plan = plan_configs(
        spec.steps,
        spec.topk,
        spec.draft_tokens,
        spec.algorithm,
        play_vars=play_vars,
        draft_path_unknown=inventory_vars is None,
    )
    plan.nodes = nodes
    plan.set_aside_refused()
    return plan
