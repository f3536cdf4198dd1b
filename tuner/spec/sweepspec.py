"""What a sweep (or a one-server benchmark) is: one frozen spec that owns its CLI flags, its
identity for `--resume`, and its JSON form in sweep.json.

Each field declares its flag, its default as the user would type it, its help, the parser that
turns the typed text into the value (raising BadInput naming the flag), and whether it is part of
the sweep's identity: `--resume` continues a directory only when every identity field is equal,
because mixing measurements of two different sweeps would make every comparison in the report
wrong. (vLLM's `benchmarks/sweep` subcommands keep the same idea in typed `*Args` dataclasses
with `add_cli_args` / `from_cli_args`.)

sweep.json keeps a flat `params` mapping (field name -> JSON value) so that older directories
and other readers stay readable; `from_json` tolerates missing and unknown keys.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_utils.sglang_spec import SPEC_ALGORITHMS

from .declared import conforms, declared_types, type_name
from .flags import (
    BadInput,
    absolute_path,
    check_endpoint,
    check_url,
    limit_pattern,
    parse_concurrency,
    parse_draft_tokens,
    parse_extra_vars,
    parse_float,
    parse_length,
    parse_optional_count,
    parse_precision,
    parse_requests_per_level,
    parse_steps,
    parse_target_concurrency,
    parse_temperatures,
    parse_top_p,
    parse_topk,
    requests_for_level,
    whole_number,
)
from .slo import Slo, parse_slo
from .workload import Dataset, check_sample, dataset_flag

SWEEP_JSON_VERSION = 2
DEFAULT_LEN = 256  # synthetic prompts' input and output tokens unless given


@dataclass(frozen=True)
class Opt:
    """A field's command-line face."""

    flags: tuple[str, ...]
    default: Any  # as typed on the command line (argparse default)
    help: str
    parse: Callable[[Any], Any] | None = None  # None: the value needs other fields (see from_cli_args)
    identity: bool = True
    action: str | None = None  # argparse action ("store_true", "append", ...)
    negative: str | None = None  # a `--no-...` flag that stores False
    load: Callable[[Any], Any] | None = None  # sweep.json value -> field value (default: lists -> tuples)

    @property
    def name(self) -> str:
        """How messages name it: `--steps`, `-e/--extra-vars`."""
        return "/".join(self.flags)


def _opt(
    flags: str | tuple[str, ...],
    default: Any,
    help: str,
    parse: Callable[[Any], Any] | None = None,
    **kw: Any,
) -> dict[str, Opt]:
    return {"opt": Opt((flags,) if isinstance(flags, str) else flags, default, help, parse, **kw)}


def _int(flag: str, minimum: int, maximum: int | None = None) -> Callable[[Any], int]:
    return lambda text: whole_number(flag, text, minimum=minimum, maximum=maximum)


def _positive(flag: str) -> Callable[[Any], float]:
    return lambda text: parse_float(flag, text, above=0.0)


def _opts(cls: type) -> list[tuple[dataclasses.Field[Any], Opt]]:
    return [(f, f.metadata["opt"]) for f in dataclasses.fields(cls) if "opt" in f.metadata]


def _add_args(cls: type, group: Any) -> None:
    for f, o in _opts(cls):
        if o.action is not None:
            group.add_argument(*o.flags, dest=f.name, action=o.action, default=o.default, help=o.help)
        else:
            group.add_argument(*o.flags, dest=f.name, default=o.default, help=o.help)
        if o.negative:
            group.add_argument(o.negative, dest=f.name, action="store_false", help=f"the opposite of {o.flags[0]}")


def _parse_args(cls: type, ns: argparse.Namespace) -> dict[str, Any]:
    return {f.name: (o.parse(getattr(ns, f.name)) if o.parse else getattr(ns, f.name)) for f, o in _opts(cls)}


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _identity_value(value: Any) -> Any:
    """A value as `--resume` compares it (a dataset by its content, not its path)."""
    if hasattr(value, "identity"):
        return value.identity()
    return _jsonable(value)


def _from_json_value(f: dataclasses.Field[Any], value: Any) -> Any:
    load = f.metadata["opt"].load
    if load is not None:
        return load(value)
    if isinstance(value, list):
        return tuple(value)
    if value is None and isinstance(f.default, tuple):
        return f.default
    return value


