"""Parsing and validation of the tuner's flag values (pure: no I/O except `stat`-like checks).

Every check raises `BadInput(flag, message)`; the CLI turns it into exit status 2 with a message
that names the flag (design.md, "The tuner"), before any host is touched.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sglang_filters.sglang_flags import spec_settings

# Play-level variables the sweep itself sets (design.md, "Play-level variables"); a user's -e may
# not override them, or every configuration of the sweep would silently deploy the same thing.
SWEEP_OWNED_VARS = ("spec_steps", "spec_topk", "spec_draft_tokens", "spec_algorithm")

ENDPOINTS = ("generate", "chat", "completions")


class BadInput(ValueError):
    """A flag value the tuner refuses; `flag` is what the user typed (e.g. `--steps`)."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag
        self.message = message


def _int(flag: str, text: str, *, minimum: int | None = None) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?\d+", t):
        raise BadInput(flag, f"{text!r} is not a whole number")
    value = int(t)
    if minimum is not None and value < minimum:
        raise BadInput(flag, f"{value} is below the minimum {minimum}")
    return value


def parse_int_list(flag: str, text: str | None, *, minimum: int = 0, allow_ranges: bool = True) -> list[int]:
    """`1-5`, `1,2,4`, `1-3,5` or `3` -> sorted, de-duplicated ints.

    A range must go upwards (`5-1` is refused rather than read as empty or reversed): a silent
    empty sweep would deploy nothing and report nothing.
    """
    if text is None or not str(text).strip():
        raise BadInput(flag, "empty; give values like 1,4,16" + (" or a range like 1-5" if allow_ranges else ""))
    values: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            raise BadInput(flag, f"empty item in {text!r}")
        m = re.fullmatch(r"(\S+?)\s*-\s*(\S+)", part) if allow_ranges else None
        if m and not re.fullmatch(r"[+-]?\d+", part):
            lo = _int(flag, m.group(1), minimum=minimum)
            hi = _int(flag, m.group(2), minimum=minimum)
            if hi < lo:
                raise BadInput(flag, f"range {part!r} runs downwards; write {hi}-{lo}")
            values.update(range(lo, hi + 1))
        else:
            values.add(_int(flag, part, minimum=minimum))
    return sorted(values)


def parse_steps(text: str | None) -> list[int]:
    """`--steps`: ints >= 0 (0 = no speculation, design.md "Play-level variables")."""
    return parse_int_list("--steps", text, minimum=0)


def parse_topk(text: str | None) -> list[int]:
    return parse_int_list("--topk", text, minimum=1)


def parse_draft_tokens(text: str | None) -> list[int | None]:
    """`--draft-tokens`: empty/None means "let SGLang decide" (steps + 1 when topk is 1)."""
    if text is None or str(text).strip().lower() in ("", "auto"):
        return [None]
    return list(parse_int_list("--draft-tokens", text, minimum=2))


def parse_concurrency(text: str | None) -> list[int]:
    """`--concurrency`: positive ints; order kept ascending (low levels first warm nothing up)."""
    return parse_int_list("--concurrency", text, minimum=1, allow_ranges=False)


def parse_positive_int(flag: str, text: Any, *, minimum: int = 1) -> int:
    return _int(flag, str(text), minimum=minimum)


def parse_requests_per_level(text: str | None) -> int | None:
    """`--requests-per-level`: `auto` (None) = max(4, 2 x concurrency), as the seed did."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    return _int("--requests-per-level", str(text), minimum=1)


def requests_for_level(concurrency: int, fixed: int | None) -> int:
    """How many requests a level sends; never fewer than its concurrency when automatic."""
    if fixed is not None:
        return fixed
    return max(4, 2 * concurrency)


def parse_temperature(text: Any) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise BadInput("--temperature", f"{text!r} is not a number") from None
    if not (0.0 <= value <= 2.0) or value != value:
        raise BadInput("--temperature", f"{value} is outside 0..2")
    return value


def parse_positive_float(flag: str, text: Any) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise BadInput(flag, f"{text!r} is not a number") from None
    if not value > 0:
        raise BadInput(flag, f"{value} must be above 0")
    return value


def parse_target_concurrency(text: str | None, levels: list[int]) -> list[int] | None:
    """`--target-concurrency`: `mix` (None: every level weighted equally) or levels of the sweep."""
    if text is None or str(text).strip().lower() in ("", "mix", "all"):
        return None
    wanted = parse_int_list("--target-concurrency", text, minimum=1, allow_ranges=False)
    missing = [c for c in wanted if c not in levels]
    if missing:
        raise BadInput("--target-concurrency", f"{missing} not among the swept levels {levels}")
    return wanted


def _load_vars_file(flag: str, path_text: str) -> dict[str, Any]:
    path = Path(path_text)
    if not path.is_file():
        raise BadInput(flag, f"@{path_text}: no such file")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BadInput(flag, f"@{path_text}: cannot read it as YAML/JSON ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(flag, f"@{path_text}: must hold a mapping of variables")
    return data


def parse_extra_vars(items: list[str] | None, flag: str = "-e/--extra-vars") -> dict[str, Any]:
    """Ansible's three -e forms: `k=v k2=v2`, `@file.yml|json`, or an inline JSON/YAML mapping.

    `k=v` values stay strings, as `ansible-playbook -e` leaves them; later items win.
    """
    merged: dict[str, Any] = {}
    for item in items or []:
        text = item.strip()
        if not text:
            raise BadInput(flag, "empty value")
        if text.startswith("@"):
            merged.update(_load_vars_file(flag, text[1:]))
        elif text.startswith("{"):
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise BadInput(flag, f"cannot parse {text!r} ({exc})") from None
            if not isinstance(data, dict):
                raise BadInput(flag, f"{text!r} is not a mapping")
            merged.update(data)
        else:
            try:
                parts = shlex.split(text)
            except ValueError as exc:
                raise BadInput(flag, f"cannot split {text!r} ({exc})") from None
            for part in parts:
                key, sep, value = part.partition("=")
                if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                    raise BadInput(flag, f"{part!r} is not key=value, @file or a mapping")
                merged[key] = value
    owned = [k for k in SWEEP_OWNED_VARS if k in merged]
    if owned:
        raise BadInput(
            flag, f"{', '.join(owned)} is set by the sweep itself (--steps/--topk/--draft-tokens/--algorithm)"
        )
    for key in merged:
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise BadInput(flag, f"{key!r} is not a valid variable name")
    return merged


def check_out_dir(path_text: str | None, flag: str = "--out") -> Path:
    """The output directory may exist (as a directory) or be creatable; a file is refused."""
    if not path_text:
        raise BadInput(flag, "an output directory is required")
    path = Path(path_text)
    if path.exists() and not path.is_dir():
        raise BadInput(flag, f"{path_text} exists and is not a directory")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(flag, f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(flag, f"{parent} is not writable")
    return path


def check_results_dir(path_text: str, flag: str) -> Path:
    """`plot DIR` / `report DIR`: a directory holding a sweep's records."""
    path = Path(path_text)
    if not path.is_dir():
        raise BadInput(flag, f"{path_text} is not a directory")
    if not (path / "records.jsonl").is_file():
        raise BadInput(flag, f"{path_text} holds no records.jsonl")
    return path


