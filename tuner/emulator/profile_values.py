"""What a profile's values must be, one place for each check: YAML 1.2's numbers, finite numbers and
whole ones, increasing batch lists, temperatures, and the measured step-time table (`step_time_ms`)
with its own consistency rules. tuner/emulator/profile.py builds the Profile from them; a failure is
a ProfileError naming the key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml


class ProfileError(ValueError):
    """A profile file is missing, unreadable or inconsistent."""


@dataclass(frozen=True)
class StepTable:
    """`step_time_ms`: the time of one target forward of `batch` requests x `tokens` each, in ms.

    Rows are batch sizes, columns tokens per request (1 = plain decode, k + 1 = a chain's verify),
    measured at `context_tokens` of KV per request; `draft_ms` is one draft step per batch row.
    """

    batch: tuple[int, ...]
    tokens: tuple[int, ...]
    ms: tuple[tuple[float, ...], ...]
    draft_ms: tuple[float, ...] | None = None
    context_tokens: int = 1024
    kv_read_ns_per_token: float | None = None


STEP_TABLE_KEYS = ("batch", "tokens_per_request", "ms", "draft_ms", "context_tokens", "kv_read_ns_per_token")
# the table's keys a profile may also write at its top level (table_keys_at_top)
TABLE_KEYS_AT_TOP = ("context_tokens", "kv_read_ns_per_token")


class YamlLoader(yaml.SafeLoader):
    """YAML 1.2's numbers: PyYAML follows YAML 1.1, where `1e-3`, `1e3` and `5e-05` (the form
    json.dumps writes small floats in) are strings, and a valid profile failed as 'not a number'.
    And YAML's unique keys: PyYAML keeps the last of a repeated key, so a second `alpha:` or `ms:`
    would replace the first without a word; a repeated key fails, named with its line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges a mapping in (SafeLoader's flatten_mapping, below)
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen.setdefault(key, line)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            if first is not None:
                where = f"line {line}" if first == line else f"lines {first} and {line}"
                raise ProfileError(f"key {key!r} appears twice ({where}); each key once")
        return super().construct_mapping(node, deep=deep)


# YAML 1.2's core schema for numbers (yaml.org/spec/1.2.2 §10.3.2), in place of PyYAML's 1.1 rules,
# which read `010` as 8 (octal), `1:30` as 90 (base 60) and `32_768` as 32768: a zero-padded count
# silently changed the machine. Here `010` is 10, `0o10` is 8, and the others are text (refused
# where a number goes, naming the key).
YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in rules if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _yaml12_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


YamlLoader.add_constructor("tag:yaml.org,2002:int", _yaml12_int)


def refuse_unknown(
    name: str, where: str, keys: Iterable[Any], known: Iterable[str], elsewhere: Mapping[str, str] | None = None
) -> None:
    """Refuse keys the profile does not know, each with the known key it is closest to: a misspelled
    key must be named before anything it was meant to replace is found missing (`alpha_by_postion`
    in a profile that gives acceptance only by position failed as "missing key(s): alpha").
    `elsewhere` names where a key of another level belongs (`draft_ms` written beside, not inside,
    `step_time_ms`), ahead of a look-alike of this level (`t_draft_ms`)."""
    known = list(known)
    unknown = [str(k) for k in keys if k not in known]
    if not unknown:
        return
    named = []
    for k in unknown:
        near = difflib.get_close_matches(k, known, n=1, cutoff=0.75)
        if elsewhere and k in elsewhere:
            named.append(f"{k} (a key of {elsewhere[k]})")
        else:
            named.append(f"{k} (did you mean {near[0]}?)" if near else k)
    raise ProfileError(f"emulator profile {name}: {where}unknown key(s): {', '.join(named)}")


def check_number(name: str, key: str, v: Any, kind: str, low: float | None) -> None:
    """A finite number (a whole one for `kind` int) at least `low`; else a ProfileError naming `key`."""
    what = "a whole number" if kind == "int" else "a number"
    if not (is_whole(v) if kind == "int" else is_number(v)):
        raise ProfileError(f"emulator profile {name}: {key} must be {what}, got {v!r}")
    if low is not None and v < low:
        raise ProfileError(f"emulator profile {name}: {key} must be {what} >= {low:g}, got {v!r}")


def by_steps(name: str, key: str, v: Any, kind: str) -> dict[int, float]:
    """A map depth -> a finite number >= 0 (whole for `kind` int); a depth is a whole number >= 0,
    written as a number or its text (JSON keys are strings), and named once."""
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ProfileError(f"emulator profile {name}: {key} must map steps -> values, got {v!r}")
    out: dict[int, float] = {}
    for k_raw, value in v.items():
        k = k_raw
        if isinstance(k_raw, str) and k_raw.strip().isdigit():
            k = int(k_raw)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ProfileError(f"emulator profile {name}: {key} keys must be steps (whole numbers >= 0), got {k_raw!r}")
        if k in out:
            raise ProfileError(f"emulator profile {name}: {key} names steps {k} twice")
        check_number(name, f"{key}[{k}]", value, kind, 0)
        out[k] = float(value)
    return out


def is_number(v: Any) -> bool:
    """A finite int or float that a float holds (YAML reads a 400-digit integer as an int, whose
    float() overflowed with a traceback instead of a message naming the key)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def is_whole(v: Any) -> bool:
    """A finite number equal to a whole one (a count may be written 512.0, or 1.2e6 in YAML 1.2)."""
    return is_number(v) and v == int(v)


def number_at_least_0(name: str, key: str, v: Any) -> float:
    if not is_number(v) or v < 0:
        raise ProfileError(f"emulator profile {name}: {key} must be a number >= 0, got {v!r}")
    return float(v)


def increasing_ints(name: str, key: str, v: Any, what: str = "batch sizes") -> tuple[int, ...]:
    """A non-empty list of positive whole numbers (`what` they are) in strictly increasing order."""
    if not isinstance(v, list) or not v:
        raise ProfileError(f"emulator profile {name}: {key} must be a non-empty list of {what}")
    for x in v:
        if not is_whole(x) or x < 1:
            raise ProfileError(f"emulator profile {name}: {key} must hold whole numbers >= 1, got {x!r}")
    v = [int(x) for x in v]
    for a, b in zip(v, v[1:], strict=False):
        if b <= a:
            raise ProfileError(f"emulator profile {name}: {key} must be strictly increasing ({a} then {b})")
    return tuple(v)


def temperature_key(name: str, key: str, t: Any) -> float:
    """A temperature key: a number >= 0, or its text (JSON keys and quoted YAML keys are strings)."""
    if isinstance(t, bool):
        raise ProfileError(f"emulator profile {name}: {key} temperature {t!r} must be a number >= 0")
    try:
        out = float(t)
    except (TypeError, ValueError, OverflowError):
        out = math.nan
    if not math.isfinite(out) or out < 0:
        raise ProfileError(f"emulator profile {name}: {key} temperature {t!r} must be a number >= 0")
    return out


def table_keys_at_top(name: str, raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """`context_tokens` and `kv_read_ns_per_token` describe the `step_time_ms` table and belong in
    it; written at the profile's top level they are moved into it (the same value in both places
    is fine, two different ones are refused). Without a table they mean nothing: refused."""
    top = [k for k in TABLE_KEYS_AT_TOP if k in raw]
    if not top:
        return raw
    table = raw.get("step_time_ms")
    if not isinstance(table, Mapping):
        raise ProfileError(
            f"emulator profile {name}: {' and '.join(top)} describe the step_time_ms table, which this profile lacks"
        )
    merged = dict(table)
    for k in top:
        if k in merged and merged[k] != raw[k]:
            raise ProfileError(
                f"emulator profile {name}: {k} is given twice with different values "
                f"({raw[k]!r} at the top, {merged[k]!r} in step_time_ms)"
            )
        merged[k] = raw[k]
    return {**{k: v for k, v in raw.items() if k not in top}, "step_time_ms": merged}


def parse_step_table(name: str, v: Any, top_level_keys: Mapping[str, str] | None = None) -> StepTable | None:
    """`step_time_ms`: batch rows x tokens_per_request columns of positive milliseconds.
    `top_level_keys`: the profile's own keys, named as such when written inside the table."""
    if v is None:
        return None
    key = "step_time_ms"
    if not isinstance(v, Mapping):
        raise ProfileError(f"emulator profile {name}: {key} must be a mapping (batch, tokens_per_request, ms, ...)")
    refuse_unknown(name, f"{key} has ", v, STEP_TABLE_KEYS, top_level_keys)
    for sub in ("batch", "tokens_per_request", "ms"):
        if sub not in v:
            raise ProfileError(f"emulator profile {name}: {key}.{sub} is missing")
    batch = increasing_ints(name, f"{key}.batch", v["batch"])
    tokens = increasing_ints(name, f"{key}.tokens_per_request", v["tokens_per_request"], "token counts")
    ms = v["ms"]
    if not isinstance(ms, list) or len(ms) != len(batch):
        got = len(ms) if isinstance(ms, list) else type(ms).__name__
        raise ProfileError(
            f"emulator profile {name}: {key}.ms must have one row per batch size ({len(batch)}), got {got}"
        )
    rows = []
    for b, row in zip(batch, ms, strict=True):
        if not isinstance(row, list) or len(row) != len(tokens):
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise ProfileError(
                f"emulator profile {name}: {key}.ms row for batch {b} must have {len(tokens)} values "
                f"(one per tokens_per_request), got {got}"
            )
        for x in row:
            if not is_number(x) or x <= 0:
                raise ProfileError(f"emulator profile {name}: {key}.ms row for batch {b} has {x!r}; times must be > 0")
        rows.append(tuple(float(x) for x in row))
    draft = v.get("draft_ms")
    draft_t = None
    if draft is not None:
        if not isinstance(draft, list) or len(draft) != len(batch):
            raise ProfileError(
                f"emulator profile {name}: {key}.draft_ms must have one value per batch size ({len(batch)})"
            )
        for x in draft:
            if not is_number(x) or x < 0:
                raise ProfileError(f"emulator profile {name}: {key}.draft_ms has {x!r}; times must be >= 0")
        draft_t = tuple(float(x) for x in draft)
    ctx = v.get("context_tokens", 1024)
    check_number(name, f"{key}.context_tokens", ctx, "int", 1)
    ctx = int(ctx)
    kv = v.get("kv_read_ns_per_token")
    kv_ns = None if kv is None else number_at_least_0(name, f"{key}.kv_read_ns_per_token", kv)
    if kv_ns:
        # a shorter context takes its KV read off the table's time (tuner/emulator/model.py step_ms):
        # each cell must hold at least the read of its batch's KV at the table's context, or a step
        # at a short context would cost nothing (clamped at 0 ms, an unbounded decode rate)
        for b, row in zip(batch, rows, strict=True):
            read_ms = kv_ns * b * ctx * 1e-6
            if read_ms >= min(row):
                raise ProfileError(
                    f"emulator profile {name}: {key}.kv_read_ns_per_token: reading batch {b}'s KV at "
                    f"context_tokens={ctx} takes {read_ms:.3g} ms, not less than the table's {min(row):.3g} ms "
                    "there (the table's step includes that read: lower kv_read_ns_per_token or context_tokens)"
                )
    return StepTable(batch, tokens, tuple(rows), draft_t, ctx, kv_ns)
