"""The gate as a phase of `sweep` (on unless `--no-verify`; docs/tuner.md "Verify").

Once per campaign, before the first configuration, the no-speculation configuration (`k0`) is
deployed and its greedy outputs become the baseline (`--verify-baseline FILE`, default
`<out>/verify_baseline.json`; a file that exists is reused, so a later sweep or `--resume`
deploys nothing for it); with several hosts it takes the first one while the others start
measuring, and a check waits for it (run/sweep.py). Then every speculative configuration is checked
on its own measurement deployment right after its levels, before the next configuration replaces
it: no extra deploy, and a few dozen requests (bench/verify_cost.py: at most 10% of its measurement). A configuration that fails is excluded from the
recommendation (and so from --deploy-best): the summary reads the `verify` records. cli.py hands
this object to run/sweep.py, which calls it through its `Gate` protocol.

That per-deployment check uses the threshold rule unless the measurement deployments run with
--enable-deterministic-inference. Where the release has the flag (sglang_verify.exact_round), the
*exact round* follows the sweep (`exact_round`, off with --no-verify-exact): a second baseline is
captured from `k0` deployed with the flag (`<baseline>.deterministic.json`, reused like the
first), then the configurations about to be recommended (the distinct per-level picks, the
recommendation first) are redeployed with the flag (one at a time, or one per host at a time with
several hosts) and must match it exactly; one that fails is excluded and the picks are worked out
again, so the next candidate is checked, at most EXACT_MAX_CONFIGS redeploys per sweep. Acceptance and drift stay judged on the measurement
deployment (the one --deploy-best deploys, without the flag), docs/tuner.md "In a sweep".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from sglang_utils import sglang_verify as rules
from sglang_utils.sglang_flags import extra_switch_on

from ..data.records import UNCHECKED_NO_BASELINE, UNCHECKED_REDEPLOY, VerifyRecord, exact_round_repeats
from ..present.verify_text import exact_round_text
from ..run.client import BenchClient, ClientOptions
from ..run.levels import wait_for_health
from ..run.together import together
from ..spec.configs import SpecConfig
from . import baseline as baseline_mod
from . import gate, probe
from .gate import ADAPTIVE_ACCEPT_NOTE, floor_exemption, reference_accept
from .prompts import PromptSet

# What capturing a baseline can raise: a bad document, or a server that does not answer (probe.py).
CAPTURE_ERRORS = (baseline_mod.BaselineError, *probe.ANSWER_ERRORS)


class _Log(Protocol):
    def append(self, record: Any) -> dict[str, Any]: ...


class _Progress(Protocol):
    def line(self, text: str) -> None: ...


BASELINE_ID = "k0"
# The exact round's bound: configurations redeployed with deterministic inference per sweep (the
# picks beyond it keep their threshold verdict, and the report says so).
EXACT_MAX_CONFIGS = 4


def exact_baseline_path(path: Path) -> Path:
    """Where the deterministic baseline lives beside the threshold one (`x.json` -> `x.deterministic.json`)."""
    return path.with_name(path.stem + ".deterministic" + (path.suffix or ".json"))


BASE_LABEL = "verify-exact-baseline"


class VerifyPhase:
    def __init__(
        self,
        *,
        baseline_path: Path,
        prompts: PromptSet,
        log: _Log,
        progress: _Progress,
        api_key: str | None,
        tool: str,
        exact: bool = True,
        extra_flags: dict[str, Any] | Callable[[str], dict[str, Any] | str] | None = None,
        recover_timeout: float = 600.0,
    ):
        self.path = baseline_path
        self.recover_timeout = recover_timeout  # --recover-timeout: how long a lost server may take to come back
        self.exact = exact  # the exact round (--verify-exact, the default; --no-verify-exact: off)
        # each slot's sglang_server_extra_flags as its deploys get them (the sweep's -e, else the
        # inventory's: cli.py), kept on a redeploy; a str says why a slot's are not known
        fixed = dict(extra_flags or {}) if not callable(extra_flags) else {}
        self.flags_of: Callable[[str], dict[str, Any] | str] = extra_flags if callable(extra_flags) else lambda _: fixed
        self.exact_baseline: dict[str, Any] | None = None
        self.prompts = prompts
        self.log = log
        self.progress = progress
        self.api_key = api_key
        self.tool = tool
        self.baseline: dict[str, Any] | None = None
        self.unusable: str | None = None  # why no configuration can be checked (said in every verdict)

    def _client(self, url: str, model: str | None) -> BenchClient:
        return BenchClient(ClientOptions(url=url, api_key=self.api_key, model=model, request_timeout=300.0))

    def load(self) -> bool:
        """The stored baseline, when there is one (a broken file is refused with its reason)."""
        if not self.path.exists():
            return False
        try:
            self.baseline = baseline_mod.read(self.path)
            baseline_mod.check_prompts(self.baseline, self.prompts, str(self.path))
        except baseline_mod.BaselineError as exc:
            self.baseline, self.unusable = None, str(exc)
            self.progress.line(f"[verify] {self.unusable}")
            return True
        self.progress.line(
            f"[verify] reusing the baseline {self.path} ({self.baseline['model']}, SGLang "
            f"{self.baseline['server_version']}): no no-speculation deploy"
        )
        return True

    async def _capture(self, res: Any) -> dict[str, Any]:
        """The greedy outputs of the server `res` (a deploy's result) brought up: a baseline document,
        for either rule (tuner/verify/gate.py `capture`)."""
        async with self._client(res.client_url, res.gate.server.served_model_name) as c:
            return await gate.capture(c, self.prompts, self.tool)

    async def capture(self, deploy: Any, host: str) -> None:
        """Deploy `k0` on `host` once and keep its greedy outputs as the baseline."""
        cfg = SpecConfig(spec_steps=0)
        self.progress.line(f"[verify] deploying the no-speculation baseline on {host}")
        res = await asyncio.to_thread(deploy, cfg, host, label="verify-baseline")
        if not res.ok or not res.client_url:
            self.unusable = f"the no-speculation baseline did not deploy on {host}: {res.reason}"
            self.progress.line(f"[verify] {self.unusable}")
            self.log.append(VerifyRecord(config=cfg, host=host, passed=False, role="baseline", reasons=[self.unusable]))
            return
        try:
            doc = await self._capture(res)
        except CAPTURE_ERRORS as exc:
            self.unusable = f"the no-speculation baseline could not be captured: {probe.failure_text(exc)}"
            self.progress.line(f"[verify] {self.unusable}")
            self.log.append(VerifyRecord(config=cfg, host=host, passed=False, role="baseline", reasons=[self.unusable]))
            return
        baseline_mod.write(self.path, doc)
        self.baseline = doc
        self.log.append(
            VerifyRecord(
                config=cfg,
                host=host,
                passed=True,
                role="baseline",
                requests=doc["requests"],
                seconds=doc["seconds"],
                deploy_s=round(res.elapsed_s, 3),
                verdict={"baseline": str(self.path), "deterministic": doc["deterministic"]},
            )
        )
        self.progress.line(
            f"[verify] baseline: {len(doc['short'])} short + {len(doc['long'])} long outputs of {doc['model']} "
            f"(SGLang {doc['server_version']}) in {doc['seconds']:.1f} s -> {self.path}"
        )

    async def check(
        self,
        cfg: SpecConfig,
        host: str,
        url: str,
        model: str | None,
        levels: list[Any],
        deployment: int = 1,
        deploy_s: float | None = None,
    ) -> VerifyRecord:
        """The gate on one configuration's running deployment (its acceptance judged against what its
        `levels` measured); the record is appended and returned. `deploy_s`: the deploy made for the
        check alone (`regate`), recorded with it."""
        measured, accept_note = reference_accept(cfg, levels)
        # an adaptive config that pins 0 steps where the gate's requests run: no floor (the rule and
        # its words are shared with the role's sglang_verify module)
        exempt = floor_exemption(cfg, self._flags(host))
        if exempt is not None:
            # the exemption says which rules apply: the adaptive note without its own "the floor
            # and the drift rules apply", which would contradict it
            note = rules.ADAPTIVE_WHY if accept_note == ADAPTIVE_ACCEPT_NOTE else accept_note
            accept_note = (note + "; " if note else "") + exempt
        if self.baseline is None:
            why = self.unusable or "no baseline"
            rec = VerifyRecord(
                config=cfg,
                host=host,
                passed=False,
                reasons=[f"not checked: {why}"],
                deployment=deployment,
                deploy_s=deploy_s,
                # a --resume that has the baseline checks it then (`regate`)
                verdict={"unchecked": UNCHECKED_NO_BASELINE},
            )
            self.log.append(rec)
            return rec
        baseline = self.baseline
        try:
            v = await self._gate(
                cfg,
                url,
                model,
                lambda c: gate.check(
                    c, self.prompts, baseline, measured, f"the baseline {self.path}", floor=exempt is None
                ),
            )
        except baseline_mod.BaselineError as exc:
            v = {"passed": False, "reasons": [f"not checked: {exc}"], "unchecked": "baseline refused"}
        except probe.ANSWER_ERRORS as exc:
            v = {"passed": False, "reasons": [f"the server did not answer the gate: {probe.failure_text(exc)}"]}
        rec = VerifyRecord(
            config=cfg,
            host=host,
            passed=bool(v["passed"]),
            reasons=list(v.get("reasons") or []),
            requests=v.get("requests"),
            seconds=v.get("seconds"),
            deploy_s=deploy_s,
            deployment=deployment,
            verdict={k: x for k, x in v.items() if k not in ("passed", "reasons", "requests", "seconds")}
            | ({"acceptance_vs_sweep": accept_note} if accept_note else {}),
        )
        self.log.append(rec)
        self.progress.line(f"[{cfg.label}] verify: {rules.verdict_line(v)}")
        return rec

    async def _gate(
        self, cfg: SpecConfig, url: str, model: str | None, run: Callable[[BenchClient], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """One gate on the server at `url`. When the server went away during it (a request failed,
        then /health did not answer), the gate is not the configuration's fault yet: as for a lost
        level (tuner/run/levels.py), wait for /health (systemd restarts a crashed unit; bounded by
        --recover-timeout) and run the gate once more on the same deployment; a second loss fails
        the configuration with the reason. Errors while the server is up are raised to the caller."""
        lost = 0
        while True:
            async with self._client(url, model) as c:
                try:
                    return await run(c)
                except probe.ANSWER_ERRORS as exc:
                    if not await c.server_gone():
                        raise
                    lost += 1
                    what = probe.failure_text(exc)
                    if lost >= 2:
                        why = f"the server went away during the gate twice ({what}); the configuration fails"
                        return {"passed": False, "reasons": [why]}
                    self.progress.line(
                        f"[{cfg.label}] verify: the server went away during the gate ({what}); waiting up to "
                        f"{self.recover_timeout:g} s for /health"
                    )
                    back = await wait_for_health(c, self.recover_timeout)
                    if back is None:
                        why = (
                            f"the server went away during the gate ({what}) and did not answer /health within "
                            f"{self.recover_timeout:g} s"
                        )
                        return {"passed": False, "reasons": [why]}
                    self.progress.line(
                        f"[{cfg.label}] verify: the server answers again after {back:.1f} s: checking again"
                    )

    async def regate(
        self,
        deploy: Callable[[SpecConfig, str, int], Any],
        hosts: Sequence[str],
        state: Callable[[], Any],
        on_error: Callable[[], object] | None = None,
        runs: Callable[[SpecConfig, str], bool] = lambda _c, _h: True,
    ) -> int:
        """Check the configurations measured while no baseline could be had, now that there is one
        (a --resume after the baseline's deploy or capture failed): each stays "not checked", so
        excluded from every choice, until it is, and its levels are done, so nothing else deploys
        it again. Each is deployed once more (`deploy(cfg, host, deployment)`: the sweep's deployer
        with the deployment's own variables; its levels are not measured again) and held to the
        gate as on its measurement deployment, against the levels it measured then; one per host at
        a time, on a host whose role `runs` it. A redeploy that fails leaves it not checked (a later
        --resume tries again). Returns how many it redeployed."""
        queue = list(state().ungated.values()) if self.baseline is not None else []
        if not queue:
            return 0
        todo = len(queue)
        self.progress.line(
            f"[verify] {todo} configuration(s) measured without a baseline: redeploying each to check it"
        )

        async def worker(host: str) -> None:
            while rec := next((r for r in queue if runs(r.config, host)), None):
                queue.remove(rec)
                cfg = rec.config
                self.progress.line(f"[{cfg.label}] verify: redeploying on {host} to check it")
                res = await asyncio.to_thread(deploy, cfg, host, rec.deployment)
                deploy_s = round(res.elapsed_s, 3)
                if res.ok and res.client_url:
                    served = res.gate.server.served_model_name
                    await self.check(cfg, host, res.client_url, served, state().levels(), rec.deployment, deploy_s)
                    continue
                why = f"not checked: the redeploy to check it failed on {host}: {res.reason}"
                self.log.append(
                    VerifyRecord(
                        config=cfg,
                        host=host,
                        passed=False,
                        reasons=[why],
                        deploy_s=deploy_s,
                        deployment=rec.deployment,
                        verdict={"unchecked": UNCHECKED_REDEPLOY},
                    )
                )
                self.progress.line(f"[{cfg.label}] verify: {why}")

        await together(*(worker(h) for h in hosts), on_error=on_error)
        return todo

    # -- the exact round ---------------------------------------------------------------------
    def _flags(self, host: str) -> dict[str, Any]:
        f = self.flags_of(host)
        return f if isinstance(f, dict) else {}

    def _deterministic_vars(self, host: str) -> dict[str, Any] | str:
        """A redeploy's extra vars on `host`: the flags its deploys run with plus
        --enable-deterministic-inference, through the role's flag mapping (an -e replaces the
        inventory's flags whole, so the slot's own ride along); why not, where they are not known."""
        f = self.flags_of(host)
        return f if isinstance(f, str) else {"sglang_server_extra_flags": {**f, rules.DETERMINISTIC_FLAG: True}}

    def _note(self, text: str, verdict: dict[str, Any], previous: dict[str, Any] | None = None) -> None:
        """Say what the round did; a `--resume` whose round only repeats the last one's facts adds no
        record (records.exact_round_repeats)."""
        self.progress.line(f"[verify exact] {text}")
        if exact_round_repeats(verdict, previous):
            return
        self.log.append(VerifyRecord(config=SpecConfig(spec_steps=0), passed=True, role="exact_round", verdict=verdict))

    async def _exact_capture(self, deploy: Any, host: str) -> tuple[bool, int]:
        """The deterministic baseline: reused from its file when it fits, else `k0` deployed with the
        flag. Returns (usable, deploys made)."""
        path = exact_baseline_path(self.path)
        if path.exists():
            try:
                doc = baseline_mod.read(path)
            except baseline_mod.BaselineError:
                doc = None
            if doc is not None and doc.get("deterministic") and self.baseline is not None:
                same = rules.baseline_mismatch(
                    doc,
                    self.baseline.get("model"),
                    self.baseline.get("server_version"),
                    self.prompts.sha256,
                    self.prompts.settings,
                    self.baseline.get("numerics"),
                )
                if not same:
                    self.exact_baseline = doc
                    self.progress.line(f"[verify exact] reusing the deterministic baseline {path}: no deploy")
                    return True, 0
        cfg = SpecConfig(spec_steps=0)
        self.progress.line(
            f"[verify exact] deploying the no-speculation baseline with --{rules.DETERMINISTIC_FLAG} on {host}"
        )
        ev = self._deterministic_vars(host)
        res = (
            None if isinstance(ev, str) else await asyncio.to_thread(deploy, cfg, host, label=BASE_LABEL, extravars=ev)
        )
        why, doc = (ev if isinstance(ev, str) else None), None
        if res is not None and (not res.ok or not res.client_url):
            why = f"the deterministic no-speculation baseline did not deploy on {host}: {res.reason}"
        elif res is not None:
            try:
                doc = await self._capture(res)
            except CAPTURE_ERRORS as exc:
                why = f"the deterministic baseline could not be captured: {probe.failure_text(exc)}"
            if doc is not None and not doc.get("deterministic"):
                why = (
                    f"the server on {host} does not report enable_deterministic_inference in /server_info "
                    f"after a deploy with --{rules.DETERMINISTIC_FLAG}"
                )
        if why is not None or doc is None:
            why = why or "no baseline"
            self.progress.line(f"[verify exact] {why}")
            self.log.append(
                VerifyRecord(
                    config=cfg,
                    host=host,
                    passed=False,
                    role="exact_baseline",
                    reasons=[why],
                    deploy_s=round(res.elapsed_s, 3) if res is not None else None,
                )
            )
            return False, int(res is not None)
        assert res is not None  # a document was captured from it
        baseline_mod.write(path, doc)
        self.exact_baseline = doc
        self.log.append(
            VerifyRecord(
                config=cfg,
                host=host,
                passed=True,
                role="exact_baseline",
                requests=doc["requests"],
                seconds=doc["seconds"],
                deploy_s=round(res.elapsed_s, 3),
                verdict={"baseline": str(path), "deterministic": True},
            )
        )
        self.progress.line(
            f"[verify exact] deterministic baseline: {doc['requests']} requests in {doc['seconds']:.1f} s after a "
            f"{res.elapsed_s:.1f} s deploy -> {path}"
        )
        return True, 1

    async def _exact_one(
        self,
        deploy: Any,
        host: str,
        cfg: SpecConfig,
        threshold_checked: bool,
        baseline_ready: Callable[[], Awaitable[bool]] | None = None,
    ) -> VerifyRecord | None:
        """`cfg` redeployed with the flag, held to exact parity with the deterministic baseline.
        Acceptance is judged here only for a configuration the per-deployment check never saw
        (measured before a --resume): the floor and drift, not the 95% of a measurement made on a
        deployment without the flag. `baseline_ready`: awaited between the deploy and the check
        (the baseline is being captured on another host); when it says the baseline failed, nothing
        is compared or recorded (None)."""
        self.progress.line(f"[verify exact] redeploying {cfg.label} with --{rules.DETERMINISTIC_FLAG} on {host}")
        started = time.perf_counter()
        ev = self._deterministic_vars(host)
        label = f"verify-exact-{cfg.config_id}"
        res = None if isinstance(ev, str) else await asyncio.to_thread(deploy, cfg, host, label=label, extravars=ev)
        deploy_s = round(res.elapsed_s, 3) if res is not None else None
        if baseline_ready is not None and not await baseline_ready():
            return None
        if res is None or not res.ok or not res.client_url:
            why = ev if res is None else f"the deterministic redeploy failed on {host}: {res.reason}"
            v: dict[str, Any] = {"passed": False, "unchecked": True, "reasons": [f"not checked: {why}"]}
        else:
            served = res.gate.server.served_model_name
            assert self.exact_baseline is not None
            try:
                async with self._client(res.client_url, served) as c:
                    v = await gate.check(
                        c,
                        self.prompts,
                        self.exact_baseline,
                        None,
                        f"the deterministic baseline {exact_baseline_path(self.path)}",
                        acceptance=not threshold_checked,
                        # no floor for a config pinning 0 steps at the gate's batch, as in `check`
                        floor=floor_exemption(cfg, self._flags(host)) is None,
                    )
            except baseline_mod.BaselineError as exc:
                v = {"passed": False, "unchecked": True, "reasons": [f"not checked: {exc}"]}
            except probe.ANSWER_ERRORS as exc:
                why = f"not checked: the server did not answer: {probe.failure_text(exc)}"
                v = {"passed": False, "unchecked": True, "reasons": [why]}
            if (v.get("rule") or {}).get("mode") == "threshold":
                # the flag did not take (the server does not say it runs deterministic): no exact verdict
                v = {"passed": False, "unchecked": True, "reasons": [f"not checked exactly: {v['rule']['why']}"]}
        rec = VerifyRecord(
            config=cfg,
            host=host,
            passed=bool(v["passed"]),
            role="exact",
            reasons=list(v.get("reasons") or []),
            requests=v.get("requests"),
            seconds=v.get("seconds"),
            deploy_s=deploy_s,
            verdict={k: x for k, x in v.items() if k not in ("passed", "reasons", "requests", "seconds")},
        )
        self.log.append(rec)
        self.progress.line(
            f"[verify exact] {cfg.label}: {rules.verdict_line(v)}; deploy {deploy_s or 0.0:.1f} s, "
            f"{time.perf_counter() - started:.1f} s in all"
        )
        return rec

    async def exact_round(
        self,
        deploy: Any,
        hosts: Sequence[str],
        picks: Callable[[], list[SpecConfig]],
        checked: Callable[[], tuple[set[str], set[str]]],
        previous: dict[str, Any] | None = None,
        on_error: Callable[[], object] | None = None,
        runs: Callable[[SpecConfig, str], bool] = lambda _c, _h: True,
    ) -> None:
        """After the sweep: hold the configurations about to be recommended to exact parity.

        `picks()`: the speculative configurations the recommendation would name now, in order (the
        recommendation first, then each level's pick); it is asked again after every verdict, so a
        failing pick's successor is checked next. `checked()`: (configurations with an exact
        verdict already, e.g. from before a --resume; configurations with a per-deployment verdict).
        The deterministic baseline is captured on the first of `hosts`; each host redeploys the next
        pick not yet checked nor in flight that its role `runs` (the other hosts start while the
        baseline is captured and compare once it is there), and waits while another host is at work
        (a verdict may name a pick only it runs). At most EXACT_MAX_CONFIGS redeploys; the deploys
        and seconds are logged and recorded. `previous`: the verdict of the round an earlier run of this sweep
        recorded (a --resume). `on_error`: run first when a host's work raises (the sweep passes its
        deployer's cancel event, which stops a play in flight: tuner/run/together.py)."""
        if not self.exact:
            self._note(
                "off (--no-verify-exact): every configuration is judged by its per-deployment check",
                {"applies": False, "why": "--no-verify-exact", "off": True},
                previous,
            )
            return
        if self.baseline is None:
            self._note(
                f"not run: {self.unusable or 'no baseline'}",
                {"applies": False, "why": self.unusable or "no baseline"},
                previous,
            )
            return
        known = [f for h in hosts if isinstance(f := self.flags_of(h), dict)]
        measuring = bool(known) and all(extra_switch_on(f, rules.DETERMINISTIC_FLAG) for f in known)
        plan = rules.exact_round(
            self.baseline.get("server_version"), bool(self.baseline.get("deterministic")), measuring
        )
        if not plan["applies"]:
            self._note(f"not run: {plan['why']}", dict(plan), previous)
            return
        started = time.perf_counter()
        tally = {"deploys": 0, "made": 0}
        # the cap is the sweep's, over resumes: configurations an earlier run held to exact parity count
        before = len(checked()[0])
        in_flight: set[str] = set()
        stopped: list[str] = []  # why the round stopped early (a redeploy that could not be checked)
        base: asyncio.Future[tuple[bool, int]] | None = None

        def todo() -> list[SpecConfig]:
            exact_done, _ = checked()
            # a draft tree (`rules.verifies_tree`: topk > 1, NGRAM) is never held to exact parity: a redeploy
            # of it paid for nothing, and its "not checked exactly" stopped the round
            return [c for c in picks() if chain(c) and c.config_id not in exact_done]

        def tree(c: SpecConfig) -> bool:
            return c.spec_steps > 0 and rules.verifies_tree(c.spec_algorithm, c.spec_topk)

        def chain(c: SpecConfig) -> bool:  # not UNO either (which SGLang does not start deterministic)
            return c.spec_steps > 0 and not tree(c) and not rules.deterministic_refused(c.spec_algorithm)

        trees = [c.config_id for c in picks() if tree(c)]
        uno = [c.config_id for c in picks() if c.spec_steps > 0 and not tree(c) and not chain(c)]

        async def baseline_ready() -> bool:
            if base is None:
                return True
            return (await asyncio.shield(base))[0]

        changed = asyncio.Condition()  # a verdict came or a host stopped: picks() may name another
        hosts_at = {"live": len(hosts), "idle": 0}  # hosts not stopped; of those, waiting on `changed`

        async def wake(stopping: int = 0) -> None:
            hosts_at["live"] -= stopping
            async with changed:
                changed.notify_all()

        async def worker(host: str) -> None:
            try:
                await work(host)
            finally:
                await wake(1)

        async def work(host: str) -> None:
            nonlocal base
            while not stopped:
                cfg = next((c for c in todo() if c.config_id not in in_flight and runs(c, host)), None)
                if cfg is None and hosts_at["live"] - hosts_at["idle"] > 1:
                    # another host still at work: the next pick (a failing one's successor) may be
                    # one only this host's role runs
                    hosts_at["idle"] += 1
                    async with changed:
                        await changed.wait()
                    hosts_at["idle"] -= 1
                    continue
                if cfg is None or before + tally["made"] + len(in_flight) >= EXACT_MAX_CONFIGS:
                    return
                # the baseline is captured (on the first host) only once a pick needs checking
                if self.exact_baseline is None and base is None:
                    base = asyncio.ensure_future(self._exact_capture(deploy, hosts[0]))
                if host == hosts[0] and base is not None and not base.done():
                    # the first host is busy with the baseline until then; the picks may have moved on
                    if not await baseline_ready():
                        return
                    continue
                in_flight.add(cfg.config_id)
                try:
                    rec = await self._exact_one(deploy, host, cfg, cfg.config_id in checked()[1], baseline_ready)
                finally:
                    in_flight.discard(cfg.config_id)
                    await wake()
                tally["deploys"] += int(rec is None or rec.deploy_s is not None)
                if rec is None:
                    stopped.append("no deterministic baseline")  # nothing is compared (said below)
                    return
                tally["made"] += 1
                if rec.verdict.get("unchecked"):
                    # a redeploy with the flag that does not come up (or answer) says nothing about the
                    # configuration; the next one would fare the same: stop, keep the per-deployment verdicts
                    stopped.append(rec.reasons[0])

        try:
            await together(*(worker(h) for h in hosts), on_error=on_error)
        finally:
            if base is not None and not base.done():
                base.cancel()
        if base is not None:
            have_base, deployed = base.result()
            tally["deploys"] += deployed
            if not have_base:
                self._note(
                    "not run: no deterministic baseline; the configurations keep their per-deployment verdicts",
                    {"applies": False, "why": "no deterministic baseline", "deploys": tally["deploys"]},
                )
                return
        deploys, made = tally["deploys"], tally["made"]
        # a pick no host's role runs (a --resume --limit to hosts that refuse it) was never redeployed
        refused = [c.config_id for c in todo() if not any(runs(c, h) for h in hosts)]
        # the cap is the sweep's (`before`: an earlier process's redeploys count), as the workers read it
        capped = before + made >= EXACT_MAX_CONFIGS
        left = [c.config_id for c in todo() if c.config_id not in refused and (stopped or capped)]
        stopped_why = stopped[0] if stopped else None
        secs = round(time.perf_counter() - started, 3)
        text = exact_round_text(made, deploys, secs, stopped_why, left, refused, trees, uno, EXACT_MAX_CONFIGS)
        self._note(
            "done: " + text,
            {
                "applies": True,
                "why": plan["why"],
                "configs": made,
                "deploys": deploys,
                "seconds": secs,
                "unchecked": left + refused,
                "refused": refused,
                "stopped": stopped_why,
            },
            previous,
        )
