"""Orchestration: deploy each configuration the planner hands out, benchmark every level, store.

One worker per slot (a host, or a multi-node group deployed as one; docs/architecture.md): with
several hosts of group `sglang_servers` the configurations are spread over them, each deploy
limited to its slot. Configurations are handed out in plan order (ascending steps within a
series); the early-stop rule is checked each time a configuration is about to start, from what has
been measured by then, so it also holds after `--resume`. With several hosts a deeper
configuration may already be running when a shallower one ends; it is finished, not wasted, and
only configurations not yet started are skipped.

What runs next is tuner/run/planner.py's; with `--search model` the order is the model's
(tuner/decide/search/): each time a slot is free, the
model is refitted to everything measured and names the next configuration, or says to wait for
those in flight (the slot waits until one ends), or to stop; what it decides against is recorded
as `skip` records of kind `predicted` with their predictions, so `--resume` and `report` keep them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sglang_utils.sglang_adaptive import launch_steps as schedule_launch_steps
from sglang_utils.sglang_adaptive import resolved_schedule
from sglang_utils.sglang_checks import parse_whole_number
from sglang_utils.sglang_gate_report import GateReport
from sglang_utils.sglang_releases import adaptive_config_form

from ..data.records import (
    BenchFailedRecord,
    DeployBestRecord,
    DeployRecord,
    SweepState,
    TimingRecord,
)
from ..data.store import MemoryStore, Store
from ..decide import adaptive_phase, analysis, confirm
from ..decide.search.model import find_misfits, vouched_by
from ..decide.search.text import misfit_text
from ..measure import restarts
from ..present import outputs
from ..present.summary import first_view, judged_levels, summarize
from ..present.views import Summary
from ..spec.configs import ConfigPlan, SpecConfig
from ..spec.flags import BadInput
from ..spec.sweepspec import SweepSpec, WorkloadSpec
from .client import BenchClient
from .deploy import Deployer, DeployResult
from .levels import Progress, RecordLog, client_options, run_levels
from .planner import WAIT, Planner
from .together import together


class Gate(Protocol):
    """The correctness gate (tuner/verify/phase.py `VerifyPhase`, handed over by cli.py)."""

    def load(self) -> bool: ...

    async def capture(self, deploy: Any, host: str) -> None: ...

    async def check(
        self, cfg: SpecConfig, host: str, url: str, model: str | None, levels: list[Any], deployment: int = 1
    ) -> Any: ...

    async def exact_round(
        self,
        deploy: Any,
        hosts: list[str],
        picks: Callable[[], list[SpecConfig]],
        checked: Callable[[], tuple[set[str], set[str]]],
        previous: dict[str, Any] | None = None,
        on_error: Callable[[], object] | None = None,
        runs: Callable[[SpecConfig, str], bool] = ...,
    ) -> None: ...

    async def regate(
        self,
        deploy: Callable[[SpecConfig, str, int], Any],
        hosts: Sequence[str],
        state: Callable[[], Any],
        on_error: Callable[[], object] | None = None,
        runs: Callable[[SpecConfig, str], bool] = ...,
    ) -> int: ...


T = TypeVar("T")

REDEPLOY_VAR = "sglang_server_deployment"  # see Sweep._redeploy_vars


class Sweep:
    def __init__(
        self,
        *,
        spec: SweepSpec,
        plan: ConfigPlan,
        store: Store,
        deployer: Deployer,
        hosts: list[str],
        progress: Progress,
        api_key: str | None = None,
        verify: Gate | None = None,
    ):
        self.spec = spec
        self.verify = verify  # the correctness gate (tuner/verify/phase.py); None with --no-verify
        self._baseline: asyncio.Future[None] | None = None  # the gate's baseline being captured (run)
        self.plan = plan
        self.store = store
        self.deployer = deployer
        self.hosts = hosts
        self.progress = progress
        self.api_key = api_key
        self.planner = Planner(spec=spec, plan=plan, store=store, progress=progress, hosts=hosts)
        self._changed: asyncio.Condition | None = None  # a configuration finished (model search waits on it)

    @property
    def workload(self) -> WorkloadSpec:
        return self.spec.workload

    def _say_misfits(self, cfg: SpecConfig) -> None:
        """After a predicted configuration is measured: where the measurement left its interval."""
        state = self.store.state()
        if cfg.config_id not in state.predictions:
            return
        misfits = find_misfits(state)
        misses = [m for m in misfits if m.config.config_id == cfg.config_id]
        if not misses:
            proved = misfits and vouched_by(state, misfits) == cfg.config_id
            self.progress.line(
                f"[{cfg.label}] measured within its predicted intervals"
                + (
                    "; the refit after the misfits is proven: the search skips on its predictions again"
                    if proved
                    else ""
                )
            )
        for m in misses:
            self.progress.line(
                f"[{cfg.label}] MISFIT: {misfit_text(m)}; the model refits and widens its intervals, and the search "
                "skips nothing until the refit predicts a fresh deployment inside its band"
            )

    # -- one configuration -------------------------------------------------------------------
    def _rebuild(self) -> None:
        """A level's (or a failed deploy's) checkpoint: results.csv from the live state."""
        outputs.write_checkpoint(self.store, self.spec)

    def _deploy_line(self, cfg: SpecConfig, res: DeployResult) -> str:
        if not res.ok:
            return f"[{cfg.label}] deploy FAILED on {res.host} after {res.elapsed_s:.1f} s: {res.reason}" + (
                f" ({res.rollback})" if res.rollback else ""
            )
        gate = res.gate
        ready = (res.report or {}).get("ready_seconds")
        return (
            f"[{cfg.label}] up on {res.host} in {res.elapsed_s:.1f} s (server ready "
            f"{'-' if ready is None else format(ready, '.1f')} s): max_total_num_tokens "
            f"{gate.capacity.max_total_num_tokens}, max_running_requests {gate.capacity.max_running_requests}, "
            f"draft tokens {gate.speculative.num_draft_tokens}"
        )

    def _client(self, res: DeployResult) -> BenchClient:
        served = res.gate.server.served_model_name
        assert res.client_url is not None
        return BenchClient(client_options(self.workload, res.client_url, self.api_key, served))

    def _redeploy_vars(self, deployment: int) -> dict[str, Any]:
        """With --repeat-deploys, and on a confirmation redeploy, each deployment carries its number
        (the role's `sglang_server_deployment`, written to the server's environment file as
        SGLANG_TUNE_DEPLOYMENT), so the role sees a changed file and restarts the server even when
        the configuration is the one already running (an identical run restarts nothing). Its own
        variable: an extra var replaces a whole dict, so a `sglang_server_environment` sent here
        would drop the inventory's (HF_TOKEN, SGLANG_ENABLE_SPEC_V2, ...) from the server."""
        if self.spec.repeat_deploys <= 1 and deployment <= 1:
            return {}
        return {REDEPLOY_VAR: str(deployment)}

    def _regate_deploy(self, cfg: SpecConfig, host: str, deployment: int) -> Any:
        """`cfg` deployed again for the gate alone (tuner/verify/phase.py `regate`), with its last
        measurement deployment's variables."""
        return self.deployer.deploy(
            cfg, host, label=f"verify-{cfg.config_id}", extravars=self._redeploy_vars(deployment)
        )

    async def run_config(
        self, cfg: SpecConfig, host: str, deployment: int = 1, levels: tuple[int, ...] | None = None
    ) -> None:
        """Deploy `cfg` on `host` (as its `deployment`-th deployment) and measure its levels: every
        level of the workload, or only `levels` (the confirmation round's)."""
        started = time.perf_counter()
        mode = "configure+run tags" if self.deployer.has_had_full_run(host) else "full run"
        members = self.deployer.members(host)
        where = host if members == [host] else f"{host} ({', '.join(members)})"
        n = max(self.spec.repeat_deploys, deployment)
        dep_txt = f" (deployment {deployment}/{n})" if self.spec.repeat_deploys > 1 else ""
        dep_txt = dep_txt or (f" (deployment {deployment}, confirmation)" if deployment > 1 else "")
        self.progress.line(f"[{cfg.label}] deploying on {where}{dep_txt} ({mode})")
        label = cfg.config_id if n <= 1 else f"{cfg.config_id}-d{deployment}"
        res = await asyncio.to_thread(
            self.deployer.deploy, cfg, host, label=label, extravars=self._redeploy_vars(deployment)
        )
        if res.ok and not res.client_url:
            res.ok, res.reason = False, "the play published no client_url for the host"
        rec = res.record()
        rec.deployment = deployment
        self.store.append(rec)
        self.progress.line(self._deploy_line(cfg, res))
        if not res.ok:
            self._rebuild()
            return
        async with self._client(res) as client:
            lv = await run_levels(
                client,
                self.workload,
                only=tuple(levels) if levels else None,
                config=cfg,
                host=host,
                done=self.planner.done,
                log=self.store,
                progress=self.progress,
                after_level=self._rebuild,
                deployment=deployment,
                deployments=n,
            )
        if lv.reason:
            self.store.append(
                BenchFailedRecord(config=cfg, host=host, reason=lv.reason, kind=lv.kind, deployment=deployment)
            )
            self.progress.line(f"[{cfg.label}] benchmark stopped: {lv.reason}")
        elif self.verify is not None and cfg.spec_steps > 0:
            # the gate on this very deployment, before the next configuration replaces it (on a
            # host other than the first, once the baseline the first host is capturing is there)
            if self._baseline is not None:
                await asyncio.shield(self._baseline)
            served = res.gate.server.served_model_name
            assert res.client_url is not None
            await self.verify.check(cfg, host, res.client_url, served, self.store.state().levels(), deployment)
            self._rebuild()
        self._say_misfits(cfg)
        self.store.append(
            TimingRecord(
                config=cfg,
                host=host,
                total_s=round(time.perf_counter() - started, 3),
                deploy_s=round(res.elapsed_s, 3),
                ready_s=(res.report or {}).get("ready_seconds"),
                warmup_s=round(lv.warmup_s, 3),
                bench_s=round(lv.bench_s, 3),
                full_run=not res.tags,
                deployment=deployment,
            )
        )

    async def _worker(self, host: str) -> None:
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        while True:
            unit = self.planner.next_unit(host)
            if unit is WAIT:
                async with changed:
                    await changed.wait()
                continue
            if not isinstance(unit, tuple):
                return
            cfg, dep = unit
            try:
                await self.run_config(cfg, host, dep)
            finally:
                self.planner.in_progress.discard((cfg.config_id, dep))
                self.planner.finished.add((cfg.config_id, dep))
                async with changed:
                    changed.notify_all()

    # -- the whole sweep -----------------------------------------------------------------------
    async def _confirm_round(self) -> None:
        """After the static depths: redeploy the close contenders, at most `--confirm` extra starts
        (tuner/decide/confirm.py), the most urgent ones at once where there are several hosts (one
        per host), and say what it measured and cost."""
        budget = self.spec.confirm
        if budget <= 0 or self.spec.repeat_deploys > 1:
            return
        made = confirm.spent(self.store.state())
        why = f"the budget of {budget} extra start(s) is spent"
        while made < budget:
            # every start left, most urgent first: one no host here runs gives way to the next
            plans, nothing_left = confirm.next_confirmations(self.store.state(), self.workload, budget - made)
            if not plans:
                why = nothing_left
                break
            # each on a host whose role runs it; one whose hosts are taken waits for the next round
            placed = self.planner.place(plans, lambda p: p.config)
            if not placed:  # a --resume on other hosts, none of which runs it
                why = f"the role of every host refuses {plans[0].config.label}"
                break
            for i, (plan, _host) in enumerate(placed):
                self.progress.line(
                    f"[confirm] start {made + i + 1}/{budget}: redeploying {plan.config.label} ({plan.why}); "
                    f"levels C={','.join(str(c) for c in plan.levels)}"
                )
            await self._together(
                *(self.run_config(plan.config, host, plan.deployment, levels=plan.levels) for plan, host in placed)
            )
            made += len(placed)
        state = self.store.state()
        temps: list[float | None] = [float(t) for t in self.workload.temperature] or [None]
        # each temperature's cells are pooled apart (analysis.aggregate)
        pools = [(t, restarts.pool_stats(analysis.aggregate(state.levels(), temperature=t))) for t in temps]
        spreads = [
            (f"at temperature {t:g}: " if len(temps) > 1 and t is not None else "")
            + (noise.text() if noise is not None else "no configuration measured twice")
            for t, noise in pools
        ]
        spend = confirm.cost(state, self.spec.repeat_deploys)
        self.progress.line(
            f"[confirm] done ({why}): {spend['starts']} extra start(s), {spend['seconds']:.0f} s "
            f"(+{spend['share_pct']:.0f}% on the sweep's deployments); "
            + (
                "; ".join(spreads)
                if any(noise is not None for _, noise in pools)
                else "no configuration measured twice: intervals do not cover restarts"
            )
        )
        self._rebuild()

    def _schedule_stage(self, stage: str) -> list[SpecConfig]:
        """After the static sweep, one stage of the schedule phase (tuner/decide/adaptive_phase.py):
        `envelope` (SGLang's default adaptive config and a no-speculation server), then `search`
        (tuned adaptive configs from what those and the static depths measured), within
        `--schedule-budget`; what each stage decided is said on the progress log."""
        # the sweep's state as it stands, not the outputs: those are written at the end (and on an
        # interrupt); results.csv after each level
        state = self.store.state()
        static_ids = {c.config_id for c in self.plan.configs}
        budget = self.spec.schedule_budget
        if stage == "envelope":
            plan = adaptive_phase.plan_envelope(state, static_ids, self.spec.algorithm, budget, self.plan.refusal)
        else:
            view = first_view(state, self.spec)
            w = self.workload
            tokens = w.input_len + w.output_len if isinstance(w.input_len, int) and isinstance(w.output_len, int) else 0
            limit = parse_whole_number(self.spec.extra_vars.get("sglang_server_spec_max_steps")) or 16
            plan = adaptive_phase.plan_tuned(
                view.every,
                view.stats,
                state,
                judged_levels(state, self.spec),
                self.spec.algorithm,
                budget,
                tokens,
                limit,
                schedule_launch_steps,
                static_ids,
                self.plan.refusal,
            )
        if plan.skipped:
            self.progress.line(f"[schedule] {stage}: not measured: {plan.skipped}")
            return []
        for line in plan.lines:
            self.progress.line(f"[schedule] {line}")
        return plan.configs

    def _picks(self) -> list[SpecConfig]:
        """What the recommendation would name now, for the exact round: the recommendation first, then
        each level's pick at every temperature, each configuration once."""
        s = summarize(self.store.state(), self.spec)
        out: dict[str, SpecConfig] = {}
        views = list(s.views.values())
        for rec in [s.recommendation, *(v.recommendation for v in views)]:
            if rec.chosen is not None:
                out.setdefault(rec.chosen.config_id, rec.chosen.config)
        for v in views:
            for _c, ch in sorted(v.choices.items()):
                out.setdefault(ch.chosen.config_id, ch.chosen.config)
        return list(out.values())

    def _verified(self) -> tuple[set[str], set[str]]:
        """(configurations with an exact verdict, configurations checked on their measurement deployment)."""
        st = self.store.state()
        return set(st.verify_exact), set(st.verify)

    async def _deploy_best(self, summary: Summary) -> bool:
        chosen = summary.recommendation.chosen
        if chosen is None:
            self.progress.line("--deploy-best: nothing to deploy (no recommendation)")
            return False
        cfg = chosen.config

        async def one(host: str) -> bool:
            self.progress.line(f"[best {cfg.label}] deploying on {host}")
            res = await asyncio.to_thread(self.deployer.deploy, cfg, host, label=f"best-{cfg.config_id}")
            verified, why = False, res.reason
            if res.ok and res.client_url:
                async with self._client(res) as client:
                    healthy = await client.health()
                    probe = await client.request(client.take_indices(1), max_tokens=8) if healthy else None
                    verified = bool(healthy and probe is not None and probe.ok)
                    if not verified:
                        why = (
                            "not healthy after deploy"
                            if not healthy or probe is None
                            else f"probe request failed: {probe.error}"
                        )
            self.store.append(DeployBestRecord.of(res.record(), verified=verified, reason=why))
            self.progress.line(
                f"[best {cfg.label}] on {host}: " + ("up and answering" if verified else f"FAILED: {why}")
            )
            return verified

        # every host whose role runs it (one that refuses it keeps what it runs, said on the log)
        hosts = [h for h in self.hosts if self.planner.runs(cfg, h)]
        if not hosts:  # a --resume on hosts none of which runs it
            self.progress.line(f"--deploy-best: nothing deployed: the role of every host refuses {cfg.label}")
            return False
        return all(await self._together(*(one(h) for h in hosts)))

    async def _together(self, *aws: Awaitable[T]) -> list[T]:
        """The hosts' work at once, ended together: one's error cancels the others and stops a play
        in flight (the deployer's cancel event) before it goes on (tuner/run/together.py)."""
        return await together(*aws, on_error=self.deployer.cancel.set)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        interrupted = threading.Event()

        def on_signal() -> None:
            interrupted.set()
            self.deployer.cancel.set()  # ends a running ansible-runner play
            if main is not None:
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:  # the handlers stay until --deploy-best is done too: a SIGTERM there killed the tuner
            # at once, its play left running without a record
            return await self._run(interrupted)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass

    async def _run(self, interrupted: threading.Event) -> int:
        """The sweep's phases, then --deploy-best (run() holds the signal handlers around it)."""
        self.planner.set_aside()
        try:
            if self.verify is not None and not self.verify.load():
                # the campaign's one no-speculation deployment: its outputs are the baseline. It
                # takes the first host; the others start measuring meanwhile, and a check waits
                # for it (run_config).
                self._baseline = asyncio.ensure_future(self.verify.capture(self.deployer.deploy, self.hosts[0]))

            async def first_host() -> None:
                if self._baseline is not None:
                    await asyncio.shield(self._baseline)
                await self._worker(self.hosts[0])

            await self._together(first_host(), *(self._worker(h) for h in self.hosts[1:]))
            # configurations an earlier run measured without a baseline, checked now that there is one
            if self.verify is not None and await self.verify.regate(
                self._regate_deploy, self.hosts, self.store.state, self.deployer.cancel.set, self.planner.runs
            ):
                self._rebuild()
            await self._confirm_round()
            if self.spec.schedule:
                for stage in ("envelope", "search"):
                    self.planner.extra = self._schedule_stage(stage)
                    if self.planner.extra:
                        await self._together(*(self._worker(h) for h in self.hosts))
            if self.verify is not None:
                # the picks redeployed with deterministic inference, held to exact parity (where the
                # release has it); a failing one is excluded and the next pick is checked
                before = self.store.state().verify_exact_round
                await self.verify.exact_round(
                    self.deployer.deploy,
                    self.hosts,
                    self._picks,
                    self._verified,
                    None if before is None else dict(before.verdict),
                    on_error=self.deployer.cancel.set,
                    runs=self.planner.runs,
                )
        except asyncio.CancelledError:
            if not interrupted.is_set():
                raise
            self.progress.line(
                "interrupted: finished points are kept; continue with --resume (a deploy stopped mid-play "
                "did not roll its host back: the next deploy there replaces what it left)"
            )
            # every output, the report and plots included: one left from an earlier run would
            # sit beside the new results.csv, stale, and be listed as this run's
            outputs.write_all(self.store, self.spec)
            return 1
        finally:
            if self._baseline is not None and not self._baseline.done():
                self._baseline.cancel()
        summary = outputs.write_all(self.store, self.spec)
        rc = 0 if summary.recommendation.chosen is not None else 1
        if summary.recommendation.chosen is None:
            # the first temperature's (what --deploy-best deploys) decides the exit status
            at = f" at temperature {summary.temperatures[0]:g}" if len(summary.views) > 1 else ""
            self.progress.line(f"no recommendation{at}: {summary.recommendation.reason}")
        if self.spec.deploy_best:
            try:
                ok = await self._deploy_best(summary)
            except asyncio.CancelledError:
                if not interrupted.is_set():
                    raise
                self.progress.line(
                    "interrupted during --deploy-best: a play stopped mid-way did not roll its host back "
                    "(the next deploy there replaces what it left)"
                )
                outputs.write_all(self.store, self.spec)
                return 1
            outputs.write_all(self.store, self.spec)
            if not ok:
                rc = 1
        return rc


