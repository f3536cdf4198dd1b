# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""The emulator's fault table, written once.

The emulator (``tuner.emulator.faults``, which switches faults on at start-up) and the
``sglang_server`` role's input check (``plugins/module_utils/sglang_flags.py``, which fails a bad
``sglang_server_emulator_faults`` entry before any host changes) both read this table, so a
fault name, its argument and its limits cannot drift apart. Standard library only and Python 3.8
syntax: it is imported on the controller by a filter plugin, and installed with the emulator as
``sglang_utils.emulator_faults``.

``parse_fault`` raises :class:`FaultSpecError` whose text says what is wrong without naming who
asked; each caller puts its own flag or variable name in front of it.
"""

from __future__ import annotations

import math

__all__ = [
    "FAULT_SPECS",
    "FAULT_NAMES",
    "FAULT_USAGE",
    "HANG_PHASES",
    "FaultSpecError",
    "parse_fault",
]

# name -> (argument kind, argument required, what it does). Kinds: "none" (no argument),
# "seconds" (a number >= 0), "share" (a number from 0 to 1), "phase" (one of HANG_PHASES),
# "count" (a whole number >= 0: tokens or requests), "rate" (a number >= 0: logits per 100 requests).
FAULT_SPECS: dict[str, tuple[str, bool, str]] = {
    "kv-oom": ("none", False, "start-up fails: the KV pool cannot be allocated (SGLang's 'Not enough memory')"),
    "crash-after-ready": ("seconds", True, "the server dies S seconds after it is ready"),
    "hang-before-ready": (
        "phase",
        False,
        "start-up never finishes: 'http' (default; port open, /health 503) or 'load' (hangs in weight loading)",
    ),
    "slow-startup": ("seconds", True, "start-up takes S seconds longer (weight loading)"),
    "http-5xx": ("share", True, "a share P (0..1) of generation requests is answered 500/503"),
    "cut-stream": ("share", True, "a share P (0..1) of streamed responses is cut mid-stream"),
    "spec-diverge": (
        "count",
        True,
        "with speculation on, each output equals the correct (no-speculation) one for its first N tokens and differs"
        " at every token after (a wrong verify path)",
    ),
    "spec-repeat": ("count", True, "with speculation on, from token N each output repeats a short cycle of words"),
    "accept-drift": (
        "rate",
        True,
        "acceptance logits fall by P per 100 requests served since start (a restart restores them)",
    ),
    "accept-collapse": (
        "count",
        True,
        "after N requests served every draft is rejected (accept length 1.0); the output stays correct",
    ),
    "worker-crash-after-ready": (
        "seconds",
        True,
        "multi-node: a worker node (node rank > 0) dies S seconds after it is ready; the group fails with it",
    ),
    "worker-never-joins": (
        "none",
        False,
        "multi-node: a worker node never reaches rank 0's dist-init address; rank 0 fails at the dist timeout",
    ),
}
HANG_PHASES = ("http", "load")
FAULT_NAMES = tuple(FAULT_SPECS)
_ARG_HINT = {"seconds": "=S", "share": "=P", "phase": "[=http|load]", "none": "", "count": "=N", "rate": "=P"}
# How each fault is written, for help texts: kv-oom, crash-after-ready=S, ...
FAULT_USAGE = tuple(name + _ARG_HINT[spec[0]] for name, spec in FAULT_SPECS.items())


class FaultSpecError(ValueError):
    """A fault entry that is not in the table or has a bad argument."""


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    if math.isnan(value) or math.isinf(value):
        return None
    return value


def parse_fault(text: object) -> tuple[str, float | str | None]:
    """``NAME`` or ``NAME=ARG`` -> (name, argument); the argument is a float for seconds, shares
    and rates, an int for counts, the phase for hang-before-ready (``http`` when omitted), None for
    argument-less faults.
    """
    if not isinstance(text, str):
        raise FaultSpecError(f"{text!r} is not one of {', '.join(FAULT_NAMES)} (NAME or NAME=ARG)")
    name, sep, raw = text.strip().partition("=")
    name = name.strip()
    raw = raw.strip()
    if name not in FAULT_SPECS:
        raise FaultSpecError(f"{text!r} is not one of {', '.join(FAULT_NAMES)} (NAME or NAME=ARG)")
    kind, required = FAULT_SPECS[name][:2]
    if not sep:
        if required:
            raise FaultSpecError(f"{name} needs an argument ({name}=...); got {text!r}")
        return name, ("http" if kind == "phase" else None)
    if kind == "none":
        raise FaultSpecError(f"{name} takes no argument; got {text!r}")
    if kind == "phase":
        if raw not in HANG_PHASES:
            raise FaultSpecError(f"{name}=ARG needs one of {', '.join(HANG_PHASES)}; got {text!r}")
        return name, raw
    value = _number(raw)
    if kind == "count":
        if value is None or value < 0 or value != int(value):
            raise FaultSpecError(f"{name}=N needs a whole number of at least 0; got {text!r}")
        return name, int(value)
    if value is None or value < 0 or (kind == "share" and value > 1):
        allowed = {
            "share": "a share from 0 to 1",
            "rate": "logits per 100 requests (a number of at least 0)",
        }.get(kind, "seconds (a number of at least 0)")
        raise FaultSpecError(f"{name}=ARG needs {allowed}; got {text!r}")
    return name, value


# A fault whose repeats add up (start-up delays); any other given twice would keep only its last
# value without a word, as a repeated YAML key would.
ADDITIVE_FAULTS = ("slow-startup",)


def repeated_faults(names: list[str]) -> list[str]:
    """The fault names given more than once in one list, other than the additive ones."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if name in seen and name not in ADDITIVE_FAULTS and name not in out:
            out.append(name)
        seen.add(name)
    return out
