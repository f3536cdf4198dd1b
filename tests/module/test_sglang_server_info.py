"""/server_info, /get_server_info and /v1/models parsing across versions (shapes from docs/reference/sglang.md §3.1)."""

from __future__ import annotations

from sglang_utils import sglang_server_info as S

# Shape of a 0.5.9 body: asdict(server_args) + scheduler info + internal_states + version (docs/reference/sglang.md §3.1).
INFO_059 = {
    "model_path": "/models/Qwen3.5-122B-A10B",
    "served_model_name": "qwen3.5-122b",
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "max_running_requests": 48,
    "chunked_prefill_size": 8192,
    "max_prefill_tokens": 16384,
    "context_length": None,
    "tp_size": 4,
    "dp_size": 1,
    "mem_fraction_static": 0.842,
    "api_key": "sk-secret",
    "status": "ready",
    "max_total_num_tokens": 1763904,
    "max_req_input_len": 262138,
    "internal_states": [
        {
            "effective_max_running_requests_per_dp": 27,
            "avg_spec_accept_length": 3.12,
            "memory_usage": {"weight": 63.7, "kvcache": 10.1, "token_capacity": 1763904, "graph": 1.02},
        }
    ],
    "version": "0.5.9",
}


def test_059_body():
    out = S.parse_server_info(INFO_059)
    assert out["version"] == "0.5.9" and out["served_model_name"] == "qwen3.5-122b"
    assert out["max_total_num_tokens"] == 1763904
    assert out["max_running_requests"] == 27 and out["max_running_requests_arg"] == 48
    assert out["speculative"] == {
        "enabled": True,
        "algorithm": "EAGLE",
        "num_steps": 3,
        "eagle_topk": 1,
        "num_draft_tokens": 4,
        "adaptive": False,  # 0.5.9 has no --speculative-adaptive
        "adaptive_config": None,
    }
    assert out["avg_spec_accept_length"] == 3.12 and out["kv_token_capacity"] == 1763904
    assert out["context_length"] is None and out["launch_command"] is None
    assert "sk-secret" not in repr(out)


def test_0523_body_with_launch_command_and_adjustment():
    body = dict(
        INFO_059,
        version="0.5.23",
        launch_command="python -m sglang.launch_server --model-path /m --speculative-algo NEXTN "
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens=6",
    )
    out = S.parse_server_info(body)
    assert out["launch_command"][:3] == ["python", "-m", "sglang.launch_server"]
    req = S.requested_speculative(out["launch_command"])
    assert req == {"algorithm": "NEXTN", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 6}
    assert S.draft_tokens_adjusted(req, out["speculative"]) is True
    assert (
        S.draft_tokens_adjusted(S.requested_speculative(["--speculative-num-steps", "3"]), out["speculative"]) is None
    )


def test_old_body_without_internal_states_and_spec_off():
    body = {
        "model_path": "/m",
        "served_model_name": "m",
        "speculative_algorithm": None,
        "speculative_num_steps": 5,
        "speculative_eagle_topk": 4,
        "speculative_num_draft_tokens": 8,
        "max_running_requests": None,
        "max_total_num_tokens": 46611,
        "version": "0.5.5.post3",
    }
    out = S.parse_server_info(body)
    assert out["speculative"] == {
        "enabled": False,
        "algorithm": None,
        "num_steps": None,
        "eagle_topk": None,
        "num_draft_tokens": None,
        "adaptive": None,
        "adaptive_config": None,
    }
    assert out["max_running_requests"] is None and out["max_total_num_tokens"] == 46611


def test_garbage_shapes_give_nulls_not_errors():
    for body in (
        None,
        [],
        "x",
        {"internal_states": "nope"},
        {"internal_states": [None]},
        {"max_total_num_tokens": "12", "tp_size": True, "served_model_name": ["a", "b"]},
    ):
        out = S.parse_server_info(body)
        assert set(out) >= {"version", "max_total_num_tokens", "speculative"}
    odd = S.parse_server_info({"max_total_num_tokens": "12", "tp_size": True, "served_model_name": ["a", "b"]})
    assert odd["max_total_num_tokens"] == 12 and odd["tp_size"] is None and odd["served_model_name"] == "a"


def test_nested_server_args_shape():
    out = S.parse_server_info(
        {"server_args": {"served_model_name": "x", "chunked_prefill_size": 4096}, "max_total_num_tokens": 10}
    )
    assert out["served_model_name"] == "x" and out["chunked_prefill_size"] == 4096


def test_models_body():
    body = {
        "object": "list",
        "data": [{"id": "qwen3.5-122b", "object": "model", "owned_by": "sglang", "max_model_len": 262144}],
    }
    assert S.parse_models(body) == {"served_model_name": "qwen3.5-122b", "max_model_len": 262144}
    assert S.parse_models({"data": []}) == {"served_model_name": None, "max_model_len": None}


def test_server_info_paths_order():
    assert S.SERVER_INFO_PATHS == ("/server_info", "/get_server_info")


def test_body_without_speculative_keys_does_not_claim_spec_off():
    out = S.parse_server_info({"version": "0.5.9", "max_total_num_tokens": 5})
    assert out["speculative"]["enabled"] is None


