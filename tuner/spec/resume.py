"""What `--resume` may change about how a level is measured, and saying so.

The identity of a sweep (SweepSpec.identity) must match for `--resume` to continue it; how a level
is measured (the precision target, the caps on a level's requests and seconds, warm-up, the request
timeout) may change, as a user finishing a long sweep faster would change it. The levels measured
before keep what they measured, so the change is said at the start, kept in sweep.json (`resumes`,
tuner/data/store.py) and put in the report's notes: the report's settings are the last run's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .sweepspec import SweepSpec, WorkloadSpec

MEASUREMENT_SETTINGS = {
    "precision": "--precision",
    "max_requests_per_level": "--max-requests-per-level",
    "max_level_s": "--max-level-s",
    "warmup_requests": "--warmup-requests",
    "request_timeout": "--request-timeout",
}


def measurement_changes(spec: SweepSpec, stored_params: Mapping[str, Any]) -> list[str]:
    """How `spec` measures levels differently from the stored sweep's parameters, flag by flag."""
    old = WorkloadSpec.from_json(stored_params)
    return [
        f"{flag} was {getattr(old, key)!r}, now {getattr(spec.workload, key)!r}"
        for key, flag in MEASUREMENT_SETTINGS.items()
        if getattr(old, key) != getattr(spec.workload, key)
    ]