def _from_json(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        f.name: _from_json_value(f, d[f.name]) for f in dataclasses.fields(cls) if f.name in d and "opt" in f.metadata
    }
    hints = declared_types(cls)
    for name, value in out.items():
        if not conforms(value, hints[name]):
            raise TypeError(f"{name} is {d[name]!r}, not {type_name(hints[name])}")
    return out


@dataclass(frozen=True)
class WorkloadSpec:
    """What the benchmark sends to a running server and how it measures: the same for `sweep` and
    `bench`, so a number from one means what it means in the other."""

    concurrency: tuple[int, ...] = field(
        default=(1, 4, 16, 32, 64),
        metadata=_opt(
            "--concurrency",
            "1,4,16,32,64",
            "concurrency levels, e.g. 1,4,16,32,64 (default %(default)s)",
            parse_concurrency,
        ),
    )
    input_len: int | None = field(
        default=256,
        metadata=_opt(
            "--input-len",
            "auto",
            "prompt length in tokens; auto = 256, or the dataset's own prompts (default %(default)s)",
            parse_length("--input-len"),
        ),
    )
    output_len: int | None = field(
        default=256,
        metadata=_opt(
            "--output-len",
            "auto",
            "output tokens per request (max_tokens); auto = 256, or each dataset row's reference output "
            "(default %(default)s)",
            parse_length("--output-len"),
        ),
    )
    requests_per_level: int | str | None = field(
        default=None,
        metadata=_opt(
            "--requests-per-level",
            "auto",
            "requests per level; auto = at least max(4, 2 x concurrency), then more until --precision is "
            "reached or a cap is hit; N = N, at least the concurrency; Nx = N x concurrency (at least 4) (default %(default)s)",
            parse_requests_per_level,
        ),
    )
    temperature: tuple[float, ...] = field(
        default=(0.0,),
        metadata=_opt(
            "--temperature",
            "0",
            "sampling temperature(s), e.g. 0,0.7: each is measured on every deployment (default %(default)s)",
            parse_temperatures,
            load=lambda v: parse_temperatures(",".join(str(x) for x in v) if isinstance(v, list) else v),
        ),
    )
    repeats: int = field(
        default=1,
        metadata=_opt("--repeats", "1", "measure each level N times (default %(default)s)", _int("--repeats", 1, 64)),
    )
    endpoint: str = field(
        default="generate",
        metadata=_opt(
            "--endpoint",
            "generate",
            "generate (native /generate, default), chat (/v1/chat/completions) or completions (/v1/completions)",
            check_endpoint,
        ),
    )
    ignore_eos: bool = field(
        default=True,
        metadata=_opt(
            "--ignore-eos",
            True,
            "fixed-length outputs: the server ignores EOS (default); --no-ignore-eos lets requests end at EOS",
            bool,
            action="store_true",
            negative="--no-ignore-eos",
        ),
    )
    seed: int = field(default=0, metadata=_opt("--seed", "0", "prompt seed (default %(default)s)", _int("--seed", 0)))
    warmup_requests: int = field(
        default=4,
        metadata=_opt(
            "--warmup-requests",
            "4",
            "short requests per configuration before the first level, not counted (default %(default)s)",
            _int("--warmup-requests", 0),
            identity=False,
        ),
    )
    request_timeout: float = field(
        default=600.0,
        metadata=_opt(
            "--request-timeout",
            "600",
            "seconds per request (default %(default)s)",
            _positive("--request-timeout"),
            identity=False,
        ),
    )
    target_concurrency: tuple[int, ...] | None = field(
        default=None,
        metadata=_opt(
            "--target-concurrency",
            "mix",
            "the workload the recommendation is for: a level (e.g. 4), several (e.g. 1,4), or mix = every level "
            "weighted equally (default)",
            None,
            identity=False,
        ),
    )

    top_p: float = field(
        default=1.0,
        metadata=_opt("--top-p", "1", "top_p of sampled requests (temperature > 0; default %(default)s)", parse_top_p),
    )
    dataset: Dataset | None = field(
        default=None,
        metadata=_opt(
            "--dataset",
            None,
            'prompts from a local file: ShareGPT-style JSON or OpenAI-chat JSONL (docs/tuner.md "Datasets"); '
            "default: synthetic prompts",
            dataset_flag,
            load=lambda v: Dataset.from_json(v) if isinstance(v, dict) else None,
        ),
    )
    dataset_sample: int | None = field(
        default=None,
        metadata=_opt(
            "--dataset-sample",
            "all",
            "use N rows of the dataset, drawn with --seed (default %(default)s)",
            parse_optional_count("--dataset-sample"),
        ),
    )
    precision: float = field(
        default=2.0,
        metadata=_opt(
            "--precision",
            "2%",
            "with --requests-per-level auto, a level sends requests until the 95%% interval of its "
            "throughput is within +-P%% of the mean, or a cap is hit (default %(default)s)",
            parse_precision,
            identity=False,
        ),
    )
    max_requests_per_level: int | None = field(
        default=None,
        metadata=_opt(
            "--max-requests-per-level",
            "auto",
            "the precision loop's cap on requests per level; auto = max(32, 16 x concurrency) (default %(default)s)",
            parse_optional_count("--max-requests-per-level"),
            identity=False,
        ),
    )
    max_level_s: float = field(
        default=120.0,
        metadata=_opt(
            "--max-level-s",
            "120",
            "the precision loop's cap on a level's seconds: no new request after it (default %(default)s)",
            _positive("--max-level-s"),
            identity=False,
        ),
    )
    slo: Slo | None = field(
        default=None,
        metadata=_opt(
            "--slo",
            None,
            "latency objectives, e.g. ttft_p99_ms=500,tpot_p99_ms=50,e2e_p99_ms=20000: goodput per cell, and "
            "the recommendation among the cells that meet them",
            parse_slo,
            identity=False,
            load=lambda v: Slo.from_json(v) if isinstance(v, dict) else None,
        ),
    )
    recover_timeout: float = field(
        default=600.0,
        metadata=_opt(
            "--recover-timeout",
            "600",
            "when the server goes away during a level: seconds to wait for /health before the level is "
            "measured again (default %(default)s)",
            _positive("--recover-timeout"),
            identity=False,
        ),
    )

    def __post_init__(self) -> None:
        if isinstance(self.temperature, (int, float)):  # one temperature given as a number
            object.__setattr__(self, "temperature", (float(self.temperature),))

    def requests_for(self, concurrency: int) -> int:
        """The fixed count, or the precision loop's minimum."""
        return requests_for_level(concurrency, self.requests_per_level)

    @property
    def adaptive(self) -> bool:
        """Whether levels run until `precision` (requests_per_level auto) or a fixed count."""
        return self.requests_per_level is None

    def max_requests_for(self, concurrency: int) -> int:
        if self.requests_per_level is not None:
            return self.requests_for(concurrency)
        cap = self.max_requests_per_level or max(32, 16 * concurrency)
        return max(cap, self.requests_for(concurrency))

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        _add_args(cls, parser.add_argument_group("benchmark (the same client for sweep and bench)"))

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> WorkloadSpec:
        values = _parse_args(cls, ns)
        values["target_concurrency"] = parse_target_concurrency(ns.target_concurrency, values["concurrency"])
        check_sample(values["dataset_sample"], values["dataset"])
        if values["dataset"] is None:  # synthetic prompts: 256 unless given
            values["input_len"] = values["input_len"] or DEFAULT_LEN
            values["output_len"] = values["output_len"] or DEFAULT_LEN
        return cls(**values)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WorkloadSpec:
        return cls(**_from_json(cls, d))


