"""Parsing and checking of the tuner's flag values (pure, apart from `stat`-like path checks).

Every check raises `BadInput(flag, message)`; the CLI turns it into exit status 2 with a message
that names the flag, before any host is touched (docs/tuner.md, exit status). Whole numbers are
parsed by the play's own strict parser (plugins/module_utils/sglang_checks.py `parse_whole_number`), so
`--steps 1.5` and `-e spec_steps=1.5` are refused by the same rule.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from sglang_utils.sglang_checks import parse_whole_number
from sglang_utils.sglang_flags import extra_flag_errors
from sglang_utils.sglang_secrets import SECRET_FIELDS, is_secret_field

ENDPOINTS = ("generate", "chat", "completions")

# Play-level variables the sweep itself sets (docs/tuner.md "sweep"), with the flag or phase that sets
# each; a user's -e may not override them, or every configuration of the sweep would silently deploy
# the same thing (`spec_schedule=default` under every static depth ran SGLang's adaptive mode there,
# labelled as the depth). Every other `spec_*` name is refused too: the play reads no other, so it
# is a misspelling the play would ignore.
SWEEP_OWNED_VARS = {
    "spec_steps": "--steps",
    "spec_topk": "--topk",
    "spec_draft_tokens": "--draft-tokens",
    "spec_algorithm": "--algorithm",
    "spec_schedule": "the schedule phase (--schedule-budget)",
}
# Secrets must not travel as extra vars: sweep.json records every -e value, and ansible-runner
# writes extra vars to its private data dir. The role reads the key from the controller's
# environment (SGLANG_API_KEY), as the tuner's client does.
ROLE_PREFIX = "sglang_server_"
# The secrets the role has as variables: sglang_server_<field> for every field of SGLang's that
# holds a secret (the one definition, plugins/module_utils/sglang_secrets.py: api_key,
# admin_api_key, ...); any other sglang_server_* name that looks secret by the same rule is refused too.
SECRET_VARS = tuple(sorted(ROLE_PREFIX + f for f in SECRET_FIELDS))


def is_secret_var(name: str) -> bool:
    """A play variable that carries a secret (refused as an extra var)."""
    return name in SECRET_VARS or (name.startswith(ROLE_PREFIX) and is_secret_field(name[len(ROLE_PREFIX) :]))


_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BadInput(ValueError):
    """A flag value the tuner refuses; `flag` is what the user typed (e.g. `--steps`)."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag
        self.message = message


