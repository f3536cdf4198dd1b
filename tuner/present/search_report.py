"""What the model-guided search did, as the report and recommendation.json show it (pure).

Built from the folded records: the `prediction` records (what the model said before a
configuration was deployed) against the levels measured afterwards, and the `skip` records of kind
`predicted` (what it decided against, with the prediction that justified it). `report DIR` rebuilds
it from records.jsonl like everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data.prediction import Band, Prediction
from ..data.records import SkipRecord, SweepState
from ..decide import analysis
from ..decide.search.model import Misfit, checked_levels, find_misfits, fit_model, last_search_record, vouched_by
from ..spec.configs import spec_plan
from ..spec.sweepspec import SweepSpec


@dataclass(frozen=True)
class Checked:
    """One level of a configuration measured after it was predicted."""

    config_id: str
    concurrency: int
    predicted: Band
    measured: float
    chance: float

    @property
    def error_pct(self) -> float:
        return (self.measured - self.predicted.mean) / self.predicted.mean * 100 if self.predicted.mean else 0.0

    @property
    def inside(self) -> bool:
        return self.predicted.contains(self.measured)

    def to_json(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "concurrency": self.concurrency,
            "predicted": self.predicted.to_json(),
            "measured": round(self.measured, 2),
            "error_pct": round(self.error_pct, 2),
            "inside": self.inside,
        }


@dataclass(frozen=True)
class Skipped:
    config_id: str
    spec_steps: int
    reason: str
    prediction: Prediction | None

    def to_json(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "spec_steps": self.spec_steps,
            "reason": self.reason,
            "prediction": None if self.prediction is None else self.prediction.to_json(),
        }


@dataclass
class SearchSummary:
    mode: str
    planned: int
    deployed: list[str]
    checked: list[Checked] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    misfits: list[Misfit] = field(default_factory=list)
    vouched: str | None = None  # the deployment that proved the refit after the misfits (model.vouched_by)
    model: str = ""  # the final fit, in a line
    # configurations skipped on a prediction after the first misfit was known and before the refit
    # was proven: none under today's rule (a misfit model skips nothing); a sweep recorded before
    # that rule may have some, and its report must not say it skipped nothing
    skipped_unproven: list[str] = field(default_factory=list)

    @property
    def inside_share(self) -> float | None:
        return sum(c.inside for c in self.checked) / len(self.checked) if self.checked else None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "planned": self.planned,
            "deployed": self.deployed,
            "predicted_vs_measured": [c.to_json() for c in self.checked],
            "skipped": [s.to_json() for s in self.skipped],
            "misfits": [
                {
                    "config_id": m.config.config_id,
                    "what": m.what,
                    "predicted": m.predicted.to_json(),
                    "measured": m.measured,
                }
                for m in self.misfits
            ],
            "refit_proven_by": self.vouched,
            "model": self.model,
        }


def search_summary(state: SweepState, spec: SweepSpec) -> SearchSummary | None:
    """None for a sweep that never used the model (no prediction, no predicted skip)."""
    predicted_skips = [r for r in state.skipped.values() if isinstance(r, SkipRecord) and r.kind == "predicted"]
    if spec.search != "model" and not state.predictions and not predicted_skips:
        return None
    stats = analysis.aggregate(state.levels())
    checked = [
        Checked(cid, lp.concurrency, band, got, lp.chance)
        for cid, rec in state.predictions.items()
        for lp, band, got in checked_levels(cid, rec.prediction, stats)
    ]
    skipped = [Skipped(r.config_id, r.config.spec_steps, r.reason or "", r.prediction) for r in predicted_skips]
    deployed = [cid for cid in state.order if cid in state.deploys or cid in state.failed]
    model = ""
    if state.levels():
        model = fit_model(state, spec.workload).describe()
    misfits = find_misfits(state)
    return SearchSummary(
        mode=spec.search,
        # the plan's, not only those the records reached: an interrupted sweep said "2 of 2 planned"
        # the sweep's own plan held the inventory's limits: what it set aside is not planned
        planned=len(({c.config_id for c in spec_plan(spec).configs} | set(state.order)) - state.set_aside),
        deployed=deployed,
        checked=checked,
        skipped=skipped,
        misfits=misfits,
        vouched=(vouched := vouched_by(state, misfits)),
        model=model,
        skipped_unproven=skipped_unproven(state, misfits, vouched),
    )


def skipped_unproven(state: SweepState, misfits: list[Misfit], vouched: str | None) -> list[str]:
    """The configurations a sweep skipped on the model's prediction between the first misfit (its
    configuration's last record of the search round: `last_search_record`) and the refit's proof (the
    proving deployment's last level; none: to the end), in record order."""
    last = last_search_record(state)
    known = [last[m.config.config_id] for m in misfits if m.config.config_id in last]
    if not known:
        return []
    first = min(known)
    end = last.get(vouched, len(state.records)) if vouched else len(state.records)
    return [
        r.config_id
        for i, r in enumerate(state.records)
        if isinstance(r, SkipRecord) and r.kind == "predicted" and first < i < end
    ]
