"""The records of records.jsonl, typed, and the one fold that turns them into a sweep's state.

records.jsonl is the source of truth (docs/architecture.md "Tuner output directory"): one JSON
object per event, appended as it happens. Each kind of event is a class here with one `to_json`
and one `from_json`; `SweepState.fold` reads them in order, once, and everything else reads the
state: results.csv (tuner/data/results.py), `--resume` and the sweep's decisions (tuner/run/planner.py), the
summary, report and plot (tuner/present/). Reading is tolerant: unknown
keys are ignored and missing ones take their defaults, so a directory written by an older or newer
version still folds, and an unknown record type is skipped rather than fatal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sglang_utils.sglang_gate_report import Capacity, Speculative

from ..measure.metrics import LevelMetrics, LevelSamples
from ..spec.configs import SpecConfig
from .prediction import Prediction

# Level statuses that carry a measurement (partial: some requests failed; the tokens of the
# successful ones over the level's wall time still count, failures lower the throughput).
MEASURED = ("ok", "partial")
# Why a configuration's gate verdict is "not checked" (VerifyRecord.verdict["unchecked"]), where a
# later --resume with a baseline checks it again (SweepState.ungated, tuner/verify/phase.py `regate`).
UNCHECKED_NO_BASELINE = "no baseline"
UNCHECKED_REDEPLOY = "redeploy failed"


def _fields(cls: type, d: Mapping[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)} - set(skip)
    return {k: v for k, v in d.items() if k in names}


def _config(d: Mapping[str, Any]) -> SpecConfig:
    """The record's configuration; every record names one (without it a `{"type": "level"}` line
    became a made-up k0 row of results.csv)."""
    config = d.get("config")
    if not isinstance(config, Mapping) or not config:
        raise ValueError("it names no configuration")
    return SpecConfig.from_json(config)


@dataclass
class Record:
    """What every record has: its kind (`type` in JSON), the configuration, when it was written."""

    TYPE: ClassVar[str] = ""
    config: SpecConfig
    time: str | None = field(default=None, kw_only=True)

    @property
    def config_id(self) -> str:
        return self.config.config_id

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        if self.time is not None:
            out["time"] = self.time
        for f in dataclasses.fields(self):
            if f.name in ("time",):
                continue
            value = getattr(self, f.name)
            if f.name == "config":
                value = self.config.to_json()
            elif isinstance(value, LevelMetrics):
                value = value.to_dict()
            elif isinstance(value, (LevelSamples, Prediction)):
                value = value.to_json()
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Record:
        return cls(config=_config(d), **_fields(cls, d, ("config",)))


@dataclass
class DeployRecord(Record):
    """One run of the deploy play for a configuration on a host (or a multi-node group), or, for
    `bench --url`, what the running server said it is (`source` "server_info")."""

    TYPE: ClassVar[str] = "deploy"
    host: str | None = None
    status: str = "ok"  # ok | failed
    reason: str | None = None
    hosts: list[str] | None = None  # a multi-node group's hosts, head first
    rollback: str | None = None  # the role's own account of its rollback
    detail: str | None = None  # the whole failure message (log tail included)
    client_url: str | None = None
    ready_s: float | None = None
    # The sglang_ready module's report, verbatim (its keys are the module's contract).
    capacity: dict[str, Any] | None = None
    speculative: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    warnings: list[str] | None = None
    elapsed_s: float | None = None
    runner_status: str | None = None
    runner_rc: int | None = None
    tags: list[str] | None = None
    artifacts: str | None = None
    result_source: str | None = None  # set_stats | runner_on_ok
    source: str | None = None  # "server_info" for `bench --url`
    deployment: int = 1  # which of the configuration's --repeat-deploys this is

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def gate_capacity(self) -> Capacity:
        """`capacity` typed (module_utils/sglang_gate_report.py, the module's own type)."""
        return Capacity.from_json(self.capacity)

    @property
    def gate_speculative(self) -> Speculative:
        return Speculative.from_json(self.speculative)

    @property
    def max_total_num_tokens(self) -> int | None:
        return self.gate_capacity.max_total_num_tokens

    @property
    def max_running_requests(self) -> int | None:
        """Each DP rank's limit (the whole server's without data parallelism)."""
        return self.gate_capacity.max_running_requests

    @property
    def dp_size(self) -> int:
        return self.gate_capacity.ranks

    @property
    def resolved_draft_tokens(self) -> int | None:
        return self.gate_speculative.num_draft_tokens


@dataclass
class DeployBestRecord(DeployRecord):
    """`--deploy-best`: the recommendation deployed at the end, and whether it answered."""

    TYPE: ClassVar[str] = "deploy_best"
    verified: bool = False

    @classmethod
    def of(cls, dep: DeployRecord, *, verified: bool, reason: str | None) -> DeployBestRecord:
        """The deploy of the recommendation, judged by whether it answered afterwards."""
        values = {f.name: getattr(dep, f.name) for f in dataclasses.fields(DeployRecord) if f.name != "time"}
        values.update(status="ok" if verified else "failed", reason=None if verified else reason)
        return cls(**values, verified=verified)


LevelKey = tuple[str, float, int, int, int]


@dataclass
class LevelRecord(Record):
    """One benchmark level: one concurrency, one temperature, one repeat, on one deployment of a
    configuration (`deployment` counts the `--repeat-deploys` of it, from 1)."""

    TYPE: ClassVar[str] = "level"
    metrics: LevelMetrics = field(default_factory=LevelMetrics)
    host: str | None = None
    concurrency: int = 0
    repeat: int = 1
    temperature: float = 0.0
    input_len: int | None = None
    output_len: int | None = None
    endpoint: str | None = None
    bench_s: float | None = None
    deployment: int = 1
    top_p: float | None = None
    # A level measured again because the server went away during its first attempt (attempt 2),
    # and the lost first attempt (server_lost): the report says so; the lost one is not compared.
    attempt: int = 1
    server_lost: bool = False
    stop_reason: str | None = None  # precision reached / request cap / time cap / fixed count
    samples: LevelSamples | None = None

    @property
    def key(self) -> LevelKey:
        """What `--resume` treats as done: (configuration, temperature, concurrency, repeat,
        deployment)."""
        return (
            self.config_id,
            float(self.temperature or 0.0),
            int(self.concurrency),
            int(self.repeat or 1),
            int(self.deployment or 1),
        )

    @property
    def measured(self) -> bool:
        return self.metrics.status in MEASURED and self.metrics.output_tok_s is not None

    @property
    def all_failed(self) -> bool:
        """Every request failed on a server that stayed up (HTTP errors, timeouts): nothing to
        compare, but the level was run and the configuration did not serve it."""
        m = self.metrics
        return m.status == "failed" and m.output_tok_s is None and m.requests_failed > 0 and not self.server_lost

    @property
    def complete(self) -> bool:
        """Every request succeeded: a throughput that compares with others as it is."""
        return self.metrics.status == "ok" and self.metrics.output_tok_s is not None and not self.server_lost

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LevelRecord:
        values = _fields(cls, d, ("config", "metrics", "samples"))
        values.setdefault("concurrency", (d.get("metrics") or {}).get("concurrency") or 0)
        for name, default in (("temperature", 0.0), ("repeat", 1), ("deployment", 1), ("attempt", 1)):
            if values.get(name) is None:
                values[name] = default
        values["server_lost"] = bool(values.get("server_lost"))
        return cls(
            config=_config(d),
            metrics=LevelMetrics.from_dict(d.get("metrics") or {}),
            samples=LevelSamples.from_json(d.get("samples")),
            **values,
        )


@dataclass
class SkipRecord(Record):
    """A planned configuration that was not deployed, and why (`kind`: infeasible, early_stop,
    capacity, predicted). A `predicted` skip (the model-guided search, tuner/decide/search/) carries the
    prediction that justified it."""

    TYPE: ClassVar[str] = "skip"
    kind: str = "skipped"
    reason: str | None = None
    prediction: Prediction | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SkipRecord:
        values = _fields(cls, d, ("config", "prediction"))
        return cls(config=_config(d), prediction=Prediction.from_json(d.get("prediction")), **values)


@dataclass
class PredictionRecord(Record):
    """What the model-guided search predicted for a configuration just before deploying it: the
    report sets it against what was then measured."""

    TYPE: ClassVar[str] = "prediction"
    prediction: Prediction = field(default_factory=Prediction)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PredictionRecord:
        return cls(config=_config(d), prediction=Prediction.from_json(d.get("prediction")) or Prediction())


@dataclass
class BenchFailedRecord(Record):
    """The benchmark of a deployed configuration stopped before its last level."""

    TYPE: ClassVar[str] = "bench_failed"
    host: str | None = None
    reason: str | None = None
    # server_lost: the server went away twice (the configuration fails: it is not recommended);
    # warmup: every warm-up request failed; stopped: the server stopped answering
    kind: str | None = None
    deployment: int = 1


@dataclass
class TimingRecord(Record):
    """Where one configuration's time went (bench/sweep_overhead.py reads these)."""

    TYPE: ClassVar[str] = "timing"
    host: str | None = None
    total_s: float | None = None
    deploy_s: float | None = None
    ready_s: float | None = None
    warmup_s: float | None = None
    bench_s: float | None = None
    full_run: bool | None = None
    deployment: int = 1  # which deployment of the configuration (> 1: --repeat-deploys or --confirm)


@dataclass
class VerifyRecord(Record):
    """The correctness gate's verdict on a configuration's deployment (tuner/verify/), or, with
    `role` "baseline", the capture of the no-speculation baseline (once per campaign). The exact
    round (tuner/verify/phase.py) adds "exact_baseline" (the deterministic baseline's capture),
    "exact" (a configuration redeployed with --enable-deterministic-inference, held to exact
    parity) and "exact_round" (what the round did or why it did not run, with its deploys and
    seconds in `verdict`)."""

    TYPE: ClassVar[str] = "verify"
    host: str | None = None
    passed: bool = False
    role: str = "config"  # config | baseline | exact | exact_baseline | exact_round
    reasons: list[str] = field(default_factory=list)  # why it failed, the headline first
    requests: int | None = None
    seconds: float | None = None
    deploy_s: float | None = None  # the baseline's own deploy (or the exact round's redeploy)
    deployment: int = 1
    verdict: dict[str, Any] = field(default_factory=dict)  # sglang_verify.judge's details


def judged_failure(rec: VerifyRecord) -> bool:
    """A gate verdict that failed the configuration: its outputs compared and found wrong, or its
    server lost during the gate. Not a verdict that could not be had ("not checked: ...")."""
    return (
        not rec.passed
        and not rec.verdict.get("unchecked")
        and not str((rec.reasons or [""])[0]).startswith("not checked")
    )


# What an exact round that redeployed nothing says, beside its `why`: the picks it left unchecked and why
# (the redeploy that stopped it, the picks no host's role runs)
_EXACT_ROUND_FACTS = ("unchecked", "stopped", "refused")


def exact_round_repeats(verdict: Mapping[str, Any], previous: Mapping[str, Any] | None) -> bool:
    """Whether an exact round's `verdict` only repeats the `previous` round's (a `--resume`'s), so it
    adds no record and records.jsonl grows only with new facts: the same reason not to run, or no
    redeploy and the same picks unchecked for the same reasons. The latest record is the one the
    report, recommendation.json and the next resume read, so a round that changes a reason (an
    earlier round stopped by a failed redeploy, now every host refuses the pick) is recorded."""
    if previous is None:
        return False
    if not verdict.get("applies"):
        return previous.get("why") == verdict.get("why")
    # `or None`: a record from before a fact was recorded reads as one that had none
    return not verdict.get("deploys") and all(
        (verdict.get(k) or None) == (previous.get(k) or None) for k in _EXACT_ROUND_FACTS
    )


AnyRecord = (
    DeployRecord
    | DeployBestRecord
    | LevelRecord
    | SkipRecord
    | PredictionRecord
    | BenchFailedRecord
    | TimingRecord
    | VerifyRecord
)
RECORD_TYPES: dict[str, type[Record]] = {
    cls.TYPE: cls
    for cls in (
        DeployRecord,
        DeployBestRecord,
        LevelRecord,
        SkipRecord,
        PredictionRecord,
        BenchFailedRecord,
        TimingRecord,
        VerifyRecord,
    )
}


def parse_record(d: Mapping[str, Any] | Record) -> Record | None:
    """A record from its JSON form; None for a kind this version does not know."""
    if isinstance(d, Record):
        return d
    cls = RECORD_TYPES.get(str(d.get("type")))
    if cls is None:
        return None
    rec = cls.from_json(d)
    rec.time = d.get("time")
    return rec


@dataclass
class Measured:
    """A level joined with the deployment it ran on (the latest deploy of its configuration on its
    host before it, which is what the server's capacity columns of results.csv report)."""

    level: LevelRecord
    deploy: DeployRecord | None


@dataclass
class SweepState:
    """Everything a sweep's records say, folded once, in record order."""

    order: list[str] = field(default_factory=list)  # configuration ids, first seen first
    unreadable: list[str] = field(default_factory=list)  # records skipped: valid JSON, not a readable record
    configs: dict[str, SpecConfig] = field(default_factory=dict)
    deploys: dict[str, DeployRecord] = field(default_factory=dict)  # last successful deploy
    failed: dict[str, DeployRecord] = field(default_factory=dict)  # last deploy failed
    # failed starts past the first of a configuration that came up before (its measurements stand)
    redeploy_failures: list[DeployRecord] = field(default_factory=list)
    skipped: dict[str, SkipRecord] = field(default_factory=dict)
    # The search's prediction for a configuration, made before any of its levels was measured.
    predictions: dict[str, PredictionRecord] = field(default_factory=dict)
    measured: list[Measured] = field(default_factory=list)  # every level record, in order
    bench_failures: list[BenchFailedRecord] = field(default_factory=list)
    timings: dict[str, TimingRecord] = field(default_factory=dict)  # the first deployment's
    bench_s_all: dict[str, float] = field(default_factory=dict)  # measurement seconds over every deployment
    verify_seconds: dict[str, float] = field(default_factory=dict)  # the gate's seconds over its runs
    verify_runs: dict[str, int] = field(default_factory=dict)
    # --deploy-best: the latest deploy of the recommendation on each host (the sweep deploys it on all)
    deploy_best: dict[str, DeployBestRecord] = field(default_factory=dict)
    verify: dict[str, VerifyRecord] = field(default_factory=dict)  # the gate's latest verdict per configuration
    verify_baseline: VerifyRecord | None = None  # the campaign's baseline capture (None: reused or --no-verify)
    verify_exact: dict[str, VerifyRecord] = field(default_factory=dict)  # the exact round's verdict per configuration
    verify_exact_baseline: VerifyRecord | None = None  # the deterministic baseline's capture (None: reused/not run)
    verify_exact_round: VerifyRecord | None = None  # the latest exact round: what it did, or why it did not run
    verify_exact_cost: dict[str, float] = field(default_factory=lambda: {"deploys": 0, "seconds": 0.0})
    deployed_hosts: set[str] = field(default_factory=set)  # hosts that had a successful deploy
    server: dict[str, Any] = field(default_factory=dict)  # the server's name and version, latest
    records: list[Record] = field(default_factory=list)
    # the deploy each (configuration, host) last had: where a level record that follows belongs
    _current: dict[tuple[str, str | None], DeployRecord] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def fold(cls, records: Iterable[Mapping[str, Any] | Record], lines: Iterable[int] | None = None) -> SweepState:
        """The state of a whole file's records; `lines`, their line numbers, name an unreadable one."""
        st = cls()
        numbers = iter(lines) if lines is not None else None
        for raw in records:
            st.add(raw, line=None if numbers is None else next(numbers, None))
        return st

    def add(self, raw: Mapping[str, Any] | Record, line: int | None = None) -> None:
        """Fold one more record in, as it arrives (the sweep's live state; fold() is this over a
        whole file)."""
        st = self
        current = st._current
        kind = raw.get("type") if isinstance(raw, Mapping) else None
        where = "" if line is None else f"line {line}: "
        try:
            rec = parse_record(raw)
            if isinstance(rec, LevelRecord):
                rec.key  # noqa: B018  (its whole numbers read here, not in the middle of a report)
            elif isinstance(rec, DeployRecord):
                rec.gate_capacity, rec.gate_speculative  # noqa: B018  (likewise the gate's report)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            # valid JSON this version cannot read as its kind (a hand edit, another tool's line)
            st.unreadable.append(f"{where}a {kind!r} record this version cannot read: {exc}"[:200])
            return
        if rec is None:
            # a kind this version does not know (a newer version's, a typo): named, not dropped unseen
            st.unreadable.append(f"{where}a record of a kind this version does not know: {kind!r}"[:200])
            return
        st.records.append(rec)
        cid = rec.config_id
        if isinstance(rec, DeployBestRecord):
            if any(r.config_id != cid for r in st.deploy_best.values()):
                st.deploy_best = {}  # a later run recommended another configuration: its deploys replace these
            st.deploy_best[rec.host or ""] = rec
            return
        if isinstance(rec, VerifyRecord):
            if rec.role == "baseline":
                st.verify_baseline = rec
            elif rec.role == "exact_round":
                st.verify_exact_round = rec
            elif rec.role in ("exact", "exact_baseline"):
                if rec.role == "exact":
                    st.verify_exact[cid] = rec
                else:
                    st.verify_exact_baseline = rec
                # every redeploy of the round, over resumes: its deploy and the gate's requests
                st.verify_exact_cost["deploys"] += 1
                st.verify_exact_cost["seconds"] += float(rec.deploy_s or 0.0) + float(rec.seconds or 0.0)
            else:
                # a failed verdict stands: a later deployment's pass (the threshold rule near a tie,
                # a drift each restart replays) or "not checked" does not clear it
                prev = st.verify.get(cid)
                if prev is None or not judged_failure(prev) or judged_failure(rec):
                    st.verify[cid] = rec
                st.verify_seconds[cid] = st.verify_seconds.get(cid, 0.0) + float(rec.seconds or 0.0)
                if rec.passed or judged_failure(rec):  # a gate that ran, not a "not checked"
                    st.verify_runs[cid] = st.verify_runs.get(cid, 0) + 1
            return
        if cid not in st.configs and isinstance(rec, (DeployRecord, LevelRecord, SkipRecord, PredictionRecord)):
            st.order.append(cid)
        st.configs.setdefault(cid, rec.config)
        if isinstance(rec, DeployRecord):
            current[(cid, rec.host)] = rec
            st.skipped.pop(cid, None)  # skipped once (e.g. by the model), deployed later after all
            if rec.ok:
                st.deploys[cid] = rec
                st.failed.pop(cid, None)
                if rec.host:
                    st.deployed_hosts.add(rec.host)
                st.server = {k: v for k, v in (rec.server or {}).items() if v} or st.server
            elif cid in st.deploys and (int(rec.deployment or 1) > 1 or st.has_levels(cid)):
                # a later start (--repeat-deploys, the confirmation round, or `--resume` starting
                # again a configuration an earlier process measured part of) of a configuration
                # that came up and was measured: its measurements stand, the failed start is said
                # (as failed it would be listed failed and still be the one recommended)
                st.redeploy_failures.append(rec)
            else:
                st.failed[cid] = rec
        elif isinstance(rec, LevelRecord):
            st.measured.append(Measured(rec, current.get((cid, rec.host))))
        elif isinstance(rec, SkipRecord):
            if rec.kind == "infeasible" and (cid in st.deploys or cid in st.failed or st.has_levels(cid)):
                # a configuration that was run is no set-aside one: a --resume --limit to hosts that
                # refuse it wrote this (before tuner/run/planner.py `set_aside` stopped that)
                return
            st.skipped[cid] = rec
        elif isinstance(rec, PredictionRecord):
            # the prediction made just before the configuration's first deploy: one made again on
            # `--resume` (the run stopped between the decision and the deploy) replaces the older,
            # made by a model that knew less (and, after a misfit, by the model that missed)
            if not st.has_levels(cid) and cid not in st.deploys and cid not in st.failed:
                st.predictions[cid] = rec
        elif isinstance(rec, BenchFailedRecord):
            st.bench_failures.append(rec)
        elif isinstance(rec, TimingRecord):
            # a configuration's row shows its first deployment's timing; the measurement time a gate
            # is weighed against is every deployment's (bench_s_all)
            st.timings.setdefault(cid, rec)
            st.bench_s_all[cid] = st.bench_s_all.get(cid, 0.0) + float(rec.bench_s or 0.0)

    # -- what the sweep reads -----------------------------------------------------------------
    @property
    def done(self) -> set[LevelKey]:
        """Levels that need no measuring again (a level lost with its server does)."""
        return {m.level.key for m in self.measured if not m.level.server_lost}

    def levels(self, *, measured_only: bool = True) -> list[LevelRecord]:
        return [m.level for m in self.measured if m.level.measured or not measured_only]

    def has_levels(self, config_id: str) -> bool:
        return any(m.level.config_id == config_id for m in self.measured)

    @property
    def set_aside(self) -> set[str]:
        """Configurations the sweep's plan set aside as the play would refuse them (`infeasible`)."""
        return {cid for cid, sk in self.skipped.items() if sk.kind == "infeasible"}

    @property
    def ungated(self) -> dict[str, VerifyRecord]:
        """Configurations measured whose latest gate verdict is "not checked" for want of a baseline
        (or of the redeploy made to check them): excluded until checked, and their levels done, so
        the planner never deploys them again. A record written before the verdict said why (a
        "not checked: ..." reason and no rule) counts too. A configuration whose server went away
        during its benchmark is failed already and not among them."""
        out = {}
        for cid, v in self.verify.items():
            if v.passed or judged_failure(v) or cid in self.unstable or not self.has_levels(cid):
                continue
            # None: a "not checked" written before the verdict said why
            if v.verdict.get("unchecked") in (UNCHECKED_NO_BASELINE, UNCHECKED_REDEPLOY, None):
                out[cid] = v
        return out

    @property
    def verify_failed(self) -> dict[str, VerifyRecord]:
        """Configurations whose gate verdict is a failure (on any of their measurement deployments:
        a failure stands) or "not checked", or whose exact round failed: never recommended."""
        out = {cid: v for cid, v in self.verify.items() if not v.passed}
        # an exact verdict that could not be had (the redeploy did not come up) excludes nothing
        out.update({cid: v for cid, v in self.verify_exact.items() if not v.passed and not v.verdict.get("unchecked")})
        return out

    @property
    def unstable(self) -> dict[str, BenchFailedRecord]:
        """Configurations whose server went away twice during their benchmark: failed."""
        return {bf.config_id: bf for bf in self.bench_failures if bf.kind == "server_lost"}

    def terminal(self) -> dict[str, Record]:
        """Configurations that never produced a level: why (their failed deploy, their skip, or
        the benchmark that stopped before its first level, e.g. every warm-up request failed)."""
        out: dict[str, Record] = {}
        benched = {bf.config_id: bf for bf in self.bench_failures}
        for cid in self.order:
            if self.has_levels(cid):
                continue
            rec: Record | None = self.failed.get(cid) or self.skipped.get(cid) or benched.get(cid)
            if rec is not None:
                out[cid] = rec
        return out
