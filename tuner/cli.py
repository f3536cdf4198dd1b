"""`python -m tuner` (also `sglang-tune`): sweep, bench, plot, report.

Exit status (docs/tuner.md): 0 done, 1 failed, 2 bad input. Every flag value is checked before
anything is deployed or sent; a bad one exits 2 with a message that names the flag. The flags
themselves belong to the typed spec (tuner/spec/sweepspec.py); this module only wires them to the
work. The API key is read from the environment (SGLANG_API_KEY, else OPENAI_API_KEY), never from
a flag: a key on the command line would show in `ps` and in shell history.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .data.redact import API_KEY_ENV, API_KEY_FALLBACK_ENV, Redactor, api_key_from_env
from .present.summary import schedule_json
from .present.views import Summary
from .spec.flags import (
    BadInput,
    check_file_path,
    check_out_dir,
    check_results_dir,
    controller_paths,
    parse_target_concurrency,
    requests_for_level,
)
from .spec.resume import measurement_changes
from .spec.sweepspec import SweepSpec, WorkloadSpec

if TYPE_CHECKING:
    from .run.inventory import Inventory

TOOL = f"sglang-tune {__version__}"


class _Parser(argparse.ArgumentParser):
    """argparse already exits 2 naming the flag; keep its message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tuner",
        description="Deploy SGLang configurations, benchmark them, plot and recommend "
        f"speculative-decoding settings. API key: ${API_KEY_ENV} (or ${API_KEY_FALLBACK_ENV}).",
    )
    parser.add_argument("--version", action="version", version=TOOL)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sw = sub.add_parser(
        "sweep",
        help="deploy each configuration, benchmark, plot and recommend",
        description="Deploy each speculative configuration through the deploy play "
        "(ansible-runner), benchmark every concurrency level, and write "
        "results.csv, recommendation.json, throughput_vs_steps.png and "
        "report.md to --out.",
    )
    sw.add_argument("--out", required=True, help="output directory (created if missing)")
    sw.add_argument("--resume", action="store_true", help="continue the sweep in --out without redoing finished points")
    sw.add_argument(
        "--dry-run", action="store_true", help="print the configurations, levels and hosts, then exit without deploying"
    )
    sw.add_argument("--quiet", action="store_true", help="no progress lines")
    SweepSpec.add_cli_args(sw)

    be = sub.add_parser(
        "bench",
        help="benchmark a running server without deploying",
        description="Benchmark a running SGLang server with the sweep's client and "
        "metrics; reads /server_info for its capacity and speculative settings.",
    )
    be.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:30000")
    be.add_argument("--out", default=None, help="write results.csv, plot and report here (optional)")
    be.add_argument("--quiet", action="store_true", help="no progress lines")
    WorkloadSpec.add_cli_args(be)

    from .verify.command import add_parser as add_verify

    add_verify(sub)

    pl = sub.add_parser("plot", help="redraw throughput_vs_steps.png from stored results")
    pl.add_argument("dir", help="a sweep's output directory")
    rp = sub.add_parser(
        "report", help="rebuild results.csv, recommendation.json, the plot and report.md from stored results"
    )
    rp.add_argument("dir", help="a sweep's output directory")
    rp.add_argument(
        "--target-concurrency",
        default=None,
        help="recompute the recommendation for this workload (default: the sweep's)",
    )
    rp.add_argument(
        "--slo",
        default=None,
        help="recompute goodput and the recommendation under these limits, e.g. tpot_p99_ms=50 "
        "(default: the sweep's; `none` drops it)",
    )
    return parser


