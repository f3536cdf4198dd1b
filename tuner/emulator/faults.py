"""Faults the emulator can be told to show, for the reliability tests (emulator-model.md, "Faults").

Names are a contract (docs/architecture.md): `kv-oom`, `crash-after-ready=S`, `hang-before-ready`,
`slow-startup=S`, `http-5xx=P`, `cut-stream=P`. They come from `--emulator-fault NAME[=ARG]`
(repeatable) and from the profile's `faults:` list.
"""

from __future__ import annotations

from dataclasses import dataclass


class FaultError(ValueError):
    """A fault name or argument that the emulator does not know."""


@dataclass(frozen=True)
class Fault:
    name: str
    arg: float | str | None = None


# name -> (argument kind, required, help)
_SPECS: dict[str, tuple[str, bool, str]] = {
    "kv-oom": ("none", False, "start-up fails: the KV pool cannot be allocated (SGLang's 'Not enough memory')"),
    "crash-after-ready": ("seconds", True, "the server dies S seconds after it is ready"),
    "hang-before-ready": (
        "phase",
        False,
        "start-up never finishes: 'http' (default; port open, /health 503) or 'load'",
    ),
    "slow-startup": ("seconds", True, "start-up takes S seconds longer (weight loading)"),
    "http-5xx": ("share", True, "a share P (0..1) of generation requests is answered 500/503"),
    "cut-stream": ("share", True, "a share P (0..1) of streamed responses is cut mid-stream"),
}
_ARG_HINT = {"seconds": "=S", "share": "=P", "phase": "[=http|load]", "none": ""}
FAULT_NAMES = tuple(f"{n}{_ARG_HINT[k]}" for n, (k, _, _) in _SPECS.items())
HANG_PHASES = ("http", "load")


def parse_fault(text: str) -> Fault:
    """`NAME` or `NAME=ARG` -> Fault; raises FaultError with a message naming what is wrong."""
    name, sep, raw = text.strip().partition("=")
    name = name.strip()
    if name not in _SPECS:
        raise FaultError(f"unknown fault {name!r} (known: {', '.join(_SPECS)})")
    kind, required, _ = _SPECS[name]
    if not sep:
        if required:
            raise FaultError(f"fault {name} needs an argument ({name}=...)")
        return Fault(name, "http" if kind == "phase" else None)
    raw = raw.strip()
    if kind == "none":
        raise FaultError(f"fault {name} takes no argument")
    if kind == "phase":
        if raw not in HANG_PHASES:
            raise FaultError(f"fault {name}: phase must be one of {', '.join(HANG_PHASES)}")
        return Fault(name, raw)
    try:
        value = float(raw)
    except ValueError:
        raise FaultError(f"fault {name}: {raw!r} is not a number") from None
    if value < 0:
        raise FaultError(f"fault {name}: argument must be >= 0")
    if kind == "share" and value > 1:
        raise FaultError(f"fault {name}: share must be between 0 and 1")
    return Fault(name, value)


def parse_faults(items: list[str] | tuple[str, ...]) -> list[Fault]:
    return [parse_fault(x) for x in items]


@dataclass
class FaultSet:
    """The faults in force, read by the server at the points where each one acts."""

    kv_oom: bool = False
    crash_after_ready_s: float | None = None
    hang_before_ready: str | None = None
    slow_startup_s: float = 0.0
    http_5xx_share: float = 0.0
    cut_stream_share: float = 0.0

    @classmethod
    def from_list(cls, faults: list[Fault]) -> FaultSet:
        fs = cls()
        for f in faults:
            if f.name == "kv-oom":
                fs.kv_oom = True
            elif f.name == "crash-after-ready":
                fs.crash_after_ready_s = float(f.arg)  # type: ignore[arg-type]
            elif f.name == "hang-before-ready":
                fs.hang_before_ready = str(f.arg or "http")
            elif f.name == "slow-startup":
                fs.slow_startup_s += float(f.arg)  # type: ignore[arg-type]
            elif f.name == "http-5xx":
                fs.http_5xx_share = float(f.arg)  # type: ignore[arg-type]
            elif f.name == "cut-stream":
                fs.cut_stream_share = float(f.arg)  # type: ignore[arg-type]
        return fs

    def describe(self) -> list[str]:
        out = []
        if self.kv_oom:
            out.append("kv-oom")
        if self.crash_after_ready_s is not None:
            out.append(f"crash-after-ready={self.crash_after_ready_s:g}")
        if self.hang_before_ready:
            out.append(f"hang-before-ready={self.hang_before_ready}")
        if self.slow_startup_s:
            out.append(f"slow-startup={self.slow_startup_s:g}")
        if self.http_5xx_share:
            out.append(f"http-5xx={self.http_5xx_share:g}")
        if self.cut_stream_share:
            out.append(f"cut-stream={self.cut_stream_share:g}")
        return out
