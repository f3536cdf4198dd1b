"""The planner under `--search model` (the default): --resume with --repeat-deploys, and a
configuration whose server went away twice, as the grid's path treats them (tuner/run/planner.py)."""

from __future__ import annotations

import io

import pytest
from test_tuner_search import Machine, W

from tuner.data.records import BenchFailedRecord, VerifyRecord
from tuner.data.store import MemoryStore
from tuner.run.levels import Progress
from tuner.run.planner import Planner
from tuner.spec.configs import plan_configs
from tuner.spec.sweepspec import SweepSpec

PLAN = plan_configs((1, 2, 3, 4, 5), (1,), (None,))
M = Machine(accept=[0.8, 0.7, 0.6, 0.5, 0.45])


def drive(planner: Planner, store: MemoryStore, limit: int = 20) -> list[tuple[str, int]]:
    """Run the planner to its end on the machine, one unit at a time (one host)."""
    got = []
    for _ in range(limit):
        unit = planner.next_unit()
        if not isinstance(unit, tuple):
            break
        cfg, dep = unit
        got.append((cfg.config_id, dep))
        for rec in M.measure(cfg):
            rec.deployment = dep
            store.append(rec)
        planner.in_progress.discard((cfg.config_id, dep))
        planner.finished.add((cfg.config_id, dep))
    return got


def planner(spec: SweepSpec, store: MemoryStore) -> Planner:
    return Planner(spec=spec, plan=PLAN, store=store, progress=Progress(stream=io.StringIO()))


@pytest.mark.parametrize("search", ["model", "grid"])
def test_resume_after_the_first_round_runs_the_repeat_rounds(search):
    """A model sweep never runs the planner's round 1 (the search is its round 1), so on --resume
    nothing marked an earlier process's configurations finished and round 2 was never run."""
    spec = SweepSpec(workload=W, search=search, schedule=False, repeat_deploys=2)
    store = MemoryStore()
    whole = drive(planner(spec, store), store)
    second = sorted(u for u in whole if u[1] == 2)
    assert second and len(second) == len({cid for cid, _ in whole})
    interrupted = MemoryStore()
    for rec in store.records():
        if rec.get("deployment", 1) == 1:
            interrupted.append(rec)
    assert sorted(drive(planner(spec, interrupted), interrupted)) == second


@pytest.mark.parametrize("search", ["model", "grid"])
def test_resume_does_not_redeploy_a_configuration_whose_server_went_away_twice(search):
    store = MemoryStore()
    cfgs = {c.spec_steps: c for c in PLAN.configs}
    for k in (2, 4):
        for rec in M.measure(cfgs[k]):
            store.append(rec)
    recs = M.measure(cfgs[3])
    for rec in recs[:3]:  # the deploy and levels C=1, C=4
        store.append(rec)
    lost = recs[3]
    lost.server_lost = True
    store.append(lost)
    store.append(BenchFailedRecord(config=cfgs[3], host="h", reason="the server went away twice", kind="server_lost"))
    assert "k3-t1" in store.state().unstable
    got = drive(planner(SweepSpec(workload=W, search=search, schedule=False), store), store)
    assert ("k3-t1", 1) not in got


@pytest.mark.parametrize("search", ["model", "grid"])
def test_a_failed_gate_verdict_stands_and_is_not_deployed_again(search):
    """With --repeat-deploys, a configuration that failed the correctness gate on its first
    deployment is not redeployed, and a pass on a later one (a drift each restart replays, a
    near-tie the threshold rule reads the other way) does not clear the failure."""
    spec = SweepSpec(workload=W, search=search, schedule=False, repeat_deploys=2)
    store = MemoryStore()
    k3 = next(c for c in PLAN.configs if c.spec_steps == 3)
    for rec in M.measure(k3):
        store.append(rec)
    store.append(VerifyRecord(config=k3, host="h", passed=False, reasons=["outputs differ from the baseline"]))
    assert "k3-t1" in store.state().verify_failed
    got = drive(planner(spec, store), store)
    assert ("k3-t1", 2) not in got and ("k2-t1", 2) in got, got
    # a later pass (as an earlier version's redeploy recorded one) leaves the failure standing
    store.append(VerifyRecord(config=k3, host="h", passed=True, deployment=2))
    st = store.state()
    assert "k3-t1" in st.verify_failed and not st.verify["k3-t1"].passed
    # a verdict that could not be had first ("not checked"), then a pass: the pass counts
    k4 = next(c for c in PLAN.configs if c.spec_steps == 4)
    store.append(VerifyRecord(config=k4, host="h", passed=False, reasons=["not checked: no baseline"]))
    assert "k4-t1" in store.state().verify_failed
    store.append(VerifyRecord(config=k4, host="h", passed=True, deployment=2))
    assert "k4-t1" not in store.state().verify_failed
    assert store.state().verify_runs["k4-t1"] == 1  # one gate ran: "not checked" is none


def test_resume_measures_a_configuration_deployed_but_stopped_before_its_first_level_ended():
    """The deploy record is written once the server is up: a run stopped during the warm-up or the
    first level leaves a configuration deployed with no level. docs/tuner.md "--resume": it is
    deployed again and measured, under --search model as under the grid."""
    spec = SweepSpec(workload=W, search="model", schedule=False)
    store = MemoryStore()
    p = planner(spec, store)
    order = []
    for _ in range(20):
        unit = p.next_unit()
        assert isinstance(unit, tuple)
        cfg, dep = unit
        order.append(cfg.config_id)
        if len(order) == 3:  # the first one the search names past the two anchors: stopped once up
            store.append(M.measure(cfg)[0])
            break
        for rec in M.measure(cfg):
            store.append(rec)
        p.in_progress.discard((cfg.config_id, dep))
        p.finished.add((cfg.config_id, dep))
    stopped = order[-1]
    assert store.state().has_levels(stopped) is False and stopped in store.state().deploys
    resumed = drive(planner(spec, store), store)
    assert resumed[0] == (stopped, 1), resumed