def _print_summary(summary: Summary | None, out: Path | None) -> None:
    if summary is None:
        return
    for v in summary.views.values() or []:
        rec = v.recommendation
        if len(summary.views) > 1:
            print(f"temperature {v.temperature:g}:")
        print("concurrency  best spec_steps  aggregate tok/s  95% CI               verdict")
        for c in summary.levels:
            ch = v.choices.get(c)
            if ch is None:
                if c in v.unchosen:
                    print(f"{c:>11}  {'none':>15}  {'-':>15}  {'-':<19}  {v.unchosen[c]}")
                continue
            iv = ch.chosen.interval
            ci = f"[{iv.low:.1f}, {iv.high:.1f}]"
            print(
                f"{c:>11}  {ch.chosen.spec_steps:>15}  {ch.chosen.mean:>15.1f}  {ci:<19}  "
                f"{'tied within noise' if ch.tied else ch.verdict}"
            )
        if rec.chosen is not None and rec.chosen.config.is_schedule:
            print(f"recommended: {rec.chosen.config.label} ({rec.chosen.config_id}): {rec.reason}")
            print(f"schedule: {json.dumps(schedule_json(summary, v)['schedule'])}")
        elif rec.chosen is not None:
            print(f"recommended: spec_steps {rec.chosen.spec_steps} ({rec.chosen.config_id}): {rec.reason}")
        else:
            print(f"no recommendation: {rec.reason}")
    if not summary.views:
        print(f"no recommendation: {summary.recommendation.reason}")
    if out is not None:
        for label, name in (("results", "results.csv"), ("plot", "throughput_vs_steps.png"), ("report", "report.md")):
            if (out / name).exists():
                print(f"{label + ':':8} {out / name}")


