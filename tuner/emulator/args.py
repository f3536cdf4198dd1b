"""`python -m sglang.launch_server` flags, and the rules SGLang applies to them.

Parsing mirrors SGLang's argparse (sglang-facts.md §2, §7.1): unknown flags are rejected with
argparse's own `error: unrecognized arguments` and exit status 2, and unique prefixes are accepted
(`--speculative-algo NEXTN`, used by SGLang's own docs). The resolution step applies the rules of
`ServerArgs.__post_init__` in SGLang 0.5.9's order, with the same warnings and the same failures
(a bare AssertionError, ValueErrors), so a deploy against the emulator fails where a real one fails.
"""

from __future__ import annotations

import argparse
import os
import random
from dataclasses import dataclass, field
from typing import Any

from . import faults as faults_mod
from .profile import Profile

# launch_server.py is what argparse names in SGLang's usage and error lines (prog = basename of argv[0]).
PROG = "launch_server.py"

SPEC_ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]  # 0.5.9 choices (sglang-facts.md §2.1)
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"]
MAMBA_STRATEGIES = ["auto", "no_buffer", "extra_buffer"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]

# SGLang logs these through Python logging before the server_args= line, as
# "[time] LEVEL server_args.py:LINE: message". LINE follows 0.5.9's source as cited in
# sglang-facts.md (§1.3, §2.3, §2.4, §2.6); parsers should match the message, not the number.
_WHERE_ATTN = "server_args.py:1834"
_WHERE_RADIX = "server_args.py:1761"
_WHERE_MRR = "server_args.py:2364"
_WHERE_OVERLAP = "server_args.py:2371"
_WHERE_MIXED = "server_args.py:2391"
_WHERE_TOPK = "server_args.py:2446"
_WHERE_MAXTOK = "model_runner_kv_cache_mixin.py:382"

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


def _bool_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class _Parser(argparse.ArgumentParser):
    """argparse as SGLang uses it; only the program name is SGLang's."""


