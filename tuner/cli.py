"""`python -m tuner` (also `sglang-tune`): sweep, bench, plot, report.

Exit status (design.md "The tuner"): 0 done, 1 failed, 2 bad input. Every flag value is checked
before anything is deployed or sent; a bad one exits 2 with a message that names the flag.
The API key is read from the environment (SGLANG_API_KEY, else OPENAI_API_KEY), never from a
flag: a key on the command line would show in `ps` and in shell history.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sglang_filters.sglang_flags import SPEC_ALGORITHMS

from . import __version__
from .redact import API_KEY_ENV, API_KEY_FALLBACK_ENV, Redactor, api_key_from_env
from .specs import (
    BadInput,
    check_endpoint,
    check_inventory,
    check_out_dir,
    check_results_dir,
    check_url,
    parse_concurrency,
    parse_draft_tokens,
    parse_extra_vars,
    parse_positive_float,
    parse_positive_int,
    parse_requests_per_level,
    parse_steps,
    parse_target_concurrency,
    parse_temperature,
    parse_topk,
    plan_configs,
)

DEFAULT_CONCURRENCY = "1,4,16,32,64"
DEFAULT_STEPS = "1-5"
DEFAULT_INPUT_LEN = 256
DEFAULT_OUTPUT_LEN = 256


class _Parser(argparse.ArgumentParser):
    """argparse already exits 2 naming the flag; keep its message, add the command's help hint."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _add_bench_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("benchmark (the same client for sweep and bench)")
    g.add_argument(
        "--concurrency", default=DEFAULT_CONCURRENCY, help="concurrency levels, e.g. 1,4,16,32,64 (default %(default)s)"
    )
    g.add_argument("--input-len", default=str(DEFAULT_INPUT_LEN), help="prompt length in tokens (default %(default)s)")
    g.add_argument(
        "--output-len",
        default=str(DEFAULT_OUTPUT_LEN),
        help="output tokens per request (max_tokens; default %(default)s)",
    )
    g.add_argument(
        "--requests-per-level",
        default="auto",
        help="requests per level; auto = max(4, 2 x concurrency) (default %(default)s)",
    )
    g.add_argument("--temperature", default="0", help="sampling temperature (default %(default)s)")
    g.add_argument("--repeats", default="1", help="measure each level N times (default %(default)s)")
    g.add_argument(
        "--endpoint",
        default="generate",
        help="generate (native /generate, default), chat (/v1/chat/completions) or completions (/v1/completions)",
    )
    g.add_argument(
        "--ignore-eos",
        dest="ignore_eos",
        action="store_true",
        default=True,
        help="fixed-length outputs: the server ignores EOS (default)",
    )
    g.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false", help="let requests end at EOS")
    g.add_argument(
        "--warmup-requests",
        default="4",
        help="short requests per configuration before the first level, not counted (default %(default)s)",
    )
    g.add_argument("--request-timeout", default="600", help="seconds per request (default %(default)s)")
    g.add_argument("--seed", default="0", help="prompt seed (default %(default)s)")
    g.add_argument(
        "--target-concurrency",
        default="mix",
        help="the workload the recommendation is for: a level (e.g. 4), several "
        "(e.g. 1,4), or mix = every level weighted equally (default)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tuner",
        description="Deploy SGLang configurations, benchmark them, plot and recommend "
        f"speculative-decoding settings. API key: ${API_KEY_ENV} "
        f"(or ${API_KEY_FALLBACK_ENV}).",
    )
    parser.add_argument("--version", action="version", version=f"sglang-tune {__version__}")
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
    sw.add_argument(
        "--steps",
        default=DEFAULT_STEPS,
        help="speculative_num_steps values: 1-5 or 1,2,4 (0 = no speculation; default %(default)s)",
    )
    sw.add_argument("--topk", default="1", help="speculative_eagle_topk values (default %(default)s)")
    sw.add_argument(
        "--draft-tokens",
        default="auto",
        help="speculative_num_draft_tokens values, or auto (steps + 1 for topk 1; default)",
    )
    sw.add_argument("--algorithm", default="NEXTN", help="spec_algorithm (default %(default)s)")
    sw.add_argument(
        "--inventory", default=None, help="Ansible inventory (default: inventory/emulator.yml of the project)"
    )
    sw.add_argument("--limit", default=None, help="Ansible host pattern to sweep on")
    sw.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="passed to the play: key=value, @file.yml|json, or a YAML/JSON mapping (repeatable)",
    )
    sw.add_argument("--playbook", default=None, help="the deploy play (default playbooks/deploy.yml)")
    sw.add_argument("--resume", action="store_true", help="continue the sweep in --out without redoing finished points")
    sw.add_argument(
        "--deploy-best", action="store_true", help="deploy the recommendation at the end and verify it came up"
    )
    sw.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        default=True,
        help="sweep every configuration even when throughput has passed its peak at every level",
    )
    sw.add_argument("--deploy-timeout", default="1800", help="seconds per deploy run (default %(default)s)")
    sw.add_argument(
        "--dry-run", action="store_true", help="print the configurations, levels and hosts, then exit without deploying"
    )
    sw.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_bench_flags(sw)

    be = sub.add_parser(
        "bench",
        help="benchmark a running server without deploying",
        description="Benchmark a running SGLang server with the sweep's client and "
        "metrics; reads /server_info for its capacity and speculative settings.",
    )
    be.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:30000")
    be.add_argument("--out", default=None, help="write results.csv, plot and report here (optional)")
    be.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_bench_flags(be)

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
    return parser


