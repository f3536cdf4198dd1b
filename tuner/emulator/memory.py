"""The memory figures of the start-up log lines (GB per GPU), sized the way SGLang sizes its pools."""

from __future__ import annotations

from .profile import Profile
from .resolve import ResolvedArgs

GIB = float(1 << 30)
# Share of the Mamba pool per draft step that holds intermediate SSM state (log figures only).
MAMBA_INTERMEDIATE_SHARE_PER_STEP = 0.06


def memory_figures(p: Profile, cfg: ResolvedArgs, kv_tokens: int, state_cap: int) -> dict[str, float]:
    """GB figures for the log lines, per GPU, consistent with how SGLang sizes its pools.

    The static fraction leaves gpu_mem * (1 - mem_fraction_static) free; what the weights leave of
    the rest becomes the pools (docs/reference/sglang.md §1.2). KV cells come from the token count; on hybrid
    models the Mamba state pool takes the remainder, a share of it per draft step as intermediate
    state (docs/reference/sglang.md §2.7). The numbers are for the log lines only, with one exception:
    under 0.5.23's adaptive speculation the intermediate state is allocated for the widest
    candidate while the pools were budgeted for the initial steps (versions.adaptive_widest_buffers),
    and what that costs comes out of the memory left after the pools (`widest_extra`); each extra
    runtime state's CUDA graphs cost `state_graph` more (eagle_worker_v2.py build_adaptive_runtime_state).
    `baseline` is what is left without those adaptive costs: below zero the profile's memory keys
    (`gpu_mem_gb`, `weights_gb`, ... all optional, with defaults for another GPU) do not describe
    the machine, and its memory figures decide nothing (runner.py), as for every other profile.
    """
    k = cfg.num_steps if cfg.spec_on else 0
    f = float(cfg.values["mem_fraction_static"])
    avail0 = p.gpu_mem_gb - 1.2
    after_load = avail0 - p.weights_gb
    reserve = p.gpu_mem_gb * (1.0 - f)
    pool = max(0.0, after_load - reserve)
    kv_gb = max(kv_tokens, 0) * p.kv_bytes_per_token / GIB
    mamba = max(0.05, pool - kv_gb) if p.hybrid_mamba else 0.0

    def inter_at(steps: int) -> float:
        share = steps * MAMBA_INTERMEDIATE_SHARE_PER_STEP
        return mamba * share / (1.0 + share) if cfg.spec_on else 0.0

    inter = inter_at(k)
    conv = (mamba - inter) * 0.02
    ad = cfg.adaptive
    widest_extra = 0.0
    if ad is not None and cfg.facts.adaptive_widest_buffers and p.hybrid_mamba:
        widest_extra = max(0.0, inter_at(ad.max_steps) - inter)
    after_pool = after_load - kv_gb - mamba - widest_extra
    graph = p.graph_mem_gb
    after_graph = after_pool - graph
    draft_graph = 0.25 * graph if cfg.spec_on else 0.0
    draft_kv = kv_gb * 0.03 if cfg.spec_on else 0.0
    after_draft = after_graph - draft_graph - draft_kv
    state_graph = 1.25 * graph
    extra_states = len([s for s in ad.candidate_steps if s != k]) if ad is not None else 0
    after_states = after_draft - extra_states * state_graph
    return {
        "avail0": avail0,
        "weights": p.weights_gb,
        "after_load": after_load,
        "kv_half": kv_gb / 2,
        "kv_total": kv_gb,
        "conv": conv,
        "ssm": mamba - inter - conv,
        "inter_ssm": inter * 0.97,
        "inter_conv": inter * 0.03,
        "after_pool": after_pool,
        "graph": graph,
        "after_graph": after_graph,
        "draft_kv_half": draft_kv / 2,
        "draft_graph": draft_graph,
        "after_draft_pool": after_graph - draft_kv,
        "after_draft": after_draft,
        "state_graph": state_graph,
        "widest_extra": widest_extra,
        "inter_widest_ssm": (inter + widest_extra) * 0.97,
        "inter_widest_conv": (inter + widest_extra) * 0.03,
        "final": after_states if cfg.spec_on else after_graph,
        "baseline": (after_draft if cfg.spec_on else after_graph) + widest_extra,
        "mamba_size": float(state_cap * (1 if cfg.values.get("disable_radix_cache") else 3)),
    }