SEARCHES = ("grid", "model")


def _choice(flag: str, text: Any, choices: tuple[str, ...]) -> str:
    value = str(text or "").strip().lower()
    if value not in choices:
        raise BadInput(flag, f"{text!r} is not one of {', '.join(choices)}")
    return value


def _algorithm(text: Any) -> str:
    algorithm = str(text or "").strip()
    if algorithm.upper() not in SPEC_ALGORITHMS:
        raise BadInput("--algorithm", f"{text!r} is not one of SGLang's algorithms ({', '.join(SPEC_ALGORITHMS)})")
    return algorithm


@dataclass(frozen=True)
class SweepSpec:
    """A sweep (`command` "sweep": configurations deployed through the play) or a benchmark of one
    running server (`command` "bench": `url`), with its workload."""

    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    command: str = "sweep"
    steps: tuple[int, ...] = field(
        default=(1, 2, 3, 4, 5),
        metadata=_opt(
            "--steps",
            "1-5",
            "speculative_num_steps values: 1-5 or 1,2,4 (0 = no speculation; default %(default)s)",
            parse_steps,
        ),
    )
    topk: tuple[int, ...] = field(
        default=(1,), metadata=_opt("--topk", "1", "speculative_eagle_topk values (default %(default)s)", parse_topk)
    )
    draft_tokens: tuple[int | None, ...] = field(
        default=(None,),
        metadata=_opt(
            "--draft-tokens",
            "auto",
            "speculative_num_draft_tokens values, or auto (steps + 1 for topk 1; default)",
            parse_draft_tokens,
        ),
    )
    algorithm: str = field(
        default="NEXTN", metadata=_opt("--algorithm", "NEXTN", "spec_algorithm (default %(default)s)", _algorithm)
    )
    inventory: str | None = field(
        default=None,
        metadata=_opt("--inventory", None, "Ansible inventory (default: the project's inventory/emulator.yml)", None),
    )
    # hosts may be added or left out on --resume (each host's machine is held by its digest in sweep.json)
    limit: str | None = field(
        default=None, metadata=_opt("--limit", None, "Ansible host pattern to sweep on", limit_pattern, identity=False)
    )
    extra_vars: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=_opt(
            ("-e", "--extra-vars"),
            [],
            "passed to the play: key=value, @file.yml|json, or a YAML/JSON mapping (repeatable)",
            parse_extra_vars,
            action="append",
        ),
    )
    playbook: str | None = field(
        default=None, metadata=_opt("--playbook", None, "the deploy play (default playbooks/deploy.yml)", None)
    )
    search: str = field(
        default="model",
        metadata=_opt(
            "--search",
            "model",
            "model (default): fit a model of acceptance, step time and capacity to what was measured and deploy "
            "only configurations that could still win a level (what it costs and how often it is right: "
            "bench/search_cost.md, docs/tuner.md); grid: deploy "
            "every configuration in order (with the early stop)",
            lambda text: _choice("--search", text, SEARCHES),
            identity=False,
        ),
    )
    early_stop: bool = field(
        default=True,
        metadata=_opt(
            "--no-early-stop",
            True,
            "sweep every configuration even when throughput has passed its peak at every level",
            None,
            identity=False,
            action="store_false",
        ),
    )
    schedule: bool = field(
        default=True,
        metadata=_opt(
            "--no-schedule",
            True,
            "skip the schedule phase: after the static sweep the tuner builds a per-batch-size schedule from "
            "the per-level winners and measures it and SGLang's default adaptive config, when the server's "
            "SGLang version runs per-batch-size adaptive speculation with 0-step buckets (0.5.14+; docs/tuner.md)",
            None,
            identity=False,
            action="store_false",
        ),
    )
    schedule_budget: int = field(
        default=4,
        metadata=_opt(
            "--schedule-budget",
            "4",
            "deployments the schedule phase may make beyond the static sweep: SGLang's default adaptive "
            "config, a no-speculation server when --steps has no 0, then tuned adaptive configs (default "
            "%(default)s; 0 measures nothing beyond the static sweep)",
            _int("--schedule-budget", 0),
            identity=False,
        ),
    )
    deploy_best: bool = field(
        default=False,
        metadata=_opt(
            "--deploy-best",
            False,
            "deploy the recommendation at the end and verify it came up",
            None,
            identity=False,
            action="store_true",
        ),
    )
    verify: bool = field(
        default=True,
        metadata=_opt(
            "--no-verify",
            True,
            "skip the correctness gate: by default the no-speculation baseline is deployed once and each "
            "speculative configuration's greedy outputs, loops and acceptance drift are checked after its levels; "
            'a configuration that fails is never recommended (docs/tuner.md "verify")',
            None,
            identity=False,
            action="store_false",
        ),
    )
    verify_exact: bool = field(
        default=True,
        metadata=_opt(
            "--verify-exact",
            True,
            "after the sweep, where the SGLang release has --enable-deterministic-inference (0.5.3 on), redeploy the "
            "configurations about to be recommended with it and require 100%% exact match with a deterministic "
            "no-speculation baseline; a failing one is excluded and the next pick checked, at most 4 redeploys "
            '(default on; docs/tuner.md "verify")',
            None,
            identity=False,
            action="store_true",
            negative="--no-verify-exact",
        ),
    )
    verify_baseline: str | None = field(
        default=None,
        metadata=_opt(
            "--verify-baseline",
            None,
            "the baseline outputs file: reused when it is there (one of another model, SGLang version or prompt "
            "set is refused), else written at the start (default: OUT/verify_baseline.json)",
            None,
            identity=False,
        ),
    )
    # Above the role's gate (1800 s) and rollback: a play stopped from outside finishes neither.
    deploy_timeout: float = field(
        default=4000.0,
        metadata=_opt(
            "--deploy-timeout",
            "4000",
            "seconds per deploy run; longer than the role's gate and rollback, which a play stopped from "
            "outside cannot finish (default %(default)s)",
            _positive("--deploy-timeout"),
            identity=False,
        ),
    )
    repeat_deploys: int = field(
        default=1,
        metadata=_opt(
            "--repeat-deploys",
            "1",
            "deploy each configuration N times (a restart each time), measuring every level on each: "
            "the intervals then cover restart-to-restart noise (default %(default)s)",
            _int("--repeat-deploys", 1),
            identity=False,
        ),
    )
    confirm: int = field(
        default=2,
        metadata=_opt(
            "--confirm",
            "2",
            "after the static depths, redeploy the close contenders up to N times (extra server starts, "
            "each measuring the sweep's most precise level) and build every interval on the "
            "deployment-to-deployment spread they show, so that "
            'verdicts survive a restart; 0 = off (default %(default)s; docs/tuner.md "Verdicts across restarts")',
            _int("--confirm", 0),
            identity=False,
        ),
    )
    url: str | None = None  # bench: the server benchmarked

    # -- command line ------------------------------------------------------------------------
    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        _add_args(cls, parser)
        WorkloadSpec.add_cli_args(parser)

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace, project: Path) -> SweepSpec:
        """The command line's sweep (else BadInput naming the flag); paths absolute, for the identity."""
        workload = WorkloadSpec.from_cli_args(ns)
        values = _parse_args(cls, ns)
        values["inventory"] = absolute_path(ns.inventory or str(project / "inventory" / "emulator.yml"), "--inventory")
        values["playbook"] = absolute_path(ns.playbook or "playbooks/deploy.yml", "--playbook", project)
        return cls(workload=workload, command="sweep", **values)

    @classmethod
    def for_bench(cls, ns: argparse.Namespace) -> SweepSpec:
        return cls(workload=WorkloadSpec.from_cli_args(ns), command="bench", url=check_url(ns.url))

    def replace(self, **changes: Any) -> SweepSpec:
        return dataclasses.replace(self, **changes)

    # -- sweep.json ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The flat `params` of sweep.json."""
        out: dict[str, Any] = {"command": self.command}
        for f, _o in _opts(WorkloadSpec):
            out[f.name] = _jsonable(getattr(self.workload, f.name))
        for f, _o in _opts(SweepSpec):
            if self.command == "sweep":
                out[f.name] = _jsonable(getattr(self, f.name))
        if self.url is not None:
            out["url"] = self.url
        return out

    @classmethod
    def from_json(cls, params: Mapping[str, Any]) -> SweepSpec:
        return cls(
            workload=WorkloadSpec.from_json(params),
            command=str(params.get("command") or "sweep"),
            url=params.get("url"),
            **_from_json(cls, params),
        )

    def identity(self) -> dict[str, Any]:
        """What must be equal for `--resume` to continue a directory."""
        out: dict[str, Any] = {"command": self.command, "url": self.url}
        for cls, obj in ((WorkloadSpec, self.workload), (SweepSpec, self)):
            for f, o in _opts(cls):
                if o.identity:
                    out[f.name] = _identity_value(getattr(obj, f.name))
        return out

    def identity_diff(self, stored: Mapping[str, Any], scrub: Callable[[Any], Any] = lambda v: v) -> list[str]:
        """How a stored sweep (its sweep.json params) differs from this one, naming the flags; `scrub`
        masks this one's values as the stored file's were (a path holding the API key matches)."""
        old, new = SweepSpec.from_json(stored).identity(), scrub(self.identity())
        names = {f.name: o.name for cls in (WorkloadSpec, SweepSpec) for f, o in _opts(cls)}
        diffs = []
        for key, value in new.items():
            if json.dumps(old.get(key), sort_keys=True) != json.dumps(value, sort_keys=True):
                diffs.append(f"{names.get(key, key)} was {old.get(key)!r}, now {value!r}")
        return diffs
