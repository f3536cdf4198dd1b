"""Per-batch-size schedules (tuner/decide/schedule.py): built from level winners, routed as SGLang routes."""

from __future__ import annotations

import pytest

from tuner.decide.schedule import LevelWinner, Schedule, build_schedule, pad_to_graph_bs, sglang_spec_cuda_graph_bs

GRAPH = sglang_spec_cuda_graph_bs(48)


def test_sglang_graph_batch_sizes():
    assert GRAPH[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12]
    assert GRAPH[-3:] == [40, 44, 48]
    # 0.5.23 appends max_bs itself when the series skips it
    assert sglang_spec_cuda_graph_bs(17)[-2:] == [16, 17]
    assert pad_to_graph_bs(9, GRAPH) == 10 and pad_to_graph_bs(33, GRAPH) == 40 and pad_to_graph_bs(60, GRAPH) == 60


def test_routing_pads_then_takes_the_floor_bucket():
    s = Schedule.from_mapping({"1": 4, "16": 3})
    assert [s.route(b, GRAPH) for b in (1, 8, 13, 15, 16, 17, 48)] == [4, 4, 4, 3, 3, 3, 3]
    # 15 pads to 16 on the captured sizes: it already runs the high-load depth
    assert s.route(15) == 4  # without graphs (padding off) it does not
    assert s.widest == 4 and s.steps == [3, 4]


def test_seed_shaped_winners_give_the_seed_schedule():
    # depth 4 wins at 1 and 4 concurrent requests, depth 3 at 16+; at C=32/64 admission caps the
    # running batch at 17 (max_running_requests), which is what the server reports
    winners = [
        LevelWinner(1, 1.0, 4),
        LevelWinner(4, 4.0, 4),
        LevelWinner(16, 15.6, 3),
        LevelWinner(32, 17.0, 3),
        LevelWinner(64, 17.0, 3),
    ]
    s = build_schedule(winners, sizes=GRAPH)
    assert s.to_sglang() == {"1": {"candidate_steps": [4]}, "8": {"candidate_steps": [3]}}
    for w in winners:
        assert s.route(round(w.running_batch)) == w.steps
    # a server told to pad (--cuda-graph-bs-decode) routes padded sizes: still every level's winner
    padded = build_schedule(winners, padding=GRAPH)
    for w in winners:
        assert padded.route(round(w.running_batch), GRAPH) == w.steps
    assert s.to_vllm(48) == [[1, 7, 4], [8, 48, 3]]
    assert s.config_id == "sched-1k4-8k3"


def test_levels_padded_to_one_size_share_a_bucket_and_the_stronger_preference_wins():
    s = build_schedule([LevelWinner(32, 17.0, 3, score=0.2), LevelWinner(64, 17.4, 2, score=0.9)], padding=GRAPH)
    assert s.buckets == ((1, 2),)


def test_no_drafting_bucket_and_merging():
    s = build_schedule([LevelWinner(1, 1, 5), LevelWinner(4, 4, 5), LevelWinner(64, 48, 0)], sizes=GRAPH)
    assert s.buckets[0] == (1, 5) and s.buckets[-1][1] == 0
    assert s.route(1, GRAPH) == 5 and s.route(4, GRAPH) == 5 and s.route(48, GRAPH) == 0


@pytest.mark.parametrize("bad", [{"2": 3}, {}, {"1": -1}])
def test_invalid_schedules_are_refused(bad):
    with pytest.raises(ValueError):
        Schedule.from_mapping(bad)