def _bench_settings(a: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from .sweep import BenchSettings

    levels = parse_concurrency(a.concurrency)
    s = BenchSettings(
        concurrency=levels,
        input_len=parse_positive_int("--input-len", a.input_len),
        output_len=parse_positive_int("--output-len", a.output_len),
        requests_per_level=parse_requests_per_level(a.requests_per_level),
        temperature=parse_temperature(a.temperature),
        repeats=parse_positive_int("--repeats", a.repeats),
        endpoint=check_endpoint(a.endpoint),
        ignore_eos=a.ignore_eos,
        warmup_requests=parse_positive_int("--warmup-requests", a.warmup_requests, minimum=0),
        request_timeout=parse_positive_float("--request-timeout", a.request_timeout),
        seed=parse_positive_int("--seed", a.seed, minimum=0),
        api_key=api_key_from_env(),
    )
    target = parse_target_concurrency(a.target_concurrency, levels)
    params = {
        "concurrency": levels,
        "input_len": s.input_len,
        "output_len": s.output_len,
        "requests_per_level": s.requests_per_level,
        "temperature": s.temperature,
        "repeats": s.repeats,
        "endpoint": s.endpoint,
        "ignore_eos": s.ignore_eos,
        "seed": s.seed,
        "warmup_requests": s.warmup_requests,
        "target_concurrency": target,
    }
    return s, params


def _identity_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    from .sweep import IDENTITY_KEYS

    flag = {
        "steps": "--steps",
        "topk": "--topk",
        "draft_tokens": "--draft-tokens",
        "algorithm": "--algorithm",
        "concurrency": "--concurrency",
        "input_len": "--input-len",
        "output_len": "--output-len",
        "requests_per_level": "--requests-per-level",
        "temperature": "--temperature",
        "repeats": "--repeats",
        "endpoint": "--endpoint",
        "ignore_eos": "--ignore-eos",
        "seed": "--seed",
        "inventory": "--inventory",
        "limit": "--limit",
        "extra_vars": "-e/--extra-vars",
        "playbook": "--playbook",
    }
    diffs = []
    for k in IDENTITY_KEYS:
        if json.dumps(old.get(k), sort_keys=True) != json.dumps(new.get(k), sort_keys=True):
            diffs.append(f"{flag.get(k, k)} was {old.get(k)!r}, now {new.get(k)!r}")
    return diffs


def _print_summary(summary: Any, out: Path | None) -> None:
    if summary is None:
        return
    rec = summary.recommendation
    print("concurrency  best spec_steps  aggregate tok/s  per-request tok/s")
    for c, ch in sorted(summary.choices.items()):
        pr = ch.chosen.per_request_mean
        print(
            f"{c:>11}  {ch.chosen.spec_steps:>15}  {ch.chosen.mean:>15.1f}  "
            f"{'-' if pr is None else format(pr, '.1f'):>17}"
        )
    if rec.chosen is not None:
        print(f"recommended: spec_steps {rec.chosen.spec_steps} ({rec.chosen.config_id}): {rec.reason}")
    else:
        print(f"no recommendation: {rec.reason}")
    if out is not None:
        for label, name in (("results", "results.csv"), ("plot", "throughput_vs_steps.png"), ("report", "report.md")):
            if (out / name).exists():
                print(f"{label + ':':8} {out / name}")


def cmd_sweep(a: argparse.Namespace) -> int:
    from .deploy import Deployer, InventoryError, project_root, read_inventory
    from .store import Store
    from .sweep import Progress, Sweep

    settings, params = _bench_settings(a)
    steps = parse_steps(a.steps)
    topks = parse_topk(a.topk)
    drafts = parse_draft_tokens(a.draft_tokens)
    algorithm = (a.algorithm or "").strip()
    if algorithm.upper() not in SPEC_ALGORITHMS:
        raise BadInput(
            "--algorithm", f"{a.algorithm!r} is not one of SGLang's algorithms ({', '.join(SPEC_ALGORITHMS)})"
        )
    extra = parse_extra_vars(a.extra_vars)
    deploy_timeout = parse_positive_float("--deploy-timeout", a.deploy_timeout)
    out = check_out_dir(a.out)
    project = project_root()
    inventory = (
        check_inventory(a.inventory) if a.inventory else check_inventory(str(project / "inventory" / "emulator.yml"))
    )
    playbook = a.playbook or "playbooks/deploy.yml"
    pb_path = Path(playbook) if Path(playbook).exists() else project / playbook
    if not pb_path.is_file():
        raise BadInput("--playbook", f"{playbook} does not exist")
    plan = plan_configs(steps, topks, drafts, algorithm, play_vars=extra)
    if not plan.configs:
        raise BadInput(
            "--steps",
            "no configuration SGLang can run: " + "; ".join(f"{c.config_id}: {why}" for c, why in plan.infeasible),
        )
    params.update(
        {
            "command": "sweep",
            "steps": steps,
            "topk": topks,
            "draft_tokens": drafts,
            "algorithm": algorithm,
            "inventory": str(inventory.resolve()),
            "limit": a.limit,
            "extra_vars": extra,
            "playbook": str(pb_path.resolve()),
            "early_stop": a.early_stop,
            "deploy_best": a.deploy_best,
        }
    )
    redactor = Redactor([settings.api_key])
    store = Store(out, redactor)
    old = store.read_sweep() if out.is_dir() else None
    if old is not None:
        if not a.resume:
            raise BadInput(
                "--out", f"{out} already holds a sweep; add --resume to continue it, or choose another directory"
            )
        diffs = _identity_diff(old.get("params") or {}, params)
        if diffs:
            raise BadInput("--resume", f"{out} holds a different sweep: " + "; ".join(diffs))
    elif out.is_dir() and (out / "records.jsonl").exists():
        raise BadInput("--out", f"{out} holds records but no sweep.json; choose another directory")
    try:
        inv = read_inventory(inventory, a.limit, project)
    except InventoryError as exc:
        raise BadInput("--inventory", f"{inventory}: {exc}") from None
    slots = inv.slots()
    hosts = list(slots)  # a host, or a multi-node group deployed as one
    if not hosts:
        raise BadInput(
            "--limit" if a.limit else "--inventory",
            f"no host of group sglang_servers in {inventory}" + (f" matches {a.limit!r}" if a.limit else ""),
        )
    progress = Progress(redactor=redactor, quiet=a.quiet)
    if a.dry_run:
        print("hosts: " + ", ".join(h if slots[h] == [h] else f"{h} ({', '.join(slots[h])})" for h in hosts))
        for cfg in plan.configs:
            print(f"deploy {cfg.config_id}: {json.dumps({**extra, **cfg.extravars()})}")
        for cfg, why in plan.infeasible:
            print(f"skip {cfg.config_id}: {why}")
        from .specs import requests_for_level

        print(
            "levels: "
            + ", ".join(
                f"C={c} x {requests_for_level(c, settings.requests_per_level)} requests" for c in settings.concurrency
            )
            + f", {settings.repeats} repeat(s)"
        )
        return 0
    store.ensure()
    if old is None:
        store.write_sweep({"version": 1, "tool": f"sglang-tune {__version__}", "params": params})
    else:
        old["params"] = params
        store.write_sweep(old)
        progress.line(f"resuming the sweep in {out}")
    deployer = Deployer(
        inventory=inventory,
        out_dir=out,
        extravars=extra,
        project_dir=project,
        playbook=str(pb_path.resolve()),
        redactor=redactor,
        timeout_s=deploy_timeout,
        slots=slots,
    )
    target = params.get("target_concurrency")
    sweep = Sweep(
        params=params,
        plan=plan,
        settings=settings,
        store=store,
        deployer=deployer,
        hosts=hosts,
        progress=progress,
        early_stop=a.early_stop,
        deploy_best=a.deploy_best,
        target=target,
    )
    progress.line(
        f"sweep: {len(plan.configs)} configuration(s) on {len(hosts)} host(s) "
        f"({', '.join(hosts)}), concurrency {settings.concurrency}; output {out}"
    )
    rc = asyncio.run(sweep.run())
    if (out / "records.jsonl").exists():
        from .outputs import summarize

        _print_summary(summarize(store.records(), params, target), out)
    return rc


def cmd_bench(a: argparse.Namespace) -> int:
    from .store import Store
    from .sweep import Progress, bench_url

    url = check_url(a.url)
    settings, params = _bench_settings(a)
    params.update({"command": "bench", "url": url})
    out = check_out_dir(a.out) if a.out else None
    redactor = Redactor([settings.api_key])
    store = None
    if out is not None:
        if (out / "records.jsonl").exists():
            raise BadInput("--out", f"{out} already holds results; choose another directory")
        store = Store(out, redactor)
        store.write_sweep({"version": 1, "tool": f"sglang-tune {__version__}", "params": params})
    progress = Progress(redactor=redactor, quiet=a.quiet)
    rc, summary, rows = asyncio.run(bench_url(url, settings, store, progress, params))
    if summary is not None:
        _print_summary(summary, out)
    else:
        print("concurrency  requests ok/failed  aggregate tok/s  per-request tok/s  TTFT p50 ms  accept")
        for r in rows:

            def f(k: str, fmt: str) -> str:
                v = r.get(k)
                return "-" if v in (None, "") else format(float(v), fmt)

            print(
                f"{r.get('concurrency'):>11}  {r.get('requests_ok')}/{r.get('requests_failed'):<16}  "
                f"{f('output_tok_s', '.1f'):>15}  {f('per_request_tok_s', '.1f'):>17}  "
                f"{f('ttft_ms_p50', '.0f'):>11}  {f('accept_length', '.2f')}"
            )
    return rc


def _stored_params(d: Path) -> dict[str, Any]:
    p = d / "sweep.json"
    if p.is_file():
        return (json.loads(p.read_text()).get("params")) or {}
    return {}


def cmd_plot(a: argparse.Namespace) -> int:
    from .outputs import summarize, write_plot
    from .store import Store

    d = check_results_dir(a.dir, "DIR")
    store = Store(d)
    s = summarize(store.records(), _stored_params(d))
    path = write_plot(d, s)
    if path is None:
        print("nothing measured to plot", file=sys.stderr)
        return 1
    print(f"plot: {path}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .outputs import write_all
    from .store import Store

    d = check_results_dir(a.dir, "DIR")
    params = _stored_params(d)
    target = None
    if a.target_concurrency is not None:
        levels = list(params.get("concurrency") or [])
        target = parse_target_concurrency(a.target_concurrency, levels) or list(levels)
    store = Store(d, Redactor([api_key_from_env()]))
    s = write_all(store, params, target=target)
    _print_summary(s, d)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    handler = {"sweep": cmd_sweep, "bench": cmd_bench, "plot": cmd_plot, "report": cmd_report}[args.command]
    try:
        return handler(args)
    except BadInput as exc:
        print(f"python -m tuner {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