def server_record(url: str, info: dict[str, Any], served: str | None) -> DeployRecord:
    """`bench --url`: what the running server says it is, as a deploy record (`source`
    "server_info"), from the same /server_info parser and gate report the sglang_ready module uses
    (`info`: parse_server_info's)."""
    gate = GateReport.from_server_info(info, served)
    spec = gate.speculative
    steps = spec.num_steps if spec.enabled else 0
    topk = spec.eagle_topk or 1
    draft = spec.num_draft_tokens if (steps and topk > 1) else None
    cfg = SpecConfig(int(steps or 0), int(topk), draft, str(spec.algorithm or "NEXTN"))
    if spec.enabled and spec.adaptive:
        # its num_steps is only the launch depth: the depth it runs is chosen per batch
        cfg = adaptive_server_config(cfg, info, gate.server.version)
    return DeployRecord(
        config=cfg,
        host=url,
        status="ok",
        client_url=url,
        source="server_info",
        capacity=gate.capacity.to_json(),
        speculative=spec.to_json(),
        server=gate.server.to_json(),
    )


def adaptive_server_config(launched: SpecConfig, info: Mapping[str, Any], version: str | None) -> SpecConfig:
    """`bench --url` on a server that runs adaptive speculation (/server_info `speculative_adaptive`,
    resolved: false when SGLang fell back to static): SGLang's default config when it names no
    `speculative_adaptive_config` file, else that file's schedule read here (bench --url usually runs
    on the server's host). A file this machine cannot read is refused: labelled as a static depth or
    as SGLang's default, the results would name a server that was not measured."""
    base = dataclasses.replace(launched, spec_topk=1, spec_draft_tokens=None)
    path = (info.get("speculative") or {}).get("adaptive_config")
    if not path:
        return dataclasses.replace(base, adaptive=True)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        resolved = resolved_schedule(doc, adaptive_config_form(version) or "per-bs", version, launched.spec_steps)
    except (OSError, ValueError) as exc:
        raise BadInput(
            "--url",
            f"the server runs adaptive speculation with its own config {path}, which cannot be read here "
            f"({exc}): run bench --url on the server's host, where the tuner can read the schedule it ran",
        ) from None
    if resolved is None:
        raise BadInput("--url", f"the server's adaptive config {path} is not one its SGLang release reads")
    if "candidate_steps" in resolved:  # 0.5.11/0.5.12: one flat config for every batch size
        resolved = {"1": resolved}
    return dataclasses.replace(base, ladder=json.dumps(resolved))


