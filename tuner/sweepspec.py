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

from sglang_filters.sglang_flags import SPEC_ALGORITHMS

from .flags import (
    BadInput,
    check_endpoint,
    check_existing,
    check_url,
    parse_concurrency,
    parse_draft_tokens,
    parse_extra_vars,
    parse_float,
    parse_requests_per_level,
    parse_steps,
    parse_target_concurrency,
    parse_temperature,
    parse_topk,
    requests_for_level,
    whole_number,
)

SWEEP_JSON_VERSION = 2


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


def _int(flag: str, minimum: int) -> Callable[[Any], int]:
    return lambda text: whole_number(flag, text, minimum=minimum)


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
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _from_json_value(f: dataclasses.Field[Any], value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if value is None and isinstance(f.default, tuple):
        return f.default
    return value


def _from_json(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        f.name: _from_json_value(f, d[f.name]) for f in dataclasses.fields(cls) if f.name in d and "opt" in f.metadata
    }


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
    input_len: int = field(
        default=256,
        metadata=_opt("--input-len", "256", "prompt length in tokens (default %(default)s)", _int("--input-len", 1)),
    )
    output_len: int = field(
        default=256,
        metadata=_opt(
            "--output-len",
            "256",
            "output tokens per request (max_tokens; default %(default)s)",
            _int("--output-len", 1),
        ),
    )
    requests_per_level: int | None = field(
        default=None,
        metadata=_opt(
            "--requests-per-level",
            "auto",
            "requests per level; auto = max(4, 2 x concurrency) (default %(default)s)",
            parse_requests_per_level,
        ),
    )
    temperature: float = field(
        default=0.0,
        metadata=_opt("--temperature", "0", "sampling temperature (default %(default)s)", parse_temperature),
    )
    repeats: int = field(
        default=1,
        metadata=_opt("--repeats", "1", "measure each level N times (default %(default)s)", _int("--repeats", 1)),
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

    def requests_for(self, concurrency: int) -> int:
        return requests_for_level(concurrency, self.requests_per_level)

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        _add_args(cls, parser.add_argument_group("benchmark (the same client for sweep and bench)"))

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> WorkloadSpec:
        values = _parse_args(cls, ns)
        values["target_concurrency"] = parse_target_concurrency(ns.target_concurrency, values["concurrency"])
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
    limit: str | None = field(default=None, metadata=_opt("--limit", None, "Ansible host pattern to sweep on", None))
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
        default="grid",
        metadata=_opt(
            "--search",
            "grid",
            "grid: deploy every configuration in order (default); model: fit a model of acceptance, step time "
            "and capacity to what was measured, deploy only configurations that could still win a level "
            "(docs/tuner.md)",
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
    deploy_timeout: float = field(
        default=1800.0,
        metadata=_opt(
            "--deploy-timeout",
            "1800",
            "seconds per deploy run (default %(default)s)",
            _positive("--deploy-timeout"),
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
        """The sweep the command line asks for; BadInput naming the flag otherwise. Paths are made
        absolute, so the identity does not depend on the directory the user ran from."""
        workload = WorkloadSpec.from_cli_args(ns)
        values = _parse_args(cls, ns)
        inventory = ns.inventory or str(project / "inventory" / "emulator.yml")
        values["inventory"] = str(check_existing(inventory, "--inventory").resolve())
        playbook = ns.playbook or "playbooks/deploy.yml"
        pb = Path(playbook) if Path(playbook).exists() else project / playbook
        if not pb.is_file():
            raise BadInput("--playbook", f"{playbook} does not exist")
        values["playbook"] = str(pb.resolve())
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
                    out[f.name] = _jsonable(getattr(obj, f.name))
        return out

    def identity_diff(self, stored: Mapping[str, Any]) -> list[str]:
        """How a stored sweep (its sweep.json params) differs from this one, naming the flags."""
        old = SweepSpec.from_json(stored).identity()
        new = self.identity()
        names = {f.name: o.name for cls in (WorkloadSpec, SweepSpec) for f, o in _opts(cls)}
        diffs = []
        for key, value in new.items():
            if json.dumps(old.get(key), sort_keys=True) != json.dumps(value, sort_keys=True):
                diffs.append(f"{names.get(key, key)} was {old.get(key)!r}, now {value!r}")
        return diffs
