"""`launch_server` flags of each emulated SGLang release: the flag table and the parser built from it.

A flag the release lacks is simply not in its parser, so it fails exactly as there: argparse's own
`error: unrecognized arguments` and exit status 2, unique prefixes accepted
(`--speculative-algo NEXTN`, used by SGLang's own docs). Which flags exist, with which choices and
defaults, is the `since`/`until` column of `_FLAGS` below; everything else that changes between
releases is a field of the release's row in versions.py. Reading a command line with these parsers
(the release, `--config`) is parse.py; SGLang's rules on the values are resolve.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import faults as faults_mod
from . import versions
from .versions import SGLangVersion

# The release emulated when neither the command line nor the profile names one.
DEFAULT_VERSION = "0.5.9"
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]


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


def add_emulator_flags(p: argparse.ArgumentParser) -> None:
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
    add_emulator_flags(p)
    return p
