"""What a sweep's records come to, as the report, the plots, recommendation.json and the CLI read
it: `TempView` (everything chosen at one temperature) and `Summary` (every view, the notes, the
search). Built by tuner/present/summary.py `summarize`; typed here, apart from the building, so
that the notes (tuner/present/notes.py) and the builder both read one definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data.records import DeployRecord, SkipRecord, SweepState
from ..decide import confirm, schedule_phase
from ..decide import envelope as envelope_mod
from ..decide.analysis import LevelChoice, PointStats, Recommendation
from ..decide.crosscheck import CrossCheck
from ..spec.slo import Slo
from ..spec.sweepspec import SweepSpec
from .noise_text import noise_summary
from .search_report import SearchSummary


@dataclass
class TempView:
    """Everything chosen at one sampling temperature (the recommendation is per temperature)."""

    temperature: float
    stats: dict[tuple[str, int], PointStats]
    choices: dict[int, LevelChoice]
    unchosen: dict[int, str]  # levels measured without a choice, and why
    recommendation: Recommendation  # the static depth's, or the schedule's where it won beyond noise
    every: dict[tuple[str, int], PointStats] = field(default_factory=dict)  # static and adaptive cells
    verdict: schedule_phase.ScheduleVerdict | None = None  # the schedule against the best static depth
    static: Recommendation | None = None  # the best static depth (what the schedule had to beat)
    envelope: envelope_mod.Envelope | None = None  # the recommendation against the references, per level


@dataclass
class Summary:
    spec: SweepSpec
    state: SweepState
    rows: list[dict[str, Any]]  # results.csv
    stats: dict[tuple[str, int], PointStats]  # the primary temperature's (the first of --temperature)
    levels: list[int]
    choices: dict[int, LevelChoice]
    recommendation: Recommendation
    search: SearchSummary | None = None  # what the model-guided search did (`--search model`)
    notes: list[str] = field(default_factory=list)
    views: dict[float, TempView] = field(default_factory=dict)  # every temperature measured
    unchosen: dict[int, str] = field(default_factory=dict)
    checks: CrossCheck = field(default_factory=CrossCheck)

    @property
    def noise(self) -> dict[str, Any]:
        # every temperature's cells: the first temperature's alone spoke for a sweep of several; and
        # every configuration's, the schedule phase's adaptive ones too (they are in the report's
        # results table, and one of them may be the recommendation)
        if len(self.views) <= 1:
            view = self.primary_view
            stats = (view.every or view.stats) if view is not None else self.stats
        else:
            stats = {
                (f"{cid}@T{t:g}", c): p for t, v in self.views.items() for (cid, c), p in (v.every or v.stats).items()
            }
        out = noise_summary(stats)
        out["confirm"] = dict(confirm.cost(self.state, self.spec.repeat_deploys))
        return out

    @property
    def primary_view(self) -> TempView | None:
        """The first temperature's view: the one the plots draw and the schedule phase judged."""
        return self.views.get(self.temperatures[0]) if self.temperatures else None

    @property
    def server(self) -> dict[str, Any]:
        return self.state.server

    @property
    def deploys(self) -> dict[str, DeployRecord]:
        return self.state.deploys

    @property
    def failed(self) -> dict[str, DeployRecord]:
        return self.state.failed

    @property
    def skipped(self) -> dict[str, SkipRecord]:
        return self.state.skipped

    @property
    def slo(self) -> Slo | None:
        return self.spec.workload.slo

    @property
    def temperatures(self) -> list[float]:
        return list(self.views)