def cmd_sweep(a: argparse.Namespace) -> int:
    from .data.store import Store
    from .run.deploy import Deployer, project_root
    from .run.inventory import InventoryError, read_inventory
    from .run.levels import Progress
    from .run.sweep import Sweep
    from .spec.configs import PLAN_LIMITS, PLAN_PATHS, SpecConfig, infeasible_flag, spec_plan
    from .spec.refusals import NODE_VARS, role_defaults

    project = project_root()
    spec = SweepSpec.from_cli_args(a, project)
    out = check_out_dir(a.out)
    api_key = api_key_from_env()
    redactor = Redactor([api_key])
    store = Store(out, redactor)
    stored = store.read_sweep("--out") if out.is_dir() else None
    remeasured: list[str] = []  # a resume's change to how levels are measured
    if stored is not None:
        if not a.resume:
            raise BadInput(
                "--out", f"{out} already holds a sweep; add --resume to continue it, or choose another directory"
            )
        store.read_spec("--out")  # a sweep.json whose params are not a sweep's is named, not a traceback
        params = dict(stored.get("params") or {})
        # a sweep.json written before the tuner made controller paths absolute holds them as given
        params["extra_vars"] = controller_paths(params.get("extra_vars") or {})
        # ... and before it kept a symlinked inventory or playbook as given, the link's target
        for key in ("inventory", "playbook"):
            if params.get(key) == os.path.realpath(getattr(spec, key) or ""):
                params[key] = getattr(spec, key)
        diffs = spec.identity_diff(params, scrub=redactor.scrub_obj)
        if diffs:
            raise BadInput("--resume", f"{out} holds a different sweep: " + "; ".join(diffs))
        remeasured = measurement_changes(spec, params)
    elif out.is_dir() and (out / "records.jsonl").exists():
        raise BadInput("--out", f"{out} holds records but no sweep.json; choose another directory")
    if spec.verify and spec.verify_baseline and Path(spec.verify_baseline).exists():
        # before anything is written: a bad file must leave nothing behind (a retry would be refused)
        from .verify.baseline import BaselineError, check_prompts
        from .verify.baseline import read as read_baseline
        from .verify.prompts import prompt_set, settings

        try:
            doc = read_baseline(Path(spec.verify_baseline))
            check_prompts(doc, prompt_set(spec.workload.dataset, settings()), spec.verify_baseline)
        except BaselineError as exc:
            raise BadInput("--verify-baseline", str(exc)) from None
    elif spec.verify and spec.verify_baseline:
        # written after the baseline's deploy and capture: a path that cannot be written is
        # refused now, before anything is deployed or sent
        check_file_path(spec.verify_baseline, "--verify-baseline")
    assert spec.inventory is not None and spec.playbook is not None
    try:
        inv = read_inventory(Path(spec.inventory), spec.limit, project, playbook_dir=Path(spec.playbook).parent)
    except InventoryError as exc:
        raise BadInput("--inventory", f"{spec.inventory}: {exc}") from None
    # the project's play (playbooks/deploy.yml, or deploy.yml at the root, which imports it), by
    # whatever path it was given; an installed tuner may have neither
    plays = [p for p in (project / "playbooks" / "deploy.yml", project / "deploy.yml") if p.exists()]
    projects_play = any(os.path.samefile(spec.playbook, p) for p in plays)
    if not inv.has_group and projects_play:
        # every host is the sweep's only for a play of the user's own: the project's targets the group
        raise BadInput(
            "--inventory",
            f"{spec.inventory} has no group sglang_servers, the hosts playbooks/deploy.yml deploys: put the servers "
            "in it (or give a --playbook of your own, which then gets every host)",
        )
    for flag, why in inv.slot_errors():
        raise BadInput(flag, why)
    for _host, why in inv.unreachable_binds(spec.extra_vars):
        raise BadInput(
            "--inventory",
            f"{why}: bind it to an address this machine reaches (0.0.0.0, or one of the host's own), or set "
            "sglang_server_client_url to a URL that reaches it (an SSH tunnel's)",
        )
    slots = inv.slots()
    # the plan against what the play will see: the hosts' spec limits and draft model path, -e over
    # them, and what each slot's role refuses for its other settings (tuner/spec/refusals.py; the
    # project's play only: a play of the user's own may set those variables itself, or not run the role)
    nodes = inv.slot_nodes(NODE_VARS, spec.extra_vars, role_defaults(project)) if projects_play else []
    plan = spec_plan(spec, inv.plan_vars(PLAN_LIMITS, PLAN_PATHS), nodes)
    if not plan.configs:
        flag = infeasible_flag(plan.infeasible[0][1]) if plan.infeasible else "--steps"
        if not flag.startswith("-"):  # a variable of the play's: from -e, else the inventory
            flag = "-e/--extra-vars" if flag in spec.extra_vars else "--inventory"
        raise BadInput(
            flag,
            "no configuration SGLang can run: " + "; ".join(f"{c.config_id}: {why}" for c, why in plan.infeasible),
        )
    machines = host_digests(inv)
    if stored is not None:
        kept = stored.get("hosts")
        before: dict[str, str] = {str(k): str(v) for k, v in kept.items()} if isinstance(kept, dict) else {}
        changed = sorted(h for h, d in machines.items() if h in before and before[h] != d)
        if changed:
            raise BadInput(
                "--resume",
                f"{out} was swept on other machines: the inventory variables of {', '.join(changed)} changed since "
                "(another profile, address, model or setting); a resumed sweep measures the same servers: "
                "restore the inventory, or start a new --out",
            )
        machines = {**before, **machines}
    hosts = list(slots)  # a host, or a multi-node group deployed as one
    if not hosts:
        raise BadInput(
            "--limit" if spec.limit else "--inventory",
            f"no host of group sglang_servers in {spec.inventory}" + (f" matches {spec.limit!r}" if spec.limit else ""),
        )
    progress = Progress(redactor=redactor, quiet=a.quiet)
    if a.dry_run:
        print("hosts: " + ", ".join(h if slots[h] == [h] else f"{h} ({', '.join(slots[h])})" for h in hosts))
        if spec.search == "model":
            from .decide.search.decide import first_round

            first = [c.config_id for c in first_round(plan.configs)]
            if not spec.early_stop:
                then = "every configuration in the model's order (--no-early-stop: nothing is skipped)"
            elif len(spec.workload.temperature) > 1:
                then = (
                    "every configuration in the model's order but a depth whose KV pool is predicted empty "
                    "(several temperatures: the model is fitted at one, so nothing is skipped for its chance to win)"
                )
            else:
                then = "only what the model says could win a level (the others are skipped with their predictions)"
            print(f"search: model: {', '.join(first)} first, then {then}")
        elif spec.early_stop:
            print(
                "search: grid: every configuration in order but the depths above one that could not start for "
                "lack of KV memory and those past the peak at every level (--no-early-stop: every one)"
            )
        else:
            print("search: grid: every configuration in order (--no-early-stop)")
        verb = "may deploy" if spec.early_stop else "deploy"
        for cfg in plan.configs:
            print(f"{verb} {cfg.config_id}: {json.dumps({**spec.extra_vars, **cfg.extravars()})}")
            # refused on some hosts only: the sweep keeps it off those (tuner/run/planner.py)
            for i, host in enumerate(hosts if len(plan.nodes) == len(hosts) else ()):
                refusal = plan.slot_refusal(cfg, i)
                if refusal:
                    print(f"  not on {host}: {refusal}")
        for cfg, why in plan.infeasible:
            print(f"skip {cfg.config_id}: {why}")
        w = spec.workload
        if w.adaptive:
            per = ", ".join(
                f"C={c} x {requests_for_level(c, None)}..{w.max_requests_for(c)} requests" for c in w.concurrency
            )
            per += f" (until +-{w.precision:g}% or {w.max_level_s:g} s)"
        else:
            per = ", ".join(f"C={c} x {w.requests_for(c)} requests" for c in w.concurrency)
        print(
            "levels: "
            + per
            + f", temperature {', '.join(f'{t:g}' for t in w.temperature)}, {w.repeats} repeat(s)"
            + (f", {spec.repeat_deploys} deployments per configuration" if spec.repeat_deploys > 1 else "")
        )
        from .spec.workload import describe

        print(f"prompts: {describe(w.dataset, w.dataset_sample)}")
        if spec.repeat_deploys > 1:
            print("confirm: none (every configuration is deployed --repeat-deploys times)")
        elif spec.confirm > 0:
            print(
                f"confirm: after the static depths, at most {spec.confirm} extra start(s) of the close contenders, "
                "each measuring the sweep's most precise level; every interval then covers what a restart "
                "changes (--confirm 0: off)"
            )
        else:
            print("confirm: off (--confirm 0): the intervals will not cover what a restart changes")
        from .decide.schedule_phase import ADAPTIVE_ALGORITHMS, algorithm_unsupported

        refused = plan.refusal(SpecConfig.default_adaptive(spec.algorithm)) if spec.schedule else None
        if spec.schedule and spec.schedule_budget > 0 and algorithm_unsupported(spec.algorithm):
            print(f"schedule: off (SGLang runs adaptive speculation only with {', '.join(ADAPTIVE_ALGORITHMS)})")
        elif spec.schedule and spec.schedule_budget > 0 and refused:
            print(f"schedule: off (the role refuses an adaptive deployment on every host: {refused})")
        elif spec.schedule and spec.schedule_budget > 0:
            print(
                f"schedule: after the static depths, where the server's SGLang has per-batch-size adaptive "
                f"speculation (0.5.14+), at most {spec.schedule_budget} extra deployment(s): its default adaptive "
                "config, a no-speculation server when --steps has no 0, then tuned schedules (--no-schedule: off)"
            )
        else:
            print("schedule: off" + (" (--no-schedule)" if not spec.schedule else " (--schedule-budget 0)"))
        if spec.verify:
            where = spec.verify_baseline or str(out / "verify_baseline.json")
            print(
                f"verify: the no-speculation baseline {where} (deployed once unless the file is there), then each "
                "speculative configuration's outputs and acceptance after its levels (--no-verify: off)"
            )
            print(
                "verify exact: "
                + (
                    "where the release has --enable-deterministic-inference, the configurations about to be "
                    "recommended are redeployed with it and must match a deterministic baseline exactly "
                    "(at most 4 redeploys plus one no-speculation deploy; --no-verify-exact: off)"
                    if spec.verify_exact
                    else "off (--no-verify-exact): every configuration is judged by its per-deployment check"
                )
            )
        else:
            print("verify: off (--no-verify): the outputs will not be checked")
        return 0
    store.lock()  # held while the store lives: a second tuner on this --out is refused
    if stored is None and store.read_sweep("--out") is not None:
        raise BadInput("--out", f"{out}: another tuner started a sweep there just now; choose another directory")
    store.write_spec(spec, TOOL, machines, remeasured)
    if stored is not None:
        progress.line(f"resuming the sweep in {out}")
        if remeasured:
            progress.line(
                "measuring with other settings than before: " + "; ".join(remeasured) + " (the levels measured "
                "before keep what they measured; sweep.json `resumes` and the report's notes say so)"
            )
    deployer = Deployer(
        inventory=Path(spec.inventory),
        out_dir=out,
        extravars=dict(spec.extra_vars),
        project_dir=project,
        playbook=spec.playbook,
        redactor=redactor,
        timeout_s=spec.deploy_timeout,
        slots=slots,
    )
    verify = None
    if spec.verify:
        from .verify.phase import VerifyPhase
        from .verify.prompts import prompt_set, settings

        verify = VerifyPhase(
            baseline_path=Path(spec.verify_baseline) if spec.verify_baseline else out / "verify_baseline.json",
            prompts=prompt_set(spec.workload.dataset, settings()),
            log=store,
            progress=progress,
            api_key=api_key,
            tool=TOOL,
            exact=spec.verify_exact,
            recover_timeout=spec.workload.recover_timeout,
            # an -e of the flags replaces every host's; without one each slot's own (the inventory's)
            extra_flags=spec.extra_vars["sglang_server_extra_flags"]
            if isinstance(spec.extra_vars.get("sglang_server_extra_flags"), dict)
            else inv.slot_extra_flags,
        )
    sweep = Sweep(
        spec=spec,
        plan=plan,
        store=store,
        deployer=deployer,
        hosts=hosts,
        progress=progress,
        api_key=api_key,
        verify=verify,
    )
    progress.line(
        f"sweep: {len(plan.configs)} configuration(s) on {len(hosts)} host(s) "
        f"({', '.join(hosts)}), concurrency {list(spec.workload.concurrency)}; output {out}"
    )
    rc = asyncio.run(sweep.run())
    if (out / "records.jsonl").exists():
        from .present.summary import summarize

        _print_summary(summarize(store.state(), spec), out)
    return rc