def _dp_rank_state(accept: float | None) -> dict:
    """One DP rank's entry of 0.5.9's internal_states (scheduler.py get_internal_state: the
    server args, last_gen_throughput, memory_usage, effective_max_running_requests_per_dp, and
    avg_spec_accept_length only once this rank's spec_total_num_forward_ct > 0)."""
    state = {
        "dp_size": 2,
        "enable_dp_attention": True,
        "last_gen_throughput": 812.4,
        "memory_usage": {"weight": 31.9, "kvcache": 20.2, "token_capacity": 881952, "graph": 1.02},
        "effective_max_running_requests_per_dp": 24,
    }
    if accept is not None:
        state["avg_spec_accept_length"] = accept
    return state


def test_the_acceptance_is_every_dp_ranks_not_the_first_to_answer():
    """`internal_states` lists the DP ranks in the order their answers arrived (0.5.9
    tokenizer_communicator_mixin.py `_Communicator.handle_recv`, fan-out dp_size): the first entry
    may be a rank that has run no verify pass yet, or one rank's share alone."""
    body = dict(INFO_059, dp_size=2, tp_size=2, internal_states=[_dp_rank_state(None), _dp_rank_state(2.9)])
    assert S.parse_server_info(body)["avg_spec_accept_length"] == 2.9
    body["internal_states"] = [_dp_rank_state(3.25), _dp_rank_state(2.75)]
    assert S.parse_server_info(body)["avg_spec_accept_length"] == 3.0
    body["internal_states"] = [_dp_rank_state(None), _dp_rank_state(None)]
    assert S.parse_server_info(body)["avg_spec_accept_length"] is None


def test_0_4_bodies_keep_the_acceptance_at_the_top_level():
    """0.4.x /get_server_info merges the scheduler's internal state into the body's top level."""
    body = {
        "version": "0.4.6",
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "avg_spec_accept_length": 2.7,
    }
    assert S.parse_server_info(body)["avg_spec_accept_length"] == 2.7


# The relevant keys, verbatim, of the /get_server_info body in SGLang's docs notebook "SGLang Native
# APIs" (sgl-project.github.io, CI run 2026-03-20, a source build), speculation added as a decode
# server of a prefill/decode pair would run it.
_NB_ARGS = {
    "model_path": "qwen/qwen2.5-0.5b-instruct",
    "context_length": None,
    "mem_fraction_static": 0.907,
    "max_running_requests": 128,
    "chunked_prefill_size": 8192,
    "max_prefill_tokens": 16384,
    "tp_size": 1,
    "dp_size": 1,
    "served_model_name": "qwen/qwen2.5-0.5b-instruct",
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "disaggregation_mode": "decode",
}
_NB_STATE = {**_NB_ARGS, "memory_usage": {"token_capacity": 20480}, "effective_max_running_requests_per_dp": 128}
NB_DECODE = {
    **_NB_ARGS,
    "status": "ready",
    "max_total_num_tokens": 20480,
    "max_req_input_len": 20474,
    "internal_states": [_NB_STATE],
    "version": "0.0.0.dev1+gf97c09dac",
}


def test_behind_a_prefill_decode_router_the_decode_servers_body_is_read():
    """SGLang's mini_lb nests its servers' bodies under prefill/decode, sgl-router's PD router under
    decode_servers (sgl-project/sglang PR #7731): version, capacity and speculation were all null."""
    direct = S.parse_server_info(NB_DECODE)
    assert direct["version"] == "0.0.0.dev1+gf97c09dac" and direct["max_total_num_tokens"] == 20480
    prefill = {**NB_DECODE, "disaggregation_mode": "prefill", "speculative_algorithm": None}
    for body in (
        {"internal_states": [_NB_STATE], "prefill": [prefill], "decode": [NB_DECODE]},
        {"internal_states": [_NB_STATE], "decode_servers": [NB_DECODE]},
    ):
        assert S.parse_server_info(body) == direct
    # a release whose internal states carry no speculative keys: the decode body still says them
    old = S.parse_server_info({"internal_states": [{"chunked_prefill_size": 8192}], "decode": [NB_DECODE]})
    assert old["speculative"]["num_steps"] == 3 and old["max_total_num_tokens"] == 20480


def test_data_parallel_ranks_multiply_the_admission_limit():
    """DP attention: effective_max_running_requests_per_dp is one rank's limit; the server admits
    dp_size times as many (SGLang's bench_one_batch_server multiplies the same way)."""
    from sglang_utils.sglang_gate_report import Capacity

    states = [{**_NB_STATE, "effective_max_running_requests_per_dp": 6} for _ in range(8)]
    info = S.parse_server_info({**NB_DECODE, "dp_size": 8, "max_running_requests": 48, "internal_states": states})
    cap = Capacity.merge({}, info)
    assert (cap.max_running_requests, cap.dp_size, cap.admits) == (6, 8, 48)
    assert cap.to_json()["dp_size"] == 8
    one = Capacity.merge({}, S.parse_server_info(NB_DECODE))
    assert one.admits == 128 and "dp_size" not in one.to_json()  # one rank: the report as before
    # 0.5.23 says the same server as dp_size 1, attn_dp_size 8 (`--dp-size 8 --enable-dp-attention`
    # resolves so: arg_groups/parallel_hook.py), with its resolved enable_dp_attention kept true
    new = {**NB_DECODE, "dp_size": 1, "attn_dp_size": 8, "enable_dp_attention": True}
    cap = Capacity.merge({}, S.parse_server_info({**new, "max_running_requests": 48, "internal_states": states}))
    assert (cap.max_running_requests, cap.dp_size, cap.admits) == (6, 8, 48)