async def bench_url(
    spec: SweepSpec, store: Store | None, progress: Progress, api_key: str | None
) -> tuple[int, Summary | None, SweepState]:
    """`bench --url`: the same client and metrics against a running server, no deploy."""
    from .client import ServerError

    assert spec.url is not None
    url = spec.url
    log: RecordLog = store if store is not None else MemoryStore()

    def rebuild() -> None:
        if store is not None:
            outputs.write_checkpoint(store, spec)

    async with BenchClient(client_options(spec.workload, url, api_key)) as client:
        try:
            info = await client.parsed_server_info()
        except ServerError as exc:
            progress.error(f"{url}: {exc}")
            return 1, None, log.state()
        served = info.get("served_model_name") or await client.served_model_name()
        client.opts.model = served
        rec = server_record(url, info, served)
        cfg = rec.config
        log.append(rec)
        progress.line(
            f"[{url}] {cfg.label}: max_total_num_tokens {rec.max_total_num_tokens}, "
            f"max_running_requests {rec.max_running_requests}, model {served}"
        )
        lv = await run_levels(
            client,
            spec.workload,
            config=cfg,
            host=url,
            done=set(),
            log=log,
            progress=progress,
            after_level=rebuild,
        )
        if lv.reason:
            log.append(BenchFailedRecord(config=cfg, host=url, reason=lv.reason, kind=lv.kind))
            progress.error(f"[{url}] benchmark stopped: {lv.reason}")
    state = log.state()
    # nothing measured (every warm-up request failed): no outputs, so that `--out` is left as it
    # was found (cli.py), the user's own files in it untouched
    levels = state.levels(measured_only=False)
    summary = outputs.write_all(store, spec) if store is not None and levels else None
    ok = any(lv.measured for lv in levels)
    if summary is not None and summary.recommendation.chosen is None:
        ok = False  # nothing competes (every level lost requests, or none meets the SLO): as `sweep`
    return (0 if ok and not lv.reason else 1), summary, state
