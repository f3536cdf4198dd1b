"""Faults the emulator can be told to show, for the reliability tests (docs/reference/performance-model.md, "Faults").

The fault table itself (names, arguments, limits) lives in plugins/module_utils/emulator_faults.py,
shared with the role's input check, so both refuse the same entries with the same words. They come
from `--emulator-fault NAME[=ARG]` (repeatable) and from the profile's `faults:` list.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_utils.emulator_faults import FAULT_USAGE, FaultSpecError, repeated_faults
from sglang_utils.emulator_faults import parse_fault as _parse_spec

FAULT_NAMES = FAULT_USAGE


class FaultError(ValueError):
    """A fault name or argument that the emulator does not know."""


@dataclass(frozen=True)
class Fault:
    name: str
    arg: float | str | None = None

    @property
    def number(self) -> float:
        """The argument of a seconds, share, rate or count fault (parse_fault made it a number)."""
        if isinstance(self.arg, str) or self.arg is None:
            raise FaultError(f"{self.name} needs a number; got {self.arg!r}")
        return float(self.arg)


def parse_fault(text: str) -> Fault:
    """`NAME` or `NAME=ARG` -> Fault; raises FaultError with a message naming what is wrong."""
    try:
        name, arg = _parse_spec(text)
    except FaultSpecError as e:
        raise FaultError(str(e)) from None
    return Fault(name, arg)


def parse_faults(items: list[str] | tuple[str, ...]) -> list[Fault]:
    """Every entry of one list (the flags, or the profile's `faults:`); a fault given twice in it is
    refused (`slow-startup` adds up, here and across the profile and the flags). A flag's fault
    replaces the profile's of the same name."""
    faults = [parse_fault(x) for x in items]
    twice = repeated_faults([f.name for f in faults])
    if twice:
        raise FaultError(f"{', '.join(twice)} given more than once: give each fault once, with the value wanted")
    return faults


@dataclass
class FaultSet:
    """The faults in force, read by the server at the points where each one acts."""

    kv_oom: bool = False
    crash_after_ready_s: float | None = None
    hang_before_ready: str | None = None
    slow_startup_s: float = 0.0
    http_5xx_share: float = 0.0
    cut_stream_share: float = 0.0
    # correctness and drift faults (docs/emulator.md "Faults"): the token position where speculative
    # output goes wrong or starts repeating, the fall of acceptance logits per 100 requests served,
    # and the count of requests served after which every draft is rejected
    spec_diverge_at: int | None = None
    spec_repeat_at: int | None = None
    accept_drift_per_100: float = 0.0
    accept_collapse_after: int | None = None
    # multi-node (multinode.py): act on worker nodes (node rank > 0) only
    worker_crash_after_ready_s: float | None = None
    worker_never_joins: bool = False

    @classmethod
    def from_list(cls, faults: list[Fault]) -> FaultSet:
        fs = cls()
        for f in faults:
            if f.name == "kv-oom":
                fs.kv_oom = True
            elif f.name == "crash-after-ready":
                fs.crash_after_ready_s = f.number
            elif f.name == "hang-before-ready":
                fs.hang_before_ready = str(f.arg or "http")
            elif f.name == "slow-startup":
                fs.slow_startup_s += f.number
            elif f.name == "http-5xx":
                fs.http_5xx_share = f.number
            elif f.name == "cut-stream":
                fs.cut_stream_share = f.number
            elif f.name == "spec-diverge":
                fs.spec_diverge_at = int(f.number)
            elif f.name == "spec-repeat":
                fs.spec_repeat_at = int(f.number)
            elif f.name == "accept-drift":
                fs.accept_drift_per_100 = f.number
            elif f.name == "accept-collapse":
                fs.accept_collapse_after = int(f.number)
            elif f.name == "worker-crash-after-ready":
                fs.worker_crash_after_ready_s = f.number
            elif f.name == "worker-never-joins":
                fs.worker_never_joins = True
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
        if self.spec_diverge_at is not None:
            out.append(f"spec-diverge={self.spec_diverge_at}")
        if self.spec_repeat_at is not None:
            out.append(f"spec-repeat={self.spec_repeat_at}")
        if self.accept_drift_per_100:
            out.append(f"accept-drift={self.accept_drift_per_100:g}")
        if self.accept_collapse_after is not None:
            out.append(f"accept-collapse={self.accept_collapse_after}")
        if self.worker_crash_after_ready_s is not None:
            out.append(f"worker-crash-after-ready={self.worker_crash_after_ready_s:g}")
        if self.worker_never_joins:
            out.append("worker-never-joins")
        return out