def cmd_bench(a: argparse.Namespace) -> int:
    from .data.store import PLOT, RECOMMENDATION, RECORDS, REPORT, RESULTS, SCHEDULE_PLOT, SWEEP, Store
    from .run.levels import Progress
    from .run.sweep import bench_url

    spec = SweepSpec.for_bench(a)
    out = check_out_dir(a.out) if a.out else None
    api_key = api_key_from_env()
    redactor = Redactor([api_key])
    store = None
    outputs_named = (RECORDS, SWEEP, RESULTS, RECOMMENDATION, PLOT, SCHEDULE_PLOT, REPORT)
    found = {name for name in outputs_named if out is not None and (out / name).exists()}  # the user's: kept
    if out is not None:
        if (out / "records.jsonl").exists():
            raise BadInput("--out", f"{out} already holds results; choose another directory")
        if (out / "sweep.json").exists():
            # a sweep stopped before its first record: its sweep.json is what `--resume` reads
            raise BadInput("--out", f"{out} already holds a sweep (its sweep.json); choose another directory")
        store = Store(out, redactor)
        store.lock()
        if (out / "records.jsonl").exists():
            raise BadInput("--out", f"{out}: another tuner wrote results there just now; choose another directory")
        store.write_spec(spec, TOOL)
    progress = Progress(redactor=redactor, quiet=a.quiet)
    state = None
    try:
        rc, summary, state = asyncio.run(bench_url(spec, store, progress, api_key))
    except KeyboardInterrupt:
        # as `sweep` on an interrupt (run/sweep.py): the outputs of the levels measured, since the
        # directory cannot be benched again (`bench` has no --resume)
        if store is not None:
            state = store.state()
            if state.levels(measured_only=False):
                from .present.outputs import write_all

                write_all(store, spec)
        raise
    finally:
        # nothing measured (the server did not answer, its config was refused, or every warm-up
        # request failed: the reason is on stderr): the directory is left as it was found, so the
        # same command can be run again once the server is up (`bench` has no --resume)
        if out is not None and (
            not (out / RECORDS).exists() or (state is not None and not state.levels(measured_only=False))
        ):
            for name in set(outputs_named) - found:
                (out / name).unlink(missing_ok=True)
            summary = None
        if store is not None:
            store.unlock()
    if summary is not None:
        _print_summary(summary, out)
        return rc
    levels = state.levels(measured_only=False)
    if not levels:
        return rc
    # a level is (temperature, concurrency, repeat): name the first and last where they vary
    show_t = len({lv.temperature for lv in levels}) > 1
    show_r = len({lv.repeat for lv in levels}) > 1
    print(
        ("    T  " if show_t else "")
        + ("repeat  " if show_r else "")
        + "concurrency  requests ok/failed  aggregate tok/s  per-request tok/s  TTFT p50 ms  accept"
    )
    for lv in levels:
        m = lv.metrics

        def f(v: float | None, fmt: str) -> str:
            return "-" if v is None else format(float(v), fmt)

        print(
            (f"{lv.temperature:>5g}  " if show_t else "")
            + (f"{lv.repeat:>6}  " if show_r else "")
            + f"{lv.concurrency:>11}  {m.requests_ok}/{m.requests_failed:<16}  "
            f"{f(m.output_tok_s, '.1f'):>15}  {f(m.per_request_tok_s, '.1f'):>17}  "
            f"{f(m.ttft_ms_p50, '.0f'):>11}  {f(m.accept_length, '.2f')}"
        )
    return rc


