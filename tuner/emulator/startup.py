"""0.5.23's start-up record: the `startup_time` dict of /server_info and its log line.

SGLang 0.5.23 times each start-up phase per scheduler (managers/scheduler.py
init_startup_timing_summary -> observability/startup_time.py build_scheduler_startup_time:
`load_weight` (target + draft), `kv_cache_allocation`, `scheduler_e2e`, `cuda_graph` by graph
phase), takes each phase's maximum over the ranks and adds the launcher's `tokenizer_e2e`
(build_engine_startup_time), and hands the dict to the tokenizer manager once every scheduler is
ready (entrypoints/engine.py `_set_startup_time`, right after `wait_for_ready`, before the HTTP
server starts). That dict is /server_info's top-level `startup_time`; each `internal_states`
entry carries its scheduler's own (managers/scheduler_components/internal_state.py
`state["startup_time"] = scheduler.startup_time`, without `tokenizer_e2e`). Older releases have
neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import EmulatorApp

# model_executor/graph_memory_usage.py GRAPH_MEMORY_USAGE_KEYS: the stable base schema of both the
# graph memory (memory_usage.graph) and the graph time (startup_time.cuda_graph) dicts.
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")


def graph_by_phase(target: float, draft: float, speculative: bool, digits: int = 3) -> dict[str, float]:
    """A graph figure (GB or s) in 0.5.23's phase schema: the target's graphs are `decode`, or
    `target_verify` under speculation (speculative/eagle_worker_v2.py records the verify graphs
    there); the draft's split between `draft_decode` and `draft_extend` as the emulator's draft
    capture does (60/40); the rest 0.0, as merge_graph_memory_usage fills them."""
    out = dict.fromkeys(GRAPH_PHASES, 0.0)
    out["target_verify" if speculative else "decode"] = round(target, digits)
    out["draft_decode"] = round(draft * 0.6, digits)
    out["draft_extend"] = round(draft * 0.4, digits)
    return out


def scheduler_startup_time(
    phases: dict[str, float], graph_s: float, draft_graph_s: float, e2e_s: float, spec: bool
) -> dict[str, Any]:
    """One scheduler's dict (build_scheduler_startup_time's keys, in its order)."""
    return {
        "load_weight": round(phases.get("load_weight", 0.0), 3),
        "kv_cache_allocation": round(phases.get("kv_cache_allocation", 0.0), 3),
        "scheduler_e2e": round(e2e_s, 3),
        "cuda_graph": graph_by_phase(graph_s, draft_graph_s if spec else 0.0, spec),
    }


def timings_line(startup_time: dict[str, Any]) -> str:
    """entrypoints/engine.py `_set_startup_time`'s INFO line: `"Engine startup timings (s):
    load_weight=%.2f, kv_cache_allocation=%.2f, scheduler_e2e=%.2f, cuda_graph={%s},
    tokenizer_e2e=%.2f"`, the graph phases as `phase=%.2f` joined by ", "."""
    graph = ", ".join(f"{phase}={duration:.2f}" for phase, duration in startup_time["cuda_graph"].items())
    return (
        f"Engine startup timings (s): load_weight={startup_time['load_weight']:.2f}, "
        f"kv_cache_allocation={startup_time['kv_cache_allocation']:.2f}, "
        f"scheduler_e2e={startup_time['scheduler_e2e']:.2f}, cuda_graph={{{graph}}}, "
        f"tokenizer_e2e={startup_time['tokenizer_e2e']:.2f}"
    )


def record(app: EmulatorApp, phases: dict[str, float], graph_s: float, draft_graph_s: float, e2e_s: float) -> None:
    """Once the scheduler is ready: keep the scheduler's and the engine's dicts on `app` (the
    emulator's one scheduler stands for every rank, so the maxima are its own figures) and, where
    the release does it, log the timings line (the launcher's logger: no rank prefix)."""
    app.scheduler_startup_time = scheduler_startup_time(phases, graph_s, draft_graph_s, e2e_s, app.cfg.spec_on)
    app.startup_time = {**app.scheduler_startup_time, "tokenizer_e2e": round(e2e_s, 3)}
    if app.cfg.facts.server_info_v2:
        app.log.info(timings_line(app.startup_time))
