"""SGLang's ServerArgs post-processing for the emulated release: parsed flags -> ResolvedArgs.

The rules of the release's ServerArgs post-processing run in its order, with the same warnings and
the same failures (a bare AssertionError, ValueErrors), so a deploy against the emulator fails where
a real one fails; a valid setting the emulator does not model raises EmulatorUnsupported. Also how
the resolved arguments are shown: the `server_args=` line and /server_info's copy.
"""

from __future__ import annotations

import argparse
import os
import random
from dataclasses import dataclass, field
from typing import Any

from sglang_utils import sglang_adaptive as adaptive_schema
from sglang_utils.sglang_spec import max_tree_draft_tokens

from . import faults as faults_mod
from . import model, multinode, versions
from .flags import DEFAULT_VERSION, EMULATOR_DESTS
from .profile import Profile
from .versions import SGLangVersion

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
    draft_tokens_inconsistent: bool = False  # topk > 1, more draft tokens than the tree holds (sglang issue #5160)
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
    graph_list = v.get("cuda_graph_bs") or v.get("cuda_graph_bs_decode")
    if graph_list:
        # a given capture list sets the max to its largest size (sgl-project/sglang
        # python/sglang/srt/server_args.py: `self.cuda_graph_max_bs = max(self.cuda_graph_bs)`)
        v[graph_max_key] = max(int(b) for b in graph_list)
    elif v[graph_max_key] is None:
        v[graph_max_key] = profile.cuda_graph_max_bs
    if "cuda_graph_bs" in v and not v["cuda_graph_bs"] and profile.cuda_graph_bs is not None:
        # the list ServerArgs reports (server_args= and /server_info) is the one it generated, which
        # the profile's stands for, cut at the max; every size up to the max without padding (0.5.9
        # server_args.py `_generate_cuda_graph_batch_sizes`)
        max_bs = int(v[graph_max_key])
        if v.get("disable_cuda_graph_padding"):
            v["cuda_graph_bs"] = list(range(1, max_bs + 1))
        else:
            v["cuda_graph_bs"] = list(model.listed_up_to(profile.cuda_graph_bs, max_bs) or ()) or None
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
    # SGLang runs tp x pp ranks over the nodes (0.5.9 server_args.py check_server_args, 0.5.23
    # arg_groups/validation_hook.py: `(tp_size * pp_size) % nnodes == 0`, "tp_size must be divisible
    # by number of nodes")
    if v["pp_size"] < 1:
        raise ValueError("pp_size must be positive")
    if (v["tp_size"] * v["pp_size"]) % v["nnodes"] != 0:
        raise AssertionError("tp_size must be divisible by number of nodes")
    _multinode_replicas_rule(v)
    if not 0 <= v["node_rank"] < v["nnodes"]:
        raise ValueError(f"node_rank ({v['node_rank']}) must be in [0, nnodes={v['nnodes']})")
    multinode.layout(v)  # a multi-node server needs a usable --dist-init-addr
    if v["pp_size"] > 1:
        # pipeline stages change the step's cost and the KV pool per rank: not modelled
        raise EmulatorUnsupported(f"--pp-size {v['pp_size']}: pipeline parallelism is not modelled by the emulator")

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
    if topk > 1 and v["speculative_num_draft_tokens"] > max_tree_draft_tokens(steps, topk):
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


def _multinode_replicas_rule(v: dict[str, Any]) -> None:
    """Data-parallel replicas across nodes, refused as SGLang refuses them: without DP attention
    (0.5.9 server_args.py check_server_args, 0.5.20 arg_groups/validation_hook.py), and on 0.5.23
    (its parser has --attn-dp-size) wherever --dp-size still counts replicas after the deprecated
    `--dp-size N --enable-dp-attention` became `--attn-dp-size N` (parallel_hook.py
    `_handle_deprecated_dp_attention`: only when no --attn-dp-size was given)."""
    if v["nnodes"] == 1 or v["dp_size"] == 1:
        return
    if "attn_dp_size" in v:
        if not (v.get("enable_dp_attention") and int(v.get("attn_dp_size") or 1) == 1):
            raise AssertionError(
                "multi-node data-parallel replicas are not supported; use attention DP (--attn-dp-size) across nodes"
            )
    elif not v.get("enable_dp_attention"):
        raise AssertionError("multi-node data parallel is not supported unless dp attention!")


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
        v["speculative_num_steps"] = adaptive_schema.default_launch_steps(bs_entries)
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