def _stored_spec(d: Path) -> SweepSpec:
    from .data.store import Store

    return Store(d).read_spec() or SweepSpec()


def cmd_plot(a: argparse.Namespace) -> int:
    from .data.store import Store
    from .present.outputs import write_plot
    from .present.summary import summarize

    d = check_results_dir(a.dir, "DIR")
    s = summarize(Store(d).state(), _stored_spec(d))
    path = write_plot(d, s)
    if path is None:
        print("nothing measured to plot", file=sys.stderr)
        return 1
    print(f"plot: {path}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .data.store import Store
    from .present.outputs import write_all

    d = check_results_dir(a.dir, "DIR")
    spec = _stored_spec(d)
    if a.slo is not None:
        from .spec.slo import parse_slo

        slo = None if a.slo.strip().lower() == "none" else parse_slo(a.slo)
        spec = spec.replace(workload=dataclasses.replace(spec.workload, slo=slo))
    target = None
    if a.target_concurrency is not None:
        levels = spec.workload.concurrency
        wanted = parse_target_concurrency(a.target_concurrency, levels)
        target = list(wanted or levels)
    s = write_all(Store(d, Redactor([api_key_from_env()])), spec, target=target)
    _print_summary(s, d)
    return 0 if s.recommendation.chosen is not None else 1  # as `sweep` and `bench` say it


def cmd_verify(a: argparse.Namespace) -> int:
    from .verify.command import cmd_verify as run

    return run(a, TOOL)


def host_digests(inv: Inventory) -> dict[str, str]:
    """Per host of the sweep, a digest of its inventory variables as ansible-inventory gives them
    (untemplated): `--resume` refuses a host whose variables changed (the path of an inventory
    file says nothing of what it holds)."""
    import hashlib

    return {
        h: hashlib.sha256(json.dumps(inv.hostvars.get(h) or {}, sort_keys=True, default=str).encode()).hexdigest()[:16]
        for h in inv.hosts
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    handler = {"sweep": cmd_sweep, "bench": cmd_bench, "plot": cmd_plot, "report": cmd_report, "verify": cmd_verify}[
        args.command
    ]
    try:
        return int(handler(args))
    except BadInput as exc:
        print(f"python -m tuner {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
    except OSError as exc:
        # a file or directory the command needs and cannot have (a read-only or missing --out, a
        # full disk): its path and the reason, not a traceback
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"python -m tuner {args.command}: error:{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
