"""`python -m tuner verify`: the gate against running servers (docs/tuner.md "verify").

    python -m tuner verify --url http://nospec:30000 --baseline base.json --capture
    python -m tuner verify --url http://spec-a:30000 --url http://spec-b:30000 --baseline base.json
    python -m tuner verify --url http://tuned:30000 --baseline base.json --adaptive-config tuned.json

With --capture the server is the no-speculation deployment and its greedy outputs are written to
--baseline (once per campaign; an existing file that fits is reused, one that does not is
refused). Without it, each --url is a configuration checked against the baseline. Exit status as
the other commands: 0 every configuration passed, 1 one failed (or a server did not answer),
2 bad input naming the flag (a baseline of another model, server version or prompt set included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sglang_utils import sglang_verify as rules

from ..data.redact import Redactor, api_key_from_env
from ..present import verify_text as text
from ..run.client import BenchClient, ClientOptions
from ..spec.flags import BadInput, check_file_path, check_out_dir, check_url, whole_number
from ..spec.workload import load_dataset
from . import baseline as baseline_mod
from . import gate, probe
from .prompts import PromptSet, prompt_set, settings

T = TypeVar("T")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="check running configurations' greedy outputs and acceptance against a no-speculation baseline",
        description="The correctness and acceptance-drift gate: greedy outputs of each --url against stored "
        "outputs of a no-speculation deployment (--baseline; --capture writes it), loops in long outputs, "
        "the acceptance length against --measured-accept and its drift over the gate's run. "
        "Exit 0: all passed; 1: a configuration failed; 2: bad input.",
    )
    p.add_argument(
        "--url", action="append", required=True, help="a server to check (repeatable), e.g. http://127.0.0.1:30000"
    )
    p.add_argument("--baseline", required=True, help="the baseline JSON file (written with --capture, else read)")
    p.add_argument(
        "--capture",
        action="store_true",
        help="the single --url is the no-speculation deployment: write its outputs to --baseline",
    )
    p.add_argument(
        "--measured-accept",
        action="append",
        default=None,
        help="the acceptance length the sweep measured, one per --url in order (default: only the 1.05 floor applies)",
    )
    p.add_argument(
        "--adaptive-config",
        action="append",
        default=None,
        help="the JSON file a server was started with (--speculative-adaptive-config), one per --url in order, "
        "'none' for a static one: a config that pins 0 steps where the gate runs is not held to the floor "
        "and the collapse rule (default: every server is)",
    )
    p.add_argument(
        "--dataset", default=None, help="the prompt set (default: the shipped tuner/spec/datasets/sgt-mixed-v1.jsonl)"
    )
    p.add_argument("--short-prompts", default=None, help="short greedy prompts (default 24)")
    p.add_argument("--short-tokens", default=None, help="new tokens per short prompt (default 48)")
    p.add_argument("--long-prompts", default=None, help="long outputs for loops and drift (default 4)")
    p.add_argument("--long-tokens", default=None, help="new tokens per long output (default 384)")
    p.add_argument("--out", default=None, help="write verify.json and verify.md here (optional)")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")


def _per_url(values: list[str] | None, n: int, flag: str, what: str, parse: Callable[[str], T]) -> list[T | None]:
    """A flag given once per --url, in order (each value through `parse`), or None for each URL
    when the flag is not given; another count is bad input naming the flag."""
    if not values:
        return [None] * n
    if len(values) != n:
        raise BadInput(flag, f"give one {what} per --url ({n}), got {len(values)}")
    return [parse(v) for v in values]


def _accept(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise BadInput("--measured-accept", f"{v!r} is not a number") from None
    if not x >= 1.0:
        raise BadInput("--measured-accept", f"{v} is below 1 (an acceptance length counts the bonus token)")
    return x


def _exemption(f: str) -> str | None:
    """Why the floor and the collapse rule do not apply to a server started with the adaptive config
    in file `f` (sglang_verify.floor_exemption, the rule the sweep's gate and the role's use), or
    None when they do ('none': a static server). A server's /server_info names its adaptive config
    file, on the server's disk, not what it holds: so the user gives the file."""
    if f.lower() == "none":
        return None
    try:
        doc = json.loads(Path(f).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput("--adaptive-config", f"{f}: {exc}") from None
    try:
        return rules.floor_exemption(doc, probe.CONCURRENCY)
    except (ValueError, AttributeError, TypeError) as exc:
        raise BadInput("--adaptive-config", f"{f}: SGLang would refuse it: {exc}") from None


def _prompt_set(a: argparse.Namespace) -> PromptSet:
    conf = settings(
        short_prompts=None if a.short_prompts is None else whole_number("--short-prompts", a.short_prompts, minimum=1),
        short_tokens=None if a.short_tokens is None else whole_number("--short-tokens", a.short_tokens, minimum=1),
        long_prompts=None if a.long_prompts is None else whole_number("--long-prompts", a.long_prompts, minimum=1),
        long_tokens=None if a.long_tokens is None else whole_number("--long-tokens", a.long_tokens, minimum=16),
    )
    ds = load_dataset(a.dataset) if a.dataset else None
    return prompt_set(ds, conf)


def _client(url: str) -> BenchClient:
    return BenchClient(ClientOptions(url=url, api_key=api_key_from_env(), request_timeout=300.0))


async def _capture(url: str, ps: PromptSet, path: Path, tool: str) -> int:
    async with _client(url) as c:
        ident = await probe.identity(c)
        if ident.get("speculative"):
            raise BadInput(
                "--url",
                f"{url} runs speculative decoding ({ident['speculative']}); --capture needs the "
                "no-speculation deployment (spec_steps 0)",
            )
        if path.exists():
            old = baseline_mod.read(path)
            baseline_mod.check(old, ident, ps, f"--baseline {path}")
            baseline_mod.check_rule_inputs(old, ident, f"--baseline {path}")
            print(
                f"baseline {path} already holds this server's outputs (SGLang {old['server_version']}, {old['model']}); kept"
            )
            return 0
        doc = await gate.capture(c, ps, tool)
    baseline_mod.write(path, doc)
    print(
        f"baseline: {path}: {len(doc['short'])} short + {len(doc['long'])} long greedy outputs of {doc['model']} "
        f"(SGLang {doc['server_version']}, deterministic inference {'on' if doc['deterministic'] else 'off'}), "
        f"{doc['requests']} requests in {doc['seconds']:.1f} s"
    )
    return 0


async def _check(
    urls: list[str],
    accepts: list[float | None],
    exempt: list[str | None],
    ps: PromptSet,
    base: dict[str, Any],
    where: str,
) -> list[dict[str, Any]]:
    out = []
    for url, acc, why in zip(urls, accepts, exempt, strict=True):
        async with _client(url) as c:
            v = await gate.check(c, ps, base, acc, where, floor=why is None)
        if why is not None:
            v["acceptance_vs_sweep"] = why
        v["url"] = url
        out.append(v)
    return out


def cmd_verify(a: argparse.Namespace, tool: str) -> int:
    urls = [check_url(u, "--url") for u in a.url]  # as bench's: a port past 65535 is bad input
    path = Path(a.baseline)
    ps = _prompt_set(a)
    out = check_out_dir(a.out) if a.out else None
    accepts = _per_url(a.measured_accept, len(urls), "--measured-accept", "value", _accept)
    exempt = _per_url(a.adaptive_config, len(urls), "--adaptive-config", "file (or 'none')", _exemption)
    try:
        if a.capture:
            if len(urls) != 1:
                raise BadInput("--url", "--capture takes exactly one --url: the no-speculation deployment")
            if not path.exists():
                check_file_path(a.baseline, "--baseline")  # written after the capture's requests
            return asyncio.run(_capture(urls[0], ps, path, tool))
        base = baseline_mod.read(path)
        verdicts = asyncio.run(_check(urls, accepts, exempt, ps, base, f"--baseline {path}"))
    except BadInput:
        raise
    except baseline_mod.BaselineError as exc:
        raise BadInput("--baseline", str(exc)) from None
    except probe.ANSWER_ERRORS as exc:
        print(f"python -m tuner verify: the server did not answer the gate: {probe.failure_text(exc)}", file=sys.stderr)
        return 1
    lines = [
        f"# Outputs checked against {path} ({base.get('prompt_set')}, SGLang {base.get('server_version')}, {base.get('model')})",
        "",
    ]
    for v in verdicts:
        spec = (v.get("server") or {}).get("speculative") or {}
        label = f"{v['url']} ({', '.join(f'{k} {x}' for k, x in spec.items() if x is not None) or 'no speculation'})"
        lines += text.block(label, v)
    if a.json:
        print(json.dumps(verdicts, indent=1))
    else:
        print("\n".join(lines))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        scrub = Redactor([api_key_from_env()]).scrub  # as every file the tuner writes
        (out / "verify.json").write_text(scrub(json.dumps(verdicts, indent=1)) + "\n", encoding="utf-8")
        (out / "verify.md").write_text(scrub("\n".join(lines)) + "\n", encoding="utf-8")
    return 0 if all(v["passed"] for v in verdicts) else 1