def build_parser() -> argparse.ArgumentParser:
    """The flag set: what the role's template passes, SGLang's other common flags, and ours.

    Order follows SGLang's ServerArgs dataclass, which is also the order of the server_args= line.
    """
    p = _Parser(
        prog=PROG,
        description="SGLang emulator (sglang-tune): accepts sglang.launch_server's flags; times tokens by a profile.",
    )
    a = p.add_argument
    # model and tokenizer
    a("--model-path", "--model", dest="model_path", type=str, required=True)
    a("--tokenizer-path", type=str, default=None)
    a("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"])
    a("--tokenizer-worker-num", type=int, default=1)
    a("--skip-tokenizer-init", action="store_true")
    a("--load-format", type=str, default="auto")
    a("--model-loader-extra-config", type=str, default="{}")
    a("--trust-remote-code", action="store_true")
    a("--context-length", type=int, default=None)
    a("--is-embedding", action="store_true")
    a("--enable-multimodal", default=None, action="store_true")
    a("--revision", type=str, default=None)
    a("--model-impl", type=str, default="auto")
    # HTTP server
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--skip-server-warmup", action="store_true")
    a("--warmups", type=str, default=None)
    a("--nccl-port", type=int, default=None)
    # quantization and data type
    a("--dtype", type=str, default="auto")
    a("--quantization", type=str, default=None)
    a("--quantization-param-path", type=str, default=None)
    a("--kv-cache-dtype", type=str, default="auto", choices=KV_CACHE_DTYPES)
    # memory and scheduling
    a("--mem-fraction-static", type=float, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-queued-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--max-prefill-tokens", type=int, default=None)
    a("--schedule-policy", type=str, default="fcfs")
    a("--schedule-conservativeness", type=float, default=1.0)
    a("--page-size", type=int, default=None)
    # runtime
    a("--device", type=str, default=None)
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    a("--stream-interval", type=int, default=1)
    a("--stream-output", action="store_true")
    a("--random-seed", type=int, default=None)
    a("--watchdog-timeout", type=float, default=300)
    a("--download-dir", type=str, default=None)
    a("--base-gpu-id", type=int, default=0)
    a("--gpu-id-step", type=int, default=1)
    a("--sleep-on-idle", action="store_true")
    # logging
    a("--log-level", type=str, default="info", choices=LOG_LEVELS)
    a("--log-level-http", type=str, default=None, choices=LOG_LEVELS)
    a("--log-requests", action="store_true")
    a("--log-requests-level", type=int, default=2)
    a("--uvicorn-access-log-exclude-prefixes", type=str, nargs="*", default=[])
    a("--show-time-cost", action="store_true")
    a("--enable-metrics", action="store_true")
    a("--enable-metrics-for-all-schedulers", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    # API
    a("--api-key", type=str, default=None)
    a("--admin-api-key", type=str, default=None)
    a("--served-model-name", type=str, default=None)
    a("--weight-version", type=str, default="default")
    a("--chat-template", type=str, default=None)
    a("--completion-template", type=str, default=None)
    a("--file-storage-path", type=str, default="sglang_storage")
    a("--enable-cache-report", action="store_true")
    a("--reasoning-parser", type=str, default=None)
    a("--tool-call-parser", type=str, default=None)
    # data parallelism and multi-node
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    a("--load-balance-method", type=str, default="round_robin")
    a("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", type=str, default=None)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--json-model-override-args", type=str, default="{}")
    a("--preferred-sampling-params", type=str, default=None)
    # kernel backends
    a("--attention-backend", type=str, default=None)
    a("--decode-attention-backend", type=str, default=None)
    a("--prefill-attention-backend", type=str, default=None)
    a("--sampling-backend", type=str, default=None)
    a("--grammar-backend", type=str, default=None)
    a("--mm-attention-backend", type=str, default=None)
    # speculative decoding
    a("--speculative-algorithm", type=str, default=None, choices=SPEC_ALGORITHMS)
    a(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        dest="speculative_draft_model_path",
        type=str,
        default=None,
    )
    a("--speculative-draft-model-revision", type=str, default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    a("--speculative-accept-threshold-single", type=float, default=1.0)
    a("--speculative-accept-threshold-acc", type=float, default=1.0)
    a("--speculative-token-map", type=str, default=None)
    a("--speculative-attention-mode", type=str, default="prefill", choices=["prefill", "decode"])
    a("--speculative-draft-attention-backend", type=str, default=None)
    a("--speculative-moe-runner-backend", type=str, default=None)
    a("--speculative-draft-model-quantization", type=str, default=None)
    # expert parallelism
    a("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1)
    a("--moe-a2a-backend", type=str, default="none")
    a("--moe-runner-backend", type=str, default="auto")
    # mamba / hybrid models
    a("--max-mamba-cache-size", type=int, default=None)
    a("--mamba-ssm-dtype", type=str, default=None)
    a("--mamba-full-memory-ratio", type=float, default=0.9)
    a("--mamba-scheduler-strategy", type=str, default="auto", choices=MAMBA_STRATEGIES)
    a("--mamba-track-interval", type=int, default=256)
    # optimisations
    a("--disable-radix-cache", action="store_true")
    a("--cuda-graph-max-bs", type=int, default=None)
    a("--cuda-graph-bs", type=int, nargs="+", default=None)
    a("--disable-cuda-graph", action="store_true")
    a("--disable-cuda-graph-padding", action="store_true")
    a("--enable-nccl-nvls", action="store_true")
    a("--disable-custom-all-reduce", action="store_true")
    a("--disable-overlap-schedule", action="store_true")
    a("--enable-mixed-chunk", action="store_true")
    a("--enable-dp-attention", action="store_true")
    a("--enable-dp-lm-head", action="store_true")
    a("--enable-torch-compile", action="store_true")
    a("--torch-compile-max-bs", type=int, default=32)
    a("--enable-p2p-check", action="store_true")
    a("--triton-attention-num-kv-splits", type=int, default=8)
    a("--num-continuous-decode-steps", type=int, default=1)
    a("--enable-memory-saver", action="store_true")
    a("--allow-auto-truncate", action="store_true")
    a("--enable-custom-logit-processor", action="store_true")
    a("--disable-shared-experts-fusion", action="store_true")
    a("--enable-return-hidden-states", action="store_true")
    # the emulator's own flags (design.md, "The emulator")
    a(
        "--emulator-profile",
        type=str,
        default=None,
        help="profile YAML (default: $SGLANG_EMULATOR_PROFILE or the seed deployment's profile)",
    )
    a(
        "--emulator-startup-s",
        type=float,
        default=None,
        help="start-up time in seconds (overrides the profile's startup_s)",
    )
    a(
        "--emulator-fault",
        action="append",
        default=[],
        metavar="NAME[=ARG]",
        help="switch a fault on (repeatable): " + ", ".join(faults_mod.FAULT_NAMES),
    )
    return p


EMULATOR_DESTS = ("emulator_profile", "emulator_startup_s", "emulator_fault")


def merge_config_file(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`--config FILE.yaml`: the file's keys become flags placed before the command line's, so the
    command line wins, as SGLang's ConfigArgumentMerger does (sglang/srt/server_args_config_parser.py
    in 0.5.9, sglang/srt/utils/server_args_config_parser.py in 0.5.23; prepare_server_args calls it
    when "--config" is in argv). A key `api-key: ...` in such a file keeps the secret out of the
    process's command line, which every local user can read in /proc/PID/cmdline.

    SGLang's errors are plain ValueErrors (a traceback, exit status 1), reproduced word for word.
    """
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
    store_true = {a.dest for a in parser._actions if isinstance(a, argparse._StoreTrueAction)}
    unsupported = {
        a.dest: a
        for a in parser._actions
        if a.option_strings
        and not isinstance(a, (argparse._StoreTrueAction, argparse._StoreAction))
        and "--help" not in a.option_strings
    }
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
        else:
            out += [f"--{key}", str(value)]
    return out + argv[:i] + argv[i + 2 :]


def parse_flags(argv: list[str]) -> argparse.Namespace:
    """Parse like SGLang: bad or unknown flags print usage + `error: ...` and exit 2; `--config`
    is merged first (its ValueErrors surface as SGLang's do)."""
    parser = build_parser()
    argv = merge_config_file(parser, list(argv))
    ns = parser.parse_args(argv)
    if ns.emulator_startup_s is not None and ns.emulator_startup_s < 0:
        parser.error("argument --emulator-startup-s: must be >= 0")
    try:
        ns.emulator_fault_list = faults_mod.parse_faults(ns.emulator_fault)
    except faults_mod.FaultError as e:
        parser.error(f"argument --emulator-fault: {e}")
    return ns


@dataclass
class LogNote:
    """A line SGLang logs while resolving its arguments, before the server_args= line."""

    level: str  # "INFO" | "WARNING"
    where: str
    message: str


@dataclass
class ResolvedArgs:
    """Server arguments after SGLang's rules, plus what the emulator derived from them."""

    values: dict[str, Any]  # ServerArgs fields in order, resolved (printed and served)
    notes: list[LogNote] = field(default_factory=list)
    spec_on: bool = False
    num_steps: int = 0  # k; 0 when speculation is off
    topk: int = 1
    num_draft_tokens: int = 1
    draft_tokens_adjusted: bool = False
    draft_tokens_inconsistent: bool = False  # topk > 1 and draft tokens > steps*topk + 1 (sglang-facts.md §2.3)
    faults: list[faults_mod.Fault] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:  # convenient read access: cfg.port, cfg.api_key, ...
        values = self.__dict__.get("values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(name)


class EmulatorUnsupported(Exception):
    """A valid SGLang setting the emulator does not model (said plainly, not faked)."""


def resolve(ns: argparse.Namespace, profile: Profile) -> ResolvedArgs:
    """Apply SGLang 0.5.9's ServerArgs rules in its order (sglang-facts.md §2.2-§2.6, §7).

    Raises AssertionError / ValueError exactly where SGLang does; the caller lets them surface as
    a Python traceback and exit status 1, as the real launcher does.
    """
    v: dict[str, Any] = {
        k: val for k, val in vars(ns).items() if k not in EMULATOR_DESTS and k != "emulator_fault_list"
    }
    notes: list[LogNote] = []

    if v["tokenizer_path"] is None:
        v["tokenizer_path"] = v["model_path"]
    if v["served_model_name"] is None:
        # SGLang serves the model path unless a name is given; the profile names the model only
        # for the emulator's own records.
        v["served_model_name"] = v["model_path"]
    if v["mem_fraction_static"] is None:
        # SGLang computes an automatic fraction from the GPU's memory (sglang-facts.md §7.3); the
        # profile records the value its capacity numbers were measured at.
        v["mem_fraction_static"] = profile.mem_fraction_static
    if v["chunked_prefill_size"] is None:
        v["chunked_prefill_size"] = profile.chunked_prefill_size
    if v["max_prefill_tokens"] is None:
        v["max_prefill_tokens"] = profile.max_prefill_tokens
    if v["cuda_graph_max_bs"] is None:
        v["cuda_graph_max_bs"] = profile.cuda_graph_max_bs
    if v["page_size"] is None:
        v["page_size"] = 1
    if v["device"] is None:
        v["device"] = "cuda"
    if v["random_seed"] is None:
        v["random_seed"] = random.SystemRandom().randint(0, 2**30)
    if v["attention_backend"] is None:
        # SM120 (RTX PRO 6000) and MHA models default to flashinfer (sglang-facts.md §7.5).
        v["attention_backend"] = "flashinfer"
        notes.append(
            LogNote("INFO", _WHERE_ATTN, "Attention backend not specified. Use flashinfer backend by default.")
        )
    if v["sampling_backend"] is None:
        v["sampling_backend"] = "flashinfer"
    if v["grammar_backend"] is None:
        v["grammar_backend"] = "xgrammar"

    if v["tp_size"] < 1 or v["nnodes"] < 1 or v["dp_size"] < 1:
        raise ValueError("tp_size, dp_size and nnodes must be positive")
    if v["tp_size"] % v["nnodes"] != 0:
        raise ValueError(f"tp_size ({v['tp_size']}) must be divisible by number of nodes ({v['nnodes']})")
    if not 0 <= v["node_rank"] < v["nnodes"]:
        raise ValueError(f"node_rank ({v['node_rank']}) must be in [0, nnodes={v['nnodes']})")

    algo = v["speculative_algorithm"]
    spec_on = algo is not None

    # Hybrid (Mamba) models with speculation cannot keep the radix cache under no_buffer.
    # 0.5.9 disables it with a warning; 0.5.10-0.5.12 refuse to start (sglang-facts.md §2.6).
    mamba_strategy = v["mamba_scheduler_strategy"]
    if mamba_strategy == "auto":
        v["mamba_scheduler_strategy"] = mamba_strategy = "no_buffer"
    if profile.hybrid_mamba and spec_on and mamba_strategy == "no_buffer" and not v["disable_radix_cache"]:
        arch = profile.model_architecture
        if _version_tuple(profile.sglang_version) >= (0, 5, 10):
            raise ValueError(
                f"Speculative decoding for {arch} is not compatible with radix cache when using "
                "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
                "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
            )
        v["disable_radix_cache"] = True
        notes.append(
            LogNote(
                "WARNING",
                _WHERE_RADIX,
                f"Disabling radix cache since speculative decoding for {arch} is not supported with radix cache yet.",
            )
        )

    res = ResolvedArgs(values=v, notes=notes, faults=list(getattr(ns, "emulator_fault_list", [])))
    if not spec_on:
        return res

    if algo == "NGRAM":
        raise EmulatorUnsupported("--speculative-algorithm NGRAM is not modelled by the emulator (chain drafts only)")
    if algo == "NEXTN":
        # NEXTN is an alias: /server_info reports EAGLE (sglang-facts.md §2.2).
        v["speculative_algorithm"] = algo = "EAGLE"

    if v["max_running_requests"] is None:
        v["max_running_requests"] = 48
        notes.append(LogNote("WARNING", _WHERE_MRR, MSG_MRR_RESET))

    if _bool_env("SGLANG_ENABLE_SPEC_V2"):
        if v["speculative_eagle_topk"] not in (None, 1):
            raise ValueError("Spec v2 currently only supports topk = 1 for speculative decoding.")
    else:
        v["disable_overlap_schedule"] = True
        notes.append(LogNote("WARNING", _WHERE_OVERLAP, MSG_OVERLAP))

    if v["enable_mixed_chunk"]:
        v["enable_mixed_chunk"] = False
        notes.append(
            LogNote(
                "WARNING",
                _WHERE_MIXED,
                "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
            )
        )

    if v["speculative_num_steps"] is None:
        # SGLang: a bare assert, so the launcher dies with "AssertionError" and no text (§2.2).
        assert v["speculative_eagle_topk"] is None and v["speculative_num_draft_tokens"] is None
        # auto_choose_speculative_params: (3, 1, 4) for Qwen3-Next / Qwen3.5 and most models (§2.2).
        v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"] = 3, 1, 4
    if v["speculative_eagle_topk"] is None:
        # Not pinned down by the sources read; the emulator treats an absent topk as a chain.
        v["speculative_eagle_topk"] = 1
    if v["speculative_num_steps"] < 1:
        raise EmulatorUnsupported("--speculative-num-steps must be >= 1 when --speculative-algorithm is set")
    if v["speculative_eagle_topk"] < 1:
        raise EmulatorUnsupported("--speculative-eagle-topk must be >= 1")

    if v["attention_backend"] == "trtllm_mha" and v["speculative_eagle_topk"] > 1:
        raise ValueError("trtllm_mha backend only supports topk = 1 for speculative decoding.")

    steps, topk = v["speculative_num_steps"], v["speculative_eagle_topk"]
    if topk == 1 and v["speculative_num_draft_tokens"] != steps + 1:
        v["speculative_num_draft_tokens"] = steps + 1
        res.draft_tokens_adjusted = True
        notes.append(LogNote("WARNING", _WHERE_TOPK, MSG_TOPK_ADJUST))
    if v["speculative_num_draft_tokens"] is None:
        v["speculative_num_draft_tokens"] = steps * topk + 1
    if topk > 1 and v["speculative_num_draft_tokens"] > steps * topk + 1:
        # No server-side check exists; the run fails later (sglang issue #5160, sglang-facts.md §2.3).
        res.draft_tokens_inconsistent = True

    res.spec_on = True
    res.num_steps = steps
    res.topk = topk
    res.num_draft_tokens = v["speculative_num_draft_tokens"]
    return res


def max_total_tokens_note(requested: int, profiled: int) -> LogNote:
    """SGLang's warning when --max-total-tokens exceeds what memory allows (sglang-facts.md §5.3)."""
    return LogNote(
        "WARNING",
        _WHERE_MAXTOK,
        f"max_total_tokens={requested} is larger than the profiled value {profiled}. Use the profiled value instead.",
    )


def _version_tuple(v: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out)


SECRET_FIELDS = ("api_key", "admin_api_key")


def server_args_repr(values: dict[str, Any]) -> str:
    """`ServerArgs(field=value, ...)` as SGLang's dataclass repr prints it, secrets included.

    Real SGLang 0.5.x prints api_key verbatim in this line (`logger.info(f"{server_args=}")` in
    sglang/srt/entrypoints/engine.py) and serves it in /server_info (sgl-project/sglang issue
    #37457, open; the redaction PRs are unmerged). The emulator does the same, so that the role's
    own defence (a launcher that keeps the key out of the journal) is tested against the real
    behaviour rather than against an emulator that hides the problem.
    """
    return "ServerArgs(" + ", ".join(f"{key}={val!r}" for key, val in values.items()) + ")"


def public_values(values: dict[str, Any]) -> dict[str, Any]:
    """Resolved server args as /server_info serves them: everything, the key included, as SGLang
    does (`dataclasses.asdict(server_args)`); only holders of the key can read it there."""
    return dict(values)
