"""`launch_server` flags of the emulated SGLang release, and the rules SGLang applies to them.

Parsing mirrors SGLang's argparse: unknown flags are rejected with argparse's own
`error: unrecognized arguments` and exit status 2, unique prefixes are accepted
(`--speculative-algo NEXTN`, used by SGLang's own docs), and a flag the release lacks is simply not
in its parser, so it fails exactly as there. Which flags exist, with which choices and defaults,
is the `since`/`until` column of `_FLAGS` below; everything else that changes between releases is
a field of the release's row in versions.py. The resolution step applies the rules of the release's
ServerArgs post-processing in its order, with the same warnings and the same failures (a bare
AssertionError, ValueErrors), so a deploy against the emulator fails where a real one fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_utils import sglang_adaptive as adaptive_schema

from . import faults as faults_mod
from . import multinode, versions
from .profile import Profile, ProfileError, load_profile
from .versions import SGLangVersion

# 0.5.9's name in usage and error lines (prog = basename of argv[0]); later releases: facts.prog.
PROG = "launch_server.py"
DEFAULT_VERSION = "0.5.9"

SPEC_ALGORITHMS = list(versions.VERSIONS[DEFAULT_VERSION].builtin_spec_algorithms)
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]

MSG_MRR_RESET = (
    "Max running requests is reset to 48 for speculative decoding. "
    "You can override this by explicitly setting --max-running-requests."
)
MSG_TOPK_ADJUST = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
MSG_OVERLAP = (
    "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
    "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. "
)


def _bool_env(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


class _Parser(argparse.ArgumentParser):
    """argparse as SGLang uses it; only the program name is SGLang's."""