def check_inventory(path_text: str, flag: str = "--inventory") -> Path:
    path = Path(path_text)
    if not path.exists():
        raise BadInput(flag, f"{path_text} does not exist")
    return path


def check_url(text: str, flag: str = "--url") -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/.*)?", text or ""):
        raise BadInput(flag, f"{text!r} is not an http(s) URL")
    return text.rstrip("/")


def check_endpoint(text: str) -> str:
    if text not in ENDPOINTS:
        raise BadInput("--endpoint", f"{text!r} is not one of {', '.join(ENDPOINTS)}")
    return text


@dataclass(frozen=True)
class SpecConfig:
    """One speculative-decoding configuration the sweep deploys."""

    spec_steps: int
    spec_topk: int = 1
    spec_draft_tokens: int | None = None
    spec_algorithm: str = "NEXTN"

    @property
    def config_id(self) -> str:
        """A stable, file-name-safe id (`k3-t1`, `k4-t2-d8`, `k0` = no speculation)."""
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
        """Configurations that differ only in steps form one series (early stop runs along it)."""
        return (self.spec_topk, self.spec_draft_tokens, self.spec_algorithm)

    def extravars(self) -> dict[str, Any]:
        """The play-level variables (design.md); draft tokens only when the user gave them."""
        out: dict[str, Any] = {
            "spec_steps": self.spec_steps,
            "spec_topk": self.spec_topk,
            "spec_algorithm": self.spec_algorithm,
        }
        if self.spec_draft_tokens is not None:
            out["spec_draft_tokens"] = self.spec_draft_tokens
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "spec_steps": self.spec_steps,
            "spec_topk": self.spec_topk,
            "spec_draft_tokens": self.spec_draft_tokens,
            "spec_algorithm": self.spec_algorithm,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpecConfig:
        return cls(
            int(d["spec_steps"]),
            int(d.get("spec_topk") or 1),
            None if d.get("spec_draft_tokens") in (None, "") else int(d["spec_draft_tokens"]),
            str(d.get("spec_algorithm") or "NEXTN"),
        )


@dataclass
class ConfigPlan:
    configs: list[SpecConfig] = field(default_factory=list)
    infeasible: list[tuple[SpecConfig, str]] = field(default_factory=list)


def plan_configs(
    steps: list[int],
    topks: list[int],
    drafts: list[int | None],
    algorithm: str = "NEXTN",
    play_vars: dict[str, Any] | None = None,
) -> ConfigPlan:
    """The configurations to sweep, ascending in steps within each (topk, draft) series.

    Combinations the deploy play would refuse are set aside with the play's own reason instead of
    deployed: the rule is plugins/filter/sglang_flags.py's `spec_settings`, the one the play
    validates spec_* with (a chain verifies steps + 1 tokens, a tree at most steps x topk + 1 and
    needs explicit draft tokens; sglang-facts.md §2.3). `play_vars` are the user's -e values, for
    the limits and draft model path the play would see.
    """
    pv = play_vars or {}
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
                cfg = SpecConfig(0, 1, None, algorithm) if k == 0 else SpecConfig(k, topk, draft, algorithm)
                if cfg.config_id in seen:
                    continue
                seen.add(cfg.config_id)
                if k > 0:
                    errors = spec_settings(k, topk, draft, algorithm, **limits)["errors"]
                    if errors:
                        plan.infeasible.append((cfg, "; ".join(errors)))
                        continue
                plan.configs.append(cfg)
    # Steps 0 (the baseline) first, then each series ascending in steps.
    plan.configs.sort(key=lambda c: (c.spec_steps != 0, c.series[0], c.series[1] or 0, c.spec_steps))
    return plan
