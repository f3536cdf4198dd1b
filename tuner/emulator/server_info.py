"""The /server_info (and /get_server_info) body of the emulated release, from the server's live state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import dp
from .resolve import public_values
from .startup import graph_by_phase
from .versions import dp_rank_count

if TYPE_CHECKING:
    from .engine import Scheduler
    from .server import EmulatorApp


def server_info_body(app: EmulatorApp) -> dict[str, Any]:
    """The /server_info body of the emulated release.

    0.5.9 (http_server.py get_server_info): dataclasses.asdict(server_args) + scheduler_info
    (status, max_total_num_tokens, max_req_input_len) + internal_states (one per DP rank: the
    scheduler's server args + last_gen_throughput, memory_usage,
    effective_max_running_requests_per_dp, avg_spec_accept_length once counted) + version.
    The scheduler's copy of the arguments follows adaptive switches (0.5.12
    eagle_worker.py syncs server_args.speculative_num_steps; 0.5.23 overrides the context), so
    internal_states[0].speculative_num_steps is the depth in use while the top level keeps the
    launch value. 0.5.23 (utils/common.py build_server_info, internal_state.py) adds
    launch_command, kv_events, startup_time, frontend, and per rank world_size, startup_time,
    memory_usage.startup_available / token_capacity_swa and graph memory by phase (all six phases
    of model_executor/graph_memory_usage.py). Both startup_time fields are dicts of phases
    (startup.py): the engine's at the top, the scheduler's (no tokenizer_e2e) per rank.
    """
    facts = app.cfg.facts
    s = app.sched
    args = public_values(app.cfg.values)
    internal = dict(args)
    if s.speculative:
        internal["speculative_num_steps"] = s.k
        internal["speculative_num_draft_tokens"] = s.draft_tokens_now
    memory: dict[str, Any] = {
        "weight": round(app.memory["weights"], 2),
        "kvcache": round(app.memory["kv_total"], 2),
        "token_capacity": app.capacity.max_total_num_tokens,
        "graph": round(app.memory["graph"], 2),
    }
    if facts.server_info_v2:
        graph = app.memory["graph"]
        memory = {
            "weight": round(app.memory["weights"], 3),
            "kvcache": round(app.memory["kv_total"], 3),
            "startup_available": round(app.memory["final"], 3),
            "token_capacity": app.capacity.max_total_num_tokens,
            "token_capacity_swa": None,
            "graph": graph_by_phase(graph, app.memory["draft_graph"], s.speculative),
        }
        internal["world_size"] = app.cfg.values["tp_size"] * app.cfg.values["pp_size"]
        internal["startup_time"] = app.scheduler_startup_time
    internal.update(
        {
            "last_gen_throughput": 0.0,  # each rank's own (rank_state)
            "memory_usage": memory,
            "effective_max_running_requests_per_dp": app.capacity.max_running_requests,
        }
    )
    states = dp_rank_states(app, internal)
    info = dict(args)
    if facts.server_info_v2:
        info["launch_command"] = app.launch_command
    info.update(
        {
            "status": "ready" if app.status == "up" else app.status,
            "max_total_num_tokens": app.capacity.max_total_num_tokens,
            "max_req_input_len": app.max_req_input_len,
        }
    )
    if facts.server_info_v2:
        info["kv_events"] = None
        info["startup_time"] = app.startup_time
    info["internal_states"] = states
    info["version"] = app.version
    if facts.server_info_v2:
        info["frontend"] = "python"
    info["emulator"] = {
        "profile": app.p.name,
        "profile_path": app.p.path,
        "sglang_version": facts.version,
        "faults": app.faults.describe(),
        "adaptive": s.policy.describe() if s.policy is not None else None,
        "steps_histogram": {str(k): n for k, n in sorted(_steps_histogram(app.scheds).items())},
        "step_switches": dp.total(app.scheds, "step_switches"),
        "noise": s.noise.describe() if s.noise is not None else None,
        # how well the real-time driver kept the model's clock (bench/emulator_speed.py reads these)
        "clock": app.clock(),
    }
    return info


def dp_rank_states(app: EmulatorApp, state: dict[str, Any]) -> list[dict[str, Any]]:
    """One internal state per DP rank, in the order the ranks answer.

    Each DP replica (dp.py) is its own scheduler and answers with its own depth in use, generation
    throughput and avg_spec_accept_length, which a rank adds only after its own first verify pass
    (`spec_total_num_forward_ct > 0`: 0.5.9/0.5.12 scheduler.py get_internal_state, 0.5.23
    scheduler_components/internal_state.py _add_speculative). Under attention DP the emulator runs
    one scheduler for DP rank 0; the other ranks answer as idle schedulers (no throughput, no
    avg_spec_accept_length). The tokenizer collects the answers as they arrive until its fan-out,
    the DP rank count, is reached (0.5.9 tokenizer_communicator_mixin.py
    `_Communicator.handle_recv`, 0.5.12/0.5.23 managers/communicator.py); an idle scheduler reads
    the request at once, a busy one between forward passes, so the idle ranks come first."""
    live = [(rank_state(s, state), dp.busy(s)) for s in app.scheds]
    idle = [
        {**state, "last_gen_throughput": 0.0} for _ in range(dp_rank_count(app.cfg.facts, app.cfg.values) - len(live))
    ]
    return [st for st, b in live if not b] + idle + [st for st, b in live if b]


def rank_state(s: Scheduler, state: dict[str, Any]) -> dict[str, Any]:
    """One scheduler's internal state: the shared arguments with its own depth, throughput and
    acceptance."""
    out = dict(state)
    if s.speculative:
        out["speculative_num_steps"] = s.k
        out["speculative_num_draft_tokens"] = s.draft_tokens_now
    out["last_gen_throughput"] = s.last_gen_throughput
    avg = s.avg_spec_accept_length()
    if avg is not None:
        out["avg_spec_accept_length"] = avg
    return out


def _steps_histogram(scheds: list[Scheduler]) -> dict[int, int]:
    """Decode steps run at each depth, over the DP replicas."""
    out: dict[int, int] = {}
    for s in scheds:
        for k, n in s.steps_histogram.items():
            out[k] = out.get(k, 0) + n
    return out