class DeprecatedStoreTrueAction(argparse.Action):
    """SGLang's DeprecatedStoreTrueAction (0.5.10+ server_args.py, 0.5.23 arg_groups/argparse_actions.py):
    stores True and warns through print_deprecated_warning, which runs before SGLang configures
    logging, so Python's last-resort handler writes the bare (colour-coded) message to stderr."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        new_flag: str | None = None,
        nargs: int | str | None = 0,
        const: object = True,
        default: object = False,
        **kwargs: Any,
    ) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        replacement = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        print(
            f"\033[1;33m'{option_string}' is deprecated and will be removed in a future release.{replacement}\033[0m",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, True)


@dataclass(frozen=True)
class ByVersion:
    """An argparse keyword whose value depends on the release row (e.g. --speculative-algorithm's choices)."""

    of: Callable[[SGLangVersion], list[str] | None]


@dataclass(frozen=True)
class Flag:
    """One launch_server flag: its spellings, argparse keywords (a value may be a function of the
    release row) and the releases that have it (`since`/`until` inclusive, None = open)."""

    names: tuple[str, ...]
    kwargs: dict[str, Any]
    since: str | None = None
    until: str | None = None


def _f(*names: str, since: str | None = None, until: str | None = None, **kwargs: Any) -> Flag:
    return Flag(tuple(names), kwargs, since, until)


def _store_true_until_0512(names: tuple[str, ...], dest: str, new_flag: str) -> list[Flag]:
    """A boolean that 0.5.23 keeps only as a deprecated spelling of a new flag."""
    return [
        Flag(names, {"action": "store_true"}, None, "0.5.12"),
        Flag(names, {"action": DeprecatedStoreTrueAction, "dest": dest, "new_flag": new_flag}, "0.5.23", None),
    ]


# The flag set in ServerArgs' order (also the order of the server_args= line). Each flag was checked
# against the release's own parser: tests/emulator/data/sglang_flags/<version>.txt lists every
# spelling a release accepts, extracted from its wheel.
_FLAGS: list[Flag] = [
    # model and tokenizer
    _f("--model-path", "--model", dest="model_path", type=str, required=True),
    _f("--tokenizer-path", type=str, default=None),
    _f("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"]),
    _f("--tokenizer-worker-num", type=int, default=1),
    _f("--skip-tokenizer-init", action="store_true"),
    _f("--load-format", type=str, default="auto"),
    _f("--model-loader-extra-config", type=str, default="{}"),
    _f("--trust-remote-code", action="store_true"),
    _f("--context-length", type=int, default=None),
    _f("--is-embedding", action="store_true"),
    _f("--enable-multimodal", default=None, action="store_true"),
    _f("--revision", type=str, default=None),
    _f("--model-impl", type=str, default="auto"),
    # HTTP server
    _f("--host", type=str, default="127.0.0.1"),
    _f("--port", type=int, default=30000),
    _f("--skip-server-warmup", action="store_true"),
    _f("--warmups", type=str, default=None),
    _f("--nccl-port", type=int, default=None),
    # quantization and data type
    _f("--dtype", type=str, default="auto"),
    _f("--quantization", type=str, default=None),
    _f("--quantization-param-path", type=str, default=None),
    _f("--kv-cache-dtype", type=str, default="auto", choices=ByVersion(lambda f: list(f.kv_cache_dtypes))),
    # memory and scheduling
    _f("--mem-fraction-static", type=float, default=None),
    _f("--max-running-requests", type=int, default=None),
    _f("--max-queued-requests", type=int, default=None),
    _f("--max-total-tokens", type=int, default=None),
    _f("--chunked-prefill-size", type=int, default=None),
    _f("--max-prefill-tokens", type=int, default=None),
    _f("--schedule-policy", type=str, default="fcfs"),
    _f("--schedule-conservativeness", type=float, default=1.0),
    _f("--page-size", type=int, default=None),
    # runtime
    _f("--device", type=str, default=None),
    _f("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1),
    _f("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1),
    _f("--stream-interval", type=int, default=1),
    _f("--stream-output", action="store_true", until="0.5.9"),
    _f(
        "--stream-output",
        action=DeprecatedStoreTrueAction,
        dest="incremental_streaming_output",
        new_flag="--incremental-streaming-output",
        since="0.5.10",
        until="0.5.12",
    ),
    _f("--incremental-streaming-output", action="store_true", since="0.5.10"),
    _f("--random-seed", type=int, default=None),
    # Batch-invariant kernels (SGLang PR #10645, in every modelled release): the emulator's greedy
    # text is a function of the prompt alone already, so the flag changes nothing here but is
    # reported in /server_info, where the correctness gate reads it (docs/tuner.md "Verify").
    _f("--enable-deterministic-inference", action="store_true"),
    _f("--watchdog-timeout", type=float, default=300),
    _f("--download-dir", type=str, default=None),
    _f("--base-gpu-id", type=int, default=0),
    _f("--gpu-id-step", type=int, default=1),
    _f("--sleep-on-idle", action="store_true"),
    # logging
    _f("--log-level", type=str, default="info", choices=LOG_LEVELS),
    _f("--log-level-http", type=str, default=None, choices=LOG_LEVELS),
    _f("--log-requests", action="store_true"),
    _f("--log-requests-level", type=int, default=2),
    _f("--uvicorn-access-log-exclude-prefixes", type=str, nargs="*", default=[]),
    _f("--show-time-cost", action="store_true"),
    _f("--enable-metrics", action="store_true"),
    _f("--enable-metrics-for-all-schedulers", action="store_true"),
    _f("--decode-log-interval", type=int, default=40),
    # API
    _f("--api-key", type=str, default=None),
    _f("--admin-api-key", type=str, default=None),
    _f("--served-model-name", type=str, default=None),
    _f("--weight-version", type=str, default="default"),
    _f("--chat-template", type=str, default=None),
    _f("--completion-template", type=str, default=None),
    _f("--file-storage-path", type=str, default="sglang_storage", until="0.5.12"),
    _f("--file-storage-path", type=str, default=None, since="0.5.23"),
    _f("--enable-cache-report", action="store_true"),
    _f("--reasoning-parser", type=str, default=None),
    _f("--tool-call-parser", type=str, default=None),
    # data parallelism and multi-node
    _f("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1),
    _f("--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp_size", type=int, default=1, since="0.5.23"),
    _f("--load-balance-method", type=str, default="auto"),
    _f("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", type=str, default=None),
    _f("--nnodes", type=int, default=1),
    _f("--node-rank", type=int, default=0),
    _f("--dist-timeout", type=int, default=None),
    _f("--json-model-override-args", type=str, default="{}"),
    _f("--preferred-sampling-params", type=str, default=None),
    # kernel backends
    _f("--attention-backend", type=str, default=None),
    _f("--decode-attention-backend", type=str, default=None),
    _f("--prefill-attention-backend", type=str, default=None),
    _f("--sampling-backend", type=str, default=None),
    _f("--grammar-backend", type=str, default=None),
    _f("--mm-attention-backend", type=str, default=None),
    # speculative decoding
    _f(
        "--speculative-algorithm",
        type=str,
        default=None,
        choices=ByVersion(lambda f: _choices(f.spec_algorithm_choices)),
    ),
    _f(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        dest="speculative_draft_model_path",
        type=str,
        default=None,
    ),
    _f("--speculative-draft-model-revision", type=str, default=None),
    _f("--speculative-num-steps", type=int, default=None),
    _f("--speculative-eagle-topk", type=int, default=None),
    _f("--speculative-num-draft-tokens", type=int, default=None),
    _f("--speculative-accept-threshold-single", type=float, default=1.0),
    _f("--speculative-accept-threshold-acc", type=float, default=1.0),
    _f("--speculative-token-map", type=str, default=None),
    _f("--speculative-attention-mode", type=str, default="prefill", choices=["prefill", "decode"]),
    _f("--speculative-draft-attention-backend", type=str, default=None),
    _f("--speculative-moe-runner-backend", type=str, default=None),
    _f("--speculative-draft-model-quantization", type=str, default=None),
    _f("--enable-multi-layer-eagle", action="store_true"),
    _f("--speculative-adaptive", action="store_true", since="0.5.11"),
    _f("--speculative-adaptive-config", type=str, default=None, since="0.5.11"),
    # expert parallelism
    _f("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1),
    _f("--moe-a2a-backend", type=str, default="none"),
    _f("--moe-runner-backend", type=str, default="auto"),
    # mamba / hybrid models
    _f("--max-mamba-cache-size", type=int, default=None),
    _f("--mamba-ssm-dtype", type=str, default=None),
    _f("--mamba-full-memory-ratio", type=float, default=0.9, until="0.5.12"),
    _f("--mamba-full-memory-ratio", type=float, default=None, since="0.5.23"),
    _f(
        "--mamba-scheduler-strategy",
        type=str,
        default="auto",
        choices=["auto", "no_buffer", "extra_buffer"],
        until="0.5.12",
    ),
    _f(
        "--mamba-radix-cache-strategy",
        type=str,
        default="auto",
        choices=["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"],
        since="0.5.23",
    ),
    _f("--mamba-track-interval", type=int, default=256),
    # optimisations
    _f("--disable-radix-cache", action="store_true"),
    _f("--cuda-graph-max-bs", type=int, default=None, until="0.5.12"),
    _f("--cuda-graph-bs", type=int, nargs="+", default=None, until="0.5.12"),
    _f("--cuda-graph-max-bs-decode", type=int, default=None, since="0.5.23"),
    _f("--cuda-graph-max-bs-prefill", type=int, default=None, since="0.5.23"),
    _f("--cuda-graph-bs-decode", type=int, nargs="+", default=None, since="0.5.23"),
    _f("--cuda-graph-bs-prefill", type=int, nargs="+", default=None, since="0.5.23"),
    *_store_true_until_0512(
        ("--disable-cuda-graph",), "disable_cuda_graph", "--cuda-graph-backend-{decode,prefill}=disabled"
    ),
    _f("--disable-cuda-graph-padding", action="store_true"),
    _f("--enable-nccl-nvls", action="store_true"),
    _f("--disable-custom-all-reduce", action="store_true"),
    _f("--disable-overlap-schedule", action="store_true"),
    _f("--enable-mixed-chunk", action="store_true"),
    *_store_true_until_0512(("--enable-dp-attention",), "enable_dp_attention", "--attn-dp-size <dp-size>"),
    _f("--enable-dp-lm-head", action="store_true"),
    _f("--enable-two-batch-overlap", action="store_true"),
    _f("--enable-pdmux", action="store_true"),
    _f("--enable-torch-compile", action="store_true"),
    _f("--torch-compile-max-bs", type=int, default=32),
    _f("--enable-p2p-check", action="store_true"),
    _f("--triton-attention-num-kv-splits", type=int, default=8),
    _f("--num-continuous-decode-steps", type=int, default=1),
    _f("--enable-memory-saver", action="store_true"),
    _f("--allow-auto-truncate", action="store_true"),
    _f("--enable-custom-logit-processor", action="store_true"),
    _f("--disable-shared-experts-fusion", action="store_true"),
    _f("--enable-return-hidden-states", action="store_true"),
    # configuration file (merged before parsing; see merge_config_file)
    _f("--config", type=str, default=None),
]


def _choices(values: tuple[str, ...] | None) -> list[str] | None:
    return list(values) if values is not None else None


# The emulator's own flags (docs/emulator.md "Flags"); present in every release's parser.
EMULATOR_DESTS = (
    "emulator_profile",
    "emulator_startup_s",
    "emulator_fault",
    "emulator_sglang_version",
    "emulator_noise_seed",
)


def _add_emulator_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--emulator-profile",
        type=str,
        default=None,
        help="profile YAML (default: $SGLANG_EMULATOR_PROFILE or the seed deployment's profile)",
    )
    p.add_argument(
        "--emulator-startup-s",
        type=float,
        default=None,
        help="start-up time in seconds (overrides the profile's startup_s)",
    )
    p.add_argument(
        "--emulator-fault",
        action="append",
        default=[],
        metavar="NAME[=ARG]",
        help="switch a fault on (repeatable): " + ", ".join(faults_mod.FAULT_NAMES),
    )
    p.add_argument(
        "--emulator-sglang-version",
        type=str,
        default=None,
        metavar="X.Y.Z",
        help="the SGLang release to emulate: "
        + ", ".join(versions.SUPPORTED)
        + " (default: the profile's sglang_version)",
    )
    p.add_argument(
        "--emulator-noise-seed",
        type=int,
        default=None,
        help="seed of the profile's run-to-run and restart noise (overrides the profile's noise_seed)",
    )


def build_parser(version: str | SGLangVersion = DEFAULT_VERSION) -> argparse.ArgumentParser:
    """The flag set of one SGLang release, plus the emulator's own flags."""
    facts = version if isinstance(version, SGLangVersion) else versions.get(version)
    p = _Parser(
        prog=facts.prog,
        description="SGLang emulator (sglang-tune): accepts sglang.launch_server's flags; times tokens by a profile.",
    )
    for flag in _FLAGS:
        if not versions.in_range(facts, flag.since, flag.until):
            continue
        kwargs: dict[str, Any] = {k: (v.of(facts) if isinstance(v, ByVersion) else v) for k, v in flag.kwargs.items()}
        if kwargs.get("choices", "") is None:
            del kwargs["choices"]
        p.add_argument(*flag.names, **kwargs)
    _add_emulator_flags(p)
    return p


# ---- which release ------------------------------------------------------------------------------


def _preparse(argv: list[str]) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False)
    _add_emulator_flags(pre)
    pre.add_argument("--config", type=str, default=None)
    ns, _ = pre.parse_known_args(argv)
    return ns


def _config_value(path: str | None, *keys: str) -> Any:
    if not path:
        return None
    try:
        import yaml

        with open(path) as fh:
            data = yaml.safe_load(fh)
    except Exception:  # noqa: BLE001 - the real merge reports a bad file with SGLang's words
        return None
    if isinstance(data, dict):
        for key in keys:
            if key in data:
                return data[key]
    return None


def choose_version(argv: list[str]) -> SGLangVersion:
    """The release to emulate: --emulator-sglang-version (command line, then --config file), else
    the profile's sglang_version, else 0.5.9. Raises UnsupportedVersion naming the modelled ones."""
    pre = _preparse(argv)
    wanted = pre.emulator_sglang_version
    if wanted is None:
        wanted = _config_value(pre.config, "emulator-sglang-version", "emulator_sglang_version")
    if wanted is not None:
        return versions.get(str(wanted))
    profile_path = pre.emulator_profile or _config_value(pre.config, "emulator-profile", "emulator_profile")
    try:
        profile = load_profile(profile_path)
    except ProfileError:
        return versions.get(DEFAULT_VERSION)  # main() reports the profile's own error
    return versions.get(profile.sglang_version)


# ---- --config FILE.yaml -------------------------------------------------------------------------


def merge_config_file(
    parser: argparse.ArgumentParser, argv: list[str], facts: SGLangVersion | None = None
) -> list[str]:
    """`--config FILE.yaml`: the file's keys become flags placed before the command line's, so the
    command line wins, as SGLang's ConfigArgumentMerger does (sglang/srt/server_args_config_parser.py
    in 0.5.9-0.5.12, sglang/srt/utils/server_args_config_parser.py in 0.5.23; prepare_server_args
    calls it when "--config" is in argv). A key `api-key: ...` in such a file keeps the secret out
    of the process's command line, which every local user can read in /proc/PID/cmdline.

    0.5.23 (`facts.config_v2`) also accepts a key spelled as any long option of the flag (e.g.
    `tensor-parallel-size` for `--tp-size`) and passes a mapping value as JSON text; older releases
    accept only the key that matches the flag's dest and pass a mapping as its str().
    SGLang's errors are plain ValueErrors (a traceback, exit status 1), reproduced word for word.
    """
    facts = facts or versions.get(DEFAULT_VERSION)
    where = [i for i, arg in enumerate(argv) if arg == "--config"]
    if not where:
        return argv
    if len(where) > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    i = where[0]
    if i == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = argv[i + 1]
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"Config file must be YAML format, got: {suffix}")
    if not os.path.exists(path):
        raise ValueError(f"Config file not found: {path}")
    import yaml  # the bare install carries PyYAML, as SGLang's does

    with open(path) as fh:
        data = yaml.safe_load(fh)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")

    def keys_of(action: argparse.Action) -> set[str]:
        if not facts.config_v2:
            return {action.dest}
        return {action.dest} | {o[2:].replace("-", "_") for o in action.option_strings if o.startswith("--")}

    actions = [a for a in parser._actions if a.option_strings]
    store_true = {k for a in actions if isinstance(a, argparse._StoreTrueAction) for k in keys_of(a)}
    if facts.config_v2:
        supported = [
            a for a in actions if isinstance(a, (argparse._StoreTrueAction, argparse._StoreAction)) or a.nargs is None
        ]
    else:
        supported = [a for a in actions if isinstance(a, (argparse._StoreTrueAction, argparse._StoreAction))]
    supported_keys = {k for a in supported for k in keys_of(a)}
    unsupported: dict[str, argparse.Action] = {}
    for a in actions:
        if a in supported or "--help" in a.option_strings or "--config" in a.option_strings:
            continue
        for k in keys_of(a):
            if not facts.config_v2 or k not in supported_keys:
                unsupported[k] = a
    out: list[str] = []
    for key, value in data.items():
        norm = str(key).replace("-", "_")
        if norm in unsupported:
            raise ValueError(f"Unsupported config option '{norm}' with action '{unsupported[norm].__class__.__name__}'")
        if isinstance(value, bool):
            if norm in store_true:
                if value:
                    out.append(f"--{key}")
            else:
                out += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            if value:
                out.append(f"--{key}")
                out += [str(item) for item in value]
        elif isinstance(value, dict) and facts.config_v2:
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out + argv[:i] + argv[i + 2 :]


def parse_flags(argv: list[str], version: str | SGLangVersion | None = None) -> argparse.Namespace:
    """Parse like the emulated release: bad or unknown flags print usage + `error: ...` and exit 2;
    `--config` is merged first (its ValueErrors surface as SGLang's do). The release's row rides
    on the result as `ns.emulator_facts`; the merged argv as `ns.emulator_argv` (0.5.23 serves it
    as launch_command)."""
    argv = list(argv)
    if version is None:
        try:
            facts = choose_version(argv)
        except versions.UnsupportedVersion as e:
            build_parser(DEFAULT_VERSION).error(f"argument --emulator-sglang-version: {e}")
    else:
        facts = version if isinstance(version, SGLangVersion) else versions.get(version)
    parser = build_parser(facts)
    argv = merge_config_file(parser, argv, facts)
    ns = parser.parse_args(argv)
    if ns.emulator_startup_s is not None and ns.emulator_startup_s < 0:
        parser.error("argument --emulator-startup-s: must be >= 0")
    try:
        ns.emulator_fault_list = faults_mod.parse_faults(ns.emulator_fault)
    except faults_mod.FaultError as e:
        parser.error(f"argument --emulator-fault: {e}")
    ns.emulator_facts = facts
    ns.emulator_argv = argv
    return ns


# ---- resolution ---------------------------------------------------------------------------------


@dataclass
class LogNote:
    """A line SGLang logs while resolving its arguments, before the server_args= line."""

    level: str  # "INFO" | "WARNING"
    where: str
    message: str


@dataclass
class AdaptiveSetup:
    """What --speculative-adaptive resolved to (None on ResolvedArgs when it is off)."""

    kind: str  # "flat" | "per-bs"
    config_path: str | None
    initial_steps: int
    candidate_steps: list[int]  # the union of every bucket's candidates (per-bs) / the file's (flat)
    config: Any = None  # the parsed document (per-bs: with defaults merged per bucket at policy build)
    bs_entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    graph_bs: list[int] | None = None  # the padding list (0.5.23: --cuda-graph-bs-decode only)
    # Set when the config is read in the scheduler process (0.5.11/0.5.12) and is bad: the error
    # the scheduler would raise, shown after the start-up lines before it.
    deferred_error: BaseException | None = None

    @property
    def max_steps(self) -> int:
        return max(self.candidate_steps) if self.candidate_steps else self.initial_steps


@dataclass
class ResolvedArgs:
    """Server arguments after SGLang's rules, plus what the emulator derived from them."""

    values: dict[str, Any]  # ServerArgs fields in order, resolved (printed and served)
    facts: SGLangVersion = field(default_factory=lambda: versions.get(DEFAULT_VERSION))
    notes: list[LogNote] = field(default_factory=list)
    spec_on: bool = False
    num_steps: int = 0  # k; 0 when speculation is off (the initial steps under adaptive)
    topk: int = 1
    num_draft_tokens: int = 1
    draft_tokens_adjusted: bool = False
    draft_tokens_inconsistent: bool = False  # topk > 1 and draft tokens > steps*topk + 1 (sglang issue #5160)
    adaptive: AdaptiveSetup | None = None
    launch_argv: list[str] = field(default_factory=list)
    noise_seed: int | None = None
    faults: list[faults_mod.Fault] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:  # convenient read access: cfg.port, cfg.api_key, ...
        values = self.__dict__.get("values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(name)


class EmulatorUnsupported(Exception):
    """A valid SGLang setting the emulator does not model (said plainly, not faked)."""


def _note(facts: SGLangVersion, notes: list[LogNote], level: str, key: str, message: str) -> None:
    notes.append(LogNote(level, facts.where_of(key), message))


def resolve(ns: argparse.Namespace, profile: Profile) -> ResolvedArgs:
    """Apply the emulated release's ServerArgs rules in its order.

    Raises AssertionError / ValueError exactly where SGLang does; the caller lets them surface as
    a Python traceback and exit status 1, as the real launcher does.
    """
    facts: SGLangVersion = getattr(ns, "emulator_facts", None) or versions.get(profile.sglang_version)
    v: dict[str, Any] = {
        k: val
        for k, val in vars(ns).items()
        if k not in EMULATOR_DESTS and k not in ("emulator_fault_list", "emulator_facts", "emulator_argv", "config")
    }
    notes: list[LogNote] = []
    graph_max_key = "cuda_graph_max_bs" if "cuda_graph_max_bs" in v else "cuda_graph_max_bs_decode"

    if v["tokenizer_path"] is None:
        v["tokenizer_path"] = v["model_path"]
    if v["served_model_name"] is None:
        # SGLang serves the model path unless a name is given.
        v["served_model_name"] = v["model_path"]
    if v["mem_fraction_static"] is None:
        # SGLang computes an automatic fraction from the GPU's memory; the profile records the
        # value its capacity numbers were measured at.
        v["mem_fraction_static"] = profile.mem_fraction_static
    if v["chunked_prefill_size"] is None:
        v["chunked_prefill_size"] = profile.chunked_prefill_size
    if v["max_prefill_tokens"] is None:
        v["max_prefill_tokens"] = profile.max_prefill_tokens
    if v[graph_max_key] is None:
        v[graph_max_key] = profile.cuda_graph_max_bs
    if v["page_size"] is None:
        v["page_size"] = 1
    if v["device"] is None:
        v["device"] = "cuda"
    if v["random_seed"] is None:
        v["random_seed"] = random.SystemRandom().randint(0, 2**30)
    if v["attention_backend"] is None:
        # SM120 (RTX PRO 6000) and MHA models default to flashinfer (0.5.9 server_args.py
        # _get_default_attn_backend: "trtllm_mha does not support SM120").
        v["attention_backend"] = "flashinfer"
        _note(facts, notes, "INFO", "attention", "Attention backend not specified. Use flashinfer backend by default.")
    if v["sampling_backend"] is None:
        v["sampling_backend"] = "flashinfer"
    if v["grammar_backend"] is None:
        v["grammar_backend"] = "xgrammar"
    if "mamba_full_memory_ratio" in v and v["mamba_full_memory_ratio"] is None:
        v["mamba_full_memory_ratio"] = 0.9

    if v["tp_size"] < 1 or v["nnodes"] < 1 or v["dp_size"] < 1:
        raise ValueError("tp_size, dp_size and nnodes must be positive")
    if v["tp_size"] % v["nnodes"] != 0:
        raise ValueError(f"tp_size ({v['tp_size']}) must be divisible by number of nodes ({v['nnodes']})")
    if not 0 <= v["node_rank"] < v["nnodes"]:
        raise ValueError(f"node_rank ({v['node_rank']}) must be in [0, nnodes={v['nnodes']})")
    multinode.layout(v)  # a multi-node server needs a usable --dist-init-addr

    algo = v["speculative_algorithm"]
    if algo is not None:
        # 0.5.11+: upper-cased first; free-string releases then look the name up
        # (spec_info.py SpeculativeAlgorithm.from_string).
        algo = algo.upper()
        if algo not in facts.builtin_spec_algorithms:
            raise ValueError(f"Unknown speculative algorithm name: {algo}")
        v["speculative_algorithm"] = algo
    spec_on = algo is not None
    attn_dp = bool(v.get("enable_dp_attention")) or int(v.get("attn_dp_size") or 1) > 1

    _mamba_radix_rule(facts, profile, v, notes, spec_on)

    res = ResolvedArgs(
        values=v,
        facts=facts,
        notes=notes,
        faults=list(getattr(ns, "emulator_fault_list", [])),
        launch_argv=list(getattr(ns, "emulator_argv", [])),
        noise_seed=getattr(ns, "emulator_noise_seed", None),
    )
    adaptive_wanted = bool(v.get("speculative_adaptive"))

    if algo in ("NEXTN", "EAGLE"):
        # NEXTN is an alias: /server_info reports EAGLE (0.5.9 server_args.py; 0.5.23
        # speculative_hook.py _resolve_speculative_algorithm_alias).
        v["speculative_algorithm"] = algo = "EAGLE"

    if facts.adaptive == "per-bs" and adaptive_wanted:
        # 0.5.23 handle_speculative_decoding: _maybe_disable_adaptive, then
        # _init_adaptive_speculative_params, both before the algorithm's own handler.
        adaptive_wanted = _adaptive_fallback(facts, v, notes, algo, attn_dp)
        if adaptive_wanted:
            res.adaptive = _init_adaptive_per_bs(v)

    if not spec_on:
        if facts.adaptive == "flat" and adaptive_wanted:
            _adaptive_fallback(facts, v, notes, algo, attn_dp)
        return res

    if algo == "NGRAM" or algo not in ("EAGLE", "EAGLE3", "STANDALONE"):
        raise EmulatorUnsupported(
            f"--speculative-algorithm {algo} is not modelled by the emulator (EAGLE/NEXTN, EAGLE3 and STANDALONE chains only)"
        )

    if v["max_running_requests"] is None:
        v["max_running_requests"] = 48
        _note(facts, notes, "WARNING", "mrr", MSG_MRR_RESET)

    _overlap_rule(facts, v, notes)

    if v["enable_mixed_chunk"] and facts.spec_v2 != "always":
        v["enable_mixed_chunk"] = False
        _note(
            facts,
            notes,
            "WARNING",
            "mixed",
            "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
        )

    if v["speculative_num_steps"] is None:
        # SGLang: a bare assert, so the launcher dies with "AssertionError" and no text.
        assert v["speculative_eagle_topk"] is None and v["speculative_num_draft_tokens"] is None
        # auto_choose_speculative_params: (3, 1, 4) for Qwen3-Next / Qwen3.5 and most models.
        v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"] = 3, 1, 4
    if v["speculative_eagle_topk"] is None:
        # Not pinned down by the sources read; the emulator treats an absent topk as a chain.
        v["speculative_eagle_topk"] = 1
    if v["speculative_num_steps"] < (0 if res.adaptive else 1):
        raise EmulatorUnsupported("--speculative-num-steps must be >= 1 when --speculative-algorithm is set")
    if v["speculative_eagle_topk"] < 1:
        raise EmulatorUnsupported("--speculative-eagle-topk must be >= 1")

    if v["attention_backend"] == "trtllm_mha" and v["speculative_eagle_topk"] > 1:
        raise ValueError("trtllm_mha backend only supports topk = 1 for speculative decoding.")

    steps, topk = v["speculative_num_steps"], v["speculative_eagle_topk"]
    if topk == 1 and v["speculative_num_draft_tokens"] != steps + 1:
        v["speculative_num_draft_tokens"] = steps + 1
        res.draft_tokens_adjusted = True
        _note(facts, notes, "WARNING", "topk", MSG_TOPK_ADJUST)
    if v["speculative_num_draft_tokens"] is None:
        v["speculative_num_draft_tokens"] = steps * topk + 1
    if topk > 1 and v["speculative_num_draft_tokens"] > steps * topk + 1:
        # No server-side check exists; the run fails later (sglang issue #5160).
        res.draft_tokens_inconsistent = True

    if facts.adaptive == "flat" and adaptive_wanted:
        # 0.5.11/0.5.12: the check runs last in _handle_speculative_decoding; the config itself is
        # read by the EAGLE worker in the scheduler process (adaptive_runtime_state.py).
        if _adaptive_fallback(facts, v, notes, algo, attn_dp):
            res.adaptive = _init_adaptive_flat(facts, v)

    res.spec_on = True
    res.num_steps = steps
    res.topk = topk
    res.num_draft_tokens = v["speculative_num_draft_tokens"]
    return res


def _mamba_radix_rule(
    facts: SGLangVersion, profile: Profile, v: dict[str, Any], notes: list[LogNote], spec_on: bool
) -> None:
    """Hybrid (Mamba) models: the radix cache against speculation, per release (facts.mamba_radix_rule)."""
    key = facts.mamba_strategy_dest
    strategy = v[key]
    arch = profile.model_architecture
    if facts.mamba_radix_rule == "auto-extra-buffer":
        # 0.5.23 arg_groups/overrides.py _mamba_radix_cache_resolution: with the radix cache on,
        # auto picks extra_buffer when the overlap scheduler (or paging) is wanted, else no_buffer
        # and the overlap scheduler off. No warning either way.
        if profile.hybrid_mamba and not v["disable_radix_cache"] and strategy == "auto":
            if not v["disable_overlap_schedule"] or v["page_size"] > 1:
                v[key] = "extra_buffer"
            else:
                v[key] = "no_buffer"
                v["disable_overlap_schedule"] = True
        return
    if strategy == "auto":
        v[key] = strategy = "no_buffer"
    if profile.hybrid_mamba and spec_on and strategy == "no_buffer" and not v["disable_radix_cache"]:
        if facts.mamba_radix_rule == "error":
            # 0.5.10-0.5.12 server_args.py _handle_mamba_radix_cache (sglang PR #19391).
            raise ValueError(
                f"Speculative decoding for {arch} is not compatible with radix cache when using "
                "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
                "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
            )
        v["disable_radix_cache"] = True
        _note(
            facts,
            notes,
            "WARNING",
            "radix",
            f"Disabling radix cache since speculative decoding for {arch} is not supported with radix cache yet.",
        )


def _overlap_rule(facts: SGLangVersion, v: dict[str, Any], notes: list[LogNote]) -> None:
    """The overlap scheduler ("spec v2") for EAGLE-family speculation, per release (facts.spec_v2)."""
    topk = v["speculative_eagle_topk"]
    if facts.spec_v2 == "env-off":
        # 0.5.9/0.5.10 server_args.py: SGLANG_ENABLE_SPEC_V2 defaults to False.
        if _bool_env("SGLANG_ENABLE_SPEC_V2"):
            if topk not in (None, 1):
                raise ValueError("Spec v2 currently only supports topk = 1 for speculative decoding.")
        else:
            v["disable_overlap_schedule"] = True
            _note(facts, notes, "WARNING", "overlap", MSG_OVERLAP)
    elif facts.spec_v2 == "env-on":
        # 0.5.11/0.5.12: on by default; topk > 1 or SGLANG_ENABLE_SPEC_V2=False fall back to v1.
        reason = None
        if topk is not None and topk > 1 and not v["disable_overlap_schedule"]:
            v["disable_overlap_schedule"] = True
            reason = "spec v2 currently only supports topk = 1"
        elif not _bool_env("SGLANG_ENABLE_SPEC_V2", default=True) and not v["disable_overlap_schedule"]:
            v["disable_overlap_schedule"] = True
            reason = "SGLANG_ENABLE_SPEC_V2=False"
        if v["disable_overlap_schedule"]:
            message = (
                "Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
                f"{reason or 'overlap schedule is disabled'}."
            )
        else:
            message = "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."
        _note(facts, notes, "WARNING", "overlap", message)
    elif v["disable_overlap_schedule"]:
        # 0.5.23 speculative_hook.py _handle_eagle_family.
        _note(
            facts,
            notes,
            "WARNING",
            "overlap",
            "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.",
        )


def _adaptive_fallback(
    facts: SGLangVersion, v: dict[str, Any], notes: list[LogNote], algo: str | None, attn_dp: bool
) -> bool:
    """adaptive_unsupported_reason (adaptive_spec_params.py of the release) and its warning;
    returns whether adaptive stays on."""
    reason = None
    topk = v["speculative_eagle_topk"]
    if algo not in ("EAGLE", "EAGLE3"):
        reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    elif (topk is not None and topk != 1) if facts.adaptive == "per-bs" else topk != 1:
        reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    elif attn_dp:
        reason = (
            "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
            if facts.adaptive == "per-bs"
            else "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)"
        )
    elif facts.adaptive_needs_v1 and not v["disable_overlap_schedule"]:
        reason = "the overlap scheduler (spec v2) is enabled (adaptive is only implemented for EAGLEWorker v1)"
    elif v.get("enable_multi_layer_eagle"):
        worker = "MultiLayerEagleWorkerV2" if facts.adaptive == "per-bs" else "MultiLayerEagleWorker"
        reason = f"enable_multi_layer_eagle=True is not supported ({worker} does not implement adaptive)"
    elif v.get("enable_two_batch_overlap"):
        reason = "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"
    elif v.get("enable_pdmux"):
        reason = "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
    if reason is None:
        return True
    # Logged with the module's logger during resolution: plain under 0.5.11+'s basicConfig.
    notes.append(
        LogNote(
            "WARNING",
            "server_args.py:1",
            f"speculative_adaptive disabled: {reason}. Falling back to static speculative params.",
        )
    )
    v["speculative_adaptive"] = False
    return False


def _graph_bs(v: dict[str, Any]) -> list[int] | None:
    """The batch sizes 0.5.23's AdaptiveSpeculativeParams pads to: eagle_worker_v2.py init_cuda_graphs
    hands over get_exec().graph.cuda_graph_bs_decode, which is the --cuda-graph-bs-decode input (the
    generated capture list lives in cuda_graph_config and is not passed), and None when decode
    graphs are off; None means the running batch size is routed unpadded."""
    if v.get("disable_cuda_graph"):
        return None
    bs = v.get("cuda_graph_bs_decode")
    return sorted(bs) if bs else None


def _init_adaptive_per_bs(v: dict[str, Any]) -> AdaptiveSetup:
    """0.5.23 speculative_hook.py _init_adaptive_speculative_params (config read at resolution)."""
    path = v.get("speculative_adaptive_config")
    raw = adaptive_schema.read_config_file(path) if path is not None else None
    cfg, bs_entries = adaptive_schema.load_per_bs(raw)
    candidates = adaptive_schema.union_candidate_steps(bs_entries)
    if v["speculative_eagle_topk"] is None:
        v["speculative_eagle_topk"] = 1
    if v["speculative_num_steps"] is None:
        v["speculative_num_steps"] = candidates[len(candidates) // 2]
    if v["speculative_num_steps"] not in candidates:
        raise ValueError(
            f"--speculative-num-steps={v['speculative_num_steps']} "
            f"is not in the adaptive config candidate_steps {candidates}. "
            "Pass one of those values."
        )
    v["speculative_num_draft_tokens"] = v["speculative_num_steps"] + 1
    return AdaptiveSetup(
        kind="per-bs",
        config_path=path,
        initial_steps=v["speculative_num_steps"],
        candidate_steps=candidates,
        config=cfg,
        bs_entries=bs_entries,
        graph_bs=_graph_bs(v),
    )


def _init_adaptive_flat(facts: SGLangVersion, v: dict[str, Any]) -> AdaptiveSetup:
    """0.5.11/0.5.12 AdaptiveController: reads the config in the scheduler; a bad file is kept as
    the error the scheduler will raise there."""
    path = v.get("speculative_adaptive_config")
    setup = AdaptiveSetup(kind="flat", config_path=path, initial_steps=v["speculative_num_steps"], candidate_steps=[])
    try:
        raw = adaptive_schema.read_config_file(path) if path is not None else None
        cfg = adaptive_schema.load_flat(raw)
        candidates = set(cfg.get("candidate_steps", adaptive_schema.FLAT_DEFAULT_CANDIDATE_STEPS))
        if facts.adaptive_initial == "add":
            candidates.add(setup.initial_steps)
        setup.candidate_steps = sorted(candidates)
        assert len(setup.candidate_steps) >= 2, "candidate_steps must have at least 2 distinct values"
        if any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in setup.candidate_steps):
            raise EmulatorUnsupported(
                f"candidate_steps {setup.candidate_steps}: the emulator models 0.5.11/0.5.12 flat adaptive "
                "configs with steps >= 1 only"
            )
        setup.config = cfg
    except EmulatorUnsupported:
        raise
    except Exception as e:  # noqa: BLE001 - whatever SGLang's loader raises, raised later where it would be
        setup.deferred_error = e
    return setup


def max_total_tokens_note(facts: SGLangVersion, requested: int, profiled: int) -> LogNote:
    """SGLang's warning when --max-total-tokens exceeds what memory allows."""
    return LogNote(
        "WARNING",
        facts.where_of("maxtok"),
        f"max_total_tokens={requested} is larger than the profiled value {profiled}. Use the profiled value instead.",
    )


SECRET_FIELDS = ("api_key", "admin_api_key")


def server_args_repr(values: dict[str, Any], facts: SGLangVersion | None = None) -> str:
    """The text after `server_args=` on the first launch line, secrets included.

    0.5.9-0.5.12 print the dataclass repr `ServerArgs(field=value, ...)` (`logger.info(f"{server_args=}")`
    in sglang/srt/entrypoints/engine.py); 0.5.23 prints the resolved dict (`_server_args_for_logging`).
    Both print api_key verbatim, and /server_info serves it (sgl-project/sglang issue #37457, open):
    the emulator does the same, so that the role's own defence (a launcher that keeps the key out of
    the journal) is tested against the real behaviour rather than against an emulator that hides it.
    """
    if facts is not None and facts.server_args_log == "dict":
        return repr(dict(values))
    return "ServerArgs(" + ", ".join(f"{key}={val!r}" for key, val in values.items()) + ")"


def public_values(values: dict[str, Any]) -> dict[str, Any]:
    """Resolved server args as /server_info serves them: everything, the key included, as SGLang
    does (`dataclasses.asdict(server_args)`); only holders of the key can read it there."""
    return dict(values)


def launch_command(argv: list[str]) -> str:
    """0.5.23's `launch_command` in /server_info: the merged argv (config-file flags first) joined by
    spaces (server_args.py prepare_server_args -> redact_watermark_command_line, which masks only
    --watermark-config): an API key from --config is in it verbatim."""
    return " ".join(argv)
