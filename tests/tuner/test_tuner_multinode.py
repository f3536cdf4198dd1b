"""Multi-node groups in the tuner (issue 21): each group is one slot, its rank 0 first (the role's
rank order, plugins/module_utils/sglang_multinode.py), and several groups are swept in parallel."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tuner.run.deploy import Deployer, project_root
from tuner.run.inventory import read_inventory
from tuner.spec.configs import SpecConfig

FIXTURES = Path(__file__).parent / "fixtures"


def test_each_group_is_one_slot_with_rank_0_first():
    inv = read_inventory(FIXTURES / "multinode_groups_inventory.yml", None, project_root())
    assert inv.slots() == {
        "tp_a": ["a-1", "a-2"],
        "tp_b": ["b-3", "b-1", "b-2"],  # sglang_server_multinode_head, then inventory order
        "single-c": ["single-c"],
    }


@pytest.mark.slow
def test_two_groups_deploy_in_parallel_each_as_one_server(tmp_path):
    """Real ansible-runner, the fake play (fixtures/fake_deploy.yml): both groups at once, each
    limited to its own hosts and benchmarked at its rank 0."""
    inv = FIXTURES / "multinode_groups_inventory.yml"
    d = Deployer(
        inventory=inv,
        out_dir=tmp_path,
        playbook=str(FIXTURES / "fake_deploy.yml"),
        slots=read_inventory(inv, None, project_root()).slots(),
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        a, b = pool.map(lambda slot: d.deploy(SpecConfig(2), slot, label=slot), ["tp_a", "tp_b"])
    assert a.ok and b.ok, (a.reason, b.reason)
    assert a.record().hosts == ["a-1", "a-2"] and b.record().hosts == ["b-3", "b-1", "b-2"]
    for slot, head in (("tp_a", "a-1"), ("tp_b", "b-3")):
        events = [json.loads(x) for x in (tmp_path / "deploy" / slot / "events.jsonl").read_text().splitlines()]
        hosts = {e["event_data"].get("host") for e in events if e["event"] == "runner_on_ok"}
        assert hosts == set(d.members(slot)) and d.members(slot)[0] == head