def whole_number(flag: str, text: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value: int | None = parse_whole_number(text if isinstance(text, int) else str(text))
    if value is None:
        raise BadInput(flag, f"{text!r} is not a whole number")
    if minimum is not None and value < minimum:
        raise BadInput(flag, f"{value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise BadInput(flag, f"{value} is above the maximum {maximum}")
    return value


# A level's prompts start at an index laid out per temperature, repeat and concurrency level, 64
# of each (tuner/run/levels.py `first_index`): more would give two levels the same prompts, which a
# prefix cache serves faster.
MAX_LEVEL_AXIS = 64


MAX_RANGE = 4096  # values one range may hold: more is a typo, and expanding it would hang


def parse_int_list(flag: str, text: str | None, *, minimum: int = 0, allow_ranges: bool = True) -> tuple[int, ...]:
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
            lo = whole_number(flag, m.group(1), minimum=minimum)
            hi = whole_number(flag, m.group(2), minimum=minimum)
            if hi < lo:
                raise BadInput(flag, f"range {part!r} runs downwards; write {hi}-{lo}")
            if hi - lo >= MAX_RANGE:
                raise BadInput(flag, f"range {part!r} holds {hi - lo + 1} values; at most {MAX_RANGE}")
            values.update(range(lo, hi + 1))
        else:
            values.add(whole_number(flag, part, minimum=minimum))
    return tuple(sorted(values))


def parse_steps(text: str | None) -> tuple[int, ...]:
    """`--steps`: ints >= 0 (0 = no speculation)."""
    return parse_int_list("--steps", text, minimum=0)


def parse_topk(text: str | None) -> tuple[int, ...]:
    return parse_int_list("--topk", text, minimum=1)


def parse_draft_tokens(text: str | None) -> tuple[int | None, ...]:
    """`--draft-tokens`: empty/`auto` means "let SGLang decide" (steps + 1 when topk is 1)."""
    if text is None or str(text).strip().lower() in ("", "auto"):
        return (None,)
    return parse_int_list("--draft-tokens", text, minimum=2)


def parse_concurrency(text: str | None) -> tuple[int, ...]:
    """`--concurrency`: positive ints, ascending, at most MAX_LEVEL_AXIS of them."""
    levels = parse_int_list("--concurrency", text, minimum=1, allow_ranges=False)
    if len(levels) > MAX_LEVEL_AXIS:
        raise BadInput("--concurrency", f"{len(levels)} levels; at most {MAX_LEVEL_AXIS}")
    return levels


def parse_requests_per_level(text: str | None) -> int | str | None:
    """`--requests-per-level`: `auto` (None: the precision loop, from max(4, 2 x concurrency)),
    `N` (N per level, at least the level's concurrency) or `Nx` (N x concurrency per level, at least 4)."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    raw = str(text).strip().lower()
    if raw.endswith("x"):
        n = whole_number("--requests-per-level", raw[:-1], minimum=1)
        return f"{n}x"
    return whole_number("--requests-per-level", raw, minimum=1)


def requests_for_level(concurrency: int, fixed: int | str | None) -> int:
    """How many requests a level sends (the precision loop's minimum when `fixed` is None)."""
    if isinstance(fixed, str):
        return max(4, int(fixed.rstrip("x")) * concurrency)
    if fixed is not None:
        # a closed loop of C needs C requests to hold C in flight (a level of fewer would run at
        # its request count and be recorded at C)
        return max(fixed, concurrency)
    return max(4, 2 * concurrency)


def parse_float(
    flag: str, text: Any, *, lo: float | None = None, hi: float | None = None, above: float | None = None
) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise BadInput(flag, f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise BadInput(flag, f"{text!r} is not a finite number")
    if above is not None and not value > above:
        raise BadInput(flag, f"{value:g} must be above {above:g}")
    if lo is not None and value < lo:
        raise BadInput(flag, f"{value:g} is below {lo:g}" if hi is None else f"{value:g} is outside {lo:g}..{hi:g}")
    if hi is not None and value > hi:
        raise BadInput(flag, f"{value:g} is above {hi:g}" if lo is None else f"{value:g} is outside {lo:g}..{hi:g}")
    return value


def parse_temperature(text: Any) -> float:
    return parse_float("--temperature", text, lo=0.0, hi=2.0)


def parse_temperatures(text: Any) -> tuple[float, ...]:
    """`--temperature 0,0.7`: each value is swept on every deployment, in the order given."""
    if isinstance(text, (int, float)):
        return (parse_temperature(text),)
    items = [t.strip() for t in str(text or "").split(",")]
    if not any(items):
        raise BadInput("--temperature", "empty; give values like 0 or 0,0.7")
    out: list[float] = []
    for item in items:
        if not item:
            raise BadInput("--temperature", f"empty item in {text!r}")
        value = parse_temperature(item)
        if value in out:
            raise BadInput("--temperature", f"{item} is given twice")
        out.append(value)
    return tuple(out)


def parse_top_p(text: Any) -> float:
    value = parse_float("--top-p", text, hi=1.0)
    if not value > 0:
        raise BadInput("--top-p", f"{value:g} must be above 0 (at most 1)")
    return value


def parse_precision(text: Any) -> float:
    """`--precision 2` or `2%`: the 95% interval's half-width a level aims for, in % of its mean."""
    raw = str(text).strip().removesuffix("%").strip()
    value = parse_float("--precision", raw)
    if value <= 0:
        raise BadInput("--precision", f"{text!r}: must be above 0 (e.g. 2 for +-2%)")
    if value > 50:
        raise BadInput("--precision", f"{text!r}: at most 50 (%)")
    return value


def parse_length(flag: str) -> Any:
    """`--input-len` / `--output-len`: `auto` (None: 256, or the dataset's own) or a whole number."""

    def parse(text: Any) -> int | None:
        if text is None or str(text).strip().lower() == "auto":
            return None
        return whole_number(flag, str(text), minimum=1)

    return parse


def parse_optional_count(flag: str) -> Any:
    def parse(text: Any) -> int | None:
        if text is None or str(text).strip().lower() in ("", "auto", "all"):
            return None
        return whole_number(flag, str(text), minimum=1)

    return parse


def parse_target_concurrency(text: str | None, levels: tuple[int, ...]) -> tuple[int, ...] | None:
    """`--target-concurrency`: `mix` (None: every level weighted equally) or levels of the sweep."""
    if text is None or str(text).strip().lower() in ("", "mix", "all"):
        return None
    wanted = parse_int_list("--target-concurrency", text, minimum=1, allow_ranges=False)
    missing = [c for c in wanted if c not in levels]
    if missing:
        raise BadInput("--target-concurrency", f"{missing} not among the swept levels {list(levels)}")
    return wanted


def check_endpoint(text: str) -> str:
    if text not in ENDPOINTS:
        raise BadInput("--endpoint", f"{text!r} is not one of {', '.join(ENDPOINTS)}")
    return text


def _load_vars_file(flag: str, path_text: str) -> dict[str, Any]:
    path = Path(path_text)
    if not path.is_file():
        raise BadInput(flag, f"@{path_text}: no such file")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BadInput(flag, f"@{path_text}: cannot read it as YAML/JSON ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(flag, f"@{path_text}: must hold a mapping of variables")
    return data


# Role variables naming a file on the controller that the play reads (a relative path would be
# taken from the project's directory, where the tuner runs the play, not from the user's).
CONTROLLER_FILE_VARS = ("sglang_server_emulator_profile", "sglang_server_verify_baseline")


def controller_paths(extra: Mapping[str, Any]) -> dict[str, Any]:
    """`extra` with each CONTROLLER_FILE_VARS path absolute, from where the tuner runs (`~`
    expanded): the play runs in the project's directory (ansible-runner's project_dir) and would
    resolve a relative path there, and the role expands `~` for the profile only. Templates are
    left to the play."""
    out = dict(extra)
    for key in CONTROLLER_FILE_VARS:
        path = out.get(key)
        if isinstance(path, str) and path and "{{" not in path:
            out[key] = os.path.abspath(os.path.expanduser(path))
    return out


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
                if not sep or not _VAR_NAME.fullmatch(key):
                    raise BadInput(flag, f"{part!r} is not key=value, @file or a mapping")
                merged[key] = value
    for key in merged:
        if not isinstance(key, str) or not _VAR_NAME.fullmatch(key):
            raise BadInput(flag, f"{key!r} is not a valid variable name")
    merged = controller_paths(merged)
    for key, value in merged.items():
        # sweep.json and the play's vars file hold them as JSON: YAML's unquoted dates and times
        # (`built: 2024-06-01`) and binary or set values are not JSON, and failed after the lock
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise BadInput(
                flag, f"{key}: a {type(value).__name__} value is not JSON (quote it in the YAML: '...')"
            ) from None
    owned = sorted(k for k in merged if k in SWEEP_OWNED_VARS)
    if owned:
        raise BadInput(
            flag,
            "; ".join(f"{k} is set by the sweep itself ({SWEEP_OWNED_VARS[k]})" for k in owned),
        )
    unknown = sorted(k for k in merged if k.startswith("spec_") and k not in SWEEP_OWNED_VARS)
    if unknown:
        raise BadInput(
            flag,
            f"{', '.join(unknown)}: the deploy play reads no such variable (the sweep sets "
            f"{', '.join(SWEEP_OWNED_VARS)}; the role's own settings are sglang_server_*)",
        )
    secret = sorted(k for k in merged if isinstance(k, str) and is_secret_var(k))
    if secret:
        raise BadInput(
            flag,
            f"{', '.join(secret)} would be written to sweep.json and ansible-runner's files: export "
            "SGLANG_API_KEY for the API key (the role and the client both read it from the environment); set "
            "the others in the inventory (Ansible Vault), where the play reads them",
        )
    env = merged.get("sglang_server_environment")
    if env is not None and not isinstance(env, dict) and not (isinstance(env, str) and "{{" in env):
        # `-e sglang_server_environment=HF_TOKEN=...` reaches the play as text, which the role
        # refuses ("must be a mapping") after sweep.json has kept it, and the name check below
        # never saw the names in it
        raise BadInput(
            flag,
            'sglang_server_environment must be a mapping: -e \'{"sglang_server_environment": {"NAME": "value"}}\' '
            f"or -e @vars.yml (got {type(env).__name__}); secrets among them belong in the inventory (Ansible Vault)",
        )
    if isinstance(env, dict):
        # the role keeps these in a root-only file on the host; as -e they would sit in sweep.json
        hidden = sorted(str(k) for k in env if is_secret_field(str(k)) or str(k).upper().endswith("TOKEN"))
        if hidden:
            raise BadInput(
                flag,
                f"sglang_server_environment holds {', '.join(hidden)}, which looks like a secret: given with -e "
                "it would be written to sweep.json; set it in the inventory (Ansible Vault), where the play reads it",
            )
    if "sglang_server_extra_flags" in merged:
        # the role's own rule, before anything is written (sweep.json keeps -e): a managed or secret
        # flag there would fail every deployment, and a secret's value would sit in the file
        errors = extra_flag_errors(merged["sglang_server_extra_flags"])
        if errors:
            raise BadInput(flag, errors[0])
    return merged


def check_out_dir(path_text: str | None, flag: str = "--out", records: bool = True) -> Path:
    """The output directory may exist (as a directory) or be creatable; a file is refused. With
    `records` (a run's `--out`) a records.jsonl there must be writable: the run appends to it."""
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
    # a resumed run appends to its records: one it cannot write would fail after its first deploy
    kept = path / "records.jsonl"
    if records and kept.exists() and not os.access(kept, os.W_OK):
        raise BadInput(flag, f"{kept} is not writable")
    return path


def check_file_path(path_text: str, flag: str) -> Path:
    """A file the run writes later (a baseline captured after a deploy): its directory must exist
    or be creatable, and be writable, and the path itself must not be a directory."""
    path = Path(path_text)
    if path.is_dir():
        raise BadInput(flag, f"{path_text} is a directory")
    check_out_dir(str(path.parent), flag, records=False)  # a baseline beside a sweep's records: not ours to write
    return path


def check_results_dir(path_text: str, flag: str) -> Path:
    """`plot DIR` / `report DIR`: a directory holding a sweep's records."""
    path = Path(path_text)
    if not path.is_dir():
        raise BadInput(flag, f"{path_text} is not a directory")
    if not (path / "records.jsonl").is_file():
        raise BadInput(flag, f"{path_text} holds no records.jsonl")
    if not (path / "sweep.json").is_file():
        # without it the report would describe the default workload, not the one measured
        raise BadInput(flag, f"{path_text} holds no sweep.json: what was measured, with which workload, is unknown")
    if not os.access(path, os.W_OK | os.X_OK):
        # the outputs are written beside the records (each through a temporary file in DIR)
        raise BadInput(flag, f"{path_text} is not writable: the report, results and plot are written there")
    return path


def limit_pattern(text: str | None) -> str | None:
    """An Ansible `--limit` as the tuner passes it on: each `@file` part made absolute against the
    directory the user typed it in (ansible-inventory runs in the project's directory, and would
    look for a relative file there)."""
    if not text:
        return text
    return ",".join("@" + os.path.abspath(p[1:]) if p.startswith("@") else p for p in host_patterns(text))


def host_patterns(text: str) -> list[str]:
    """The patterns of an Ansible host pattern, split as Ansible splits it (on commas, else on colons
    outside brackets and IPv6 addresses: `h1:h2`, `h[1:3]`, `web,@file`)."""
    from ansible.inventory.manager import split_host_pattern  # Ansible's own rule; imported when used

    return [p for p in split_host_pattern(text) if p]


def absolute_path(path_text: str, flag: str, project: Path | None = None) -> str:
    """An existing file's absolute path (else BadInput): absolute, not resolved, as Ansible reads
    the group_vars/ and host_vars/ beside an inventory or playbook by the path as given (a symlink's
    directory, not its target's). With `project`, a path not found here is tried in the project
    (`playbooks/deploy.yml`)."""
    path = Path(path_text)
    if project is not None and not path.exists():
        path = project / path_text
    if not path.exists() or (project is not None and not path.is_file()):
        raise BadInput(flag, f"{path_text} does not exist")
    return os.path.abspath(path)


def check_url(text: str, flag: str = "--url") -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/.*)?", text or ""):
        raise BadInput(flag, f"{text!r} is not an http(s) URL")
    parts = urllib.parse.urlsplit(text)
    if parts.username is not None or parts.password is not None:
        # sent as Basic auth and written in clear to the progress lines and every output file
        raise BadInput(
            flag,
            "a URL with credentials (user:password@) would be written to the outputs; give the server's API "
            "key in SGLANG_API_KEY instead",
        )
    if parts.query or parts.fragment:
        # every request's path was appended to it: /?token=x/server_info
        raise BadInput(flag, f"{text!r} has a query or fragment; give the server's root, e.g. http://host:30000")
    if parts.path.rstrip("/").endswith("/v1"):
        raise BadInput(flag, f"{text!r} ends in /v1; give the server's root (the tuner adds /v1/... itself)")
    try:
        port = parts.port  # ValueError past 65535 or not a number
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or port == 0:
        # it reached the server-info probe, which exited 1 as if the server were down
        raise BadInput(flag, f"{text!r} has no valid host and port (a port is 1-65535)")
    return text.rstrip("/")
