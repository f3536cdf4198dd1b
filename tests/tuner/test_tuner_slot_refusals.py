"""A configuration the role refuses on some slots only (tuner/spec/refusals.py, per slot: ConfigPlan
.slot_refusal) stays planned, and each slot's worker takes only what its own role runs. The workers
took the next planned configuration whatever the slot: on a host with a LoRA adapter on SGLang 0.5.9
(the role's default release) a NEXTN depth failed in the play's preflight ('Currently LoRA is only
compatible with NGRAM speculative decoding.') and counted as a failed configuration, though the other
host runs it."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import threading
from types import SimpleNamespace

import pytest
from test_tuner_confirm import cell
from test_tuner_search import Machine, W
from tuner_testlib import ROOT

from tuner.data.store import MemoryStore
from tuner.run.inventory import Inventory
from tuner.run.levels import Progress
from tuner.run.sweep import Sweep
from tuner.run.together import together
from tuner.spec.configs import SpecConfig, spec_plan
from tuner.spec.refusals import NODE_VARS, role_defaults
from tuner.spec.sweepspec import SweepSpec, WorkloadSpec

LORA = {"sglang_server_extra_flags": {"lora-paths": "chat=/models/lora-chat"}}
LORA_WORDS = "sglang_server_extra_flags' LoRA adapter with spec_algorithm=NEXTN: SGLang 0.5.9 refuses it at start"
HOSTS = {"gpu1": LORA, "gpu2": {}}  # gpu1's role refuses every NEXTN depth; gpu2's runs them
M = Machine(accept=[0.8, 0.7, 0.6, 0.5, 0.45, 0.4])


def two_slots(search: str, hosts: dict[str, dict] = HOSTS) -> tuple[Sweep, io.StringIO]:
    """A sweep of k0-k6 over the two hosts, its plan judged against each slot's settings as cli.py
    judges it (the inventory's variables over the role's defaults)."""
    inv = Inventory(hosts=list(hosts), hostvars=hosts, groups={}, has_group=True)
    spec = SweepSpec(workload=W, steps=tuple(range(7)), search=search, schedule=False, confirm=0)
    plan = spec_plan(spec, {}, inv.slot_nodes(NODE_VARS, spec.extra_vars, role_defaults(ROOT)))
    log = io.StringIO()
    sweep = Sweep(
        spec=spec, plan=plan, store=MemoryStore(), deployer=None, hosts=list(inv.slots()), progress=Progress(stream=log)
    )
    return sweep, log


@pytest.mark.parametrize("search", ["grid", "model"])
def test_a_configuration_one_slot_refuses_runs_only_on_the_other(search):
    sweep, log = two_slots(search)
    assert [c.config_id for c in sweep.plan.configs][:3] == ["k0", "k1-t1", "k2-t1"]  # planned: gpu2 runs them
    ran: list[tuple[str, str]] = []

    async def run_config(cfg: SpecConfig, host: str, deployment: int = 1, levels=None) -> None:
        """The deploy and the levels, as the machine would measure them (a deploy takes a while,
        so both hosts are busy at once)."""
        ran.append((cfg.config_id, host))
        await asyncio.sleep(0.01 * (1 + cfg.spec_steps % 3))
        for rec in M.measure(cfg):
            rec.host, rec.deployment = host, deployment
            sweep.store.append(rec)

    sweep.run_config = run_config  # type: ignore[method-assign]

    async def both() -> None:
        await asyncio.wait_for(together(*(sweep._worker(h) for h in sweep.hosts)), 60)

    asyncio.run(both())
    speculative = [(cid, host) for cid, host in ran if cid != "k0"]
    assert ("k0", "gpu1") in ran  # the slot still runs what its role accepts
    assert len(speculative) >= 2 and {host for _, host in speculative} == {"gpu2"}, ran
    assert not sweep.store.state().failed
    out = log.getvalue()
    assert f"kept off gpu1: its role refuses it there ({LORA_WORDS}" in out, out
    # said once per configuration and slot, never of the slot that runs it
    assert all(out.count(f"[{cfg.label}] kept off gpu1") <= 1 for cfg in sweep.plan.configs)
    assert "kept off gpu2" not in out


def test_the_confirmation_round_and_deploy_best_place_a_configuration_where_its_role_runs_it():
    """The confirmation round zipped its plans with the hosts in order, and --deploy-best deployed on
    every host: a refused configuration on gpu1 failed its preflight. Now each goes to a free host
    that runs it, and one whose hosts are taken waits for the next round."""
    sweep, log = two_slots("grid")
    k0, k2, k3 = SpecConfig(0), SpecConfig(2), SpecConfig(3)
    assert sweep.planner.place([k2, k0], lambda c: c) == [(k2, "gpu2"), (k0, "gpu1")]
    assert sweep.planner.place([k2, k3, k0], lambda c: c) == [(k2, "gpu2"), (k0, "gpu1")]
    assert [h for h in sweep.hosts if sweep.planner.runs(k3, h)] == ["gpu2"]
    assert log.getvalue().count(f"[{k3.label}] kept off gpu1") == 1


def _drive(sweep: Sweep, ran: list[tuple[str, str]]) -> None:
    """Both slots' workers, each configuration measured whole as the machine would measure it."""

    async def run_config(cfg: SpecConfig, host: str, deployment: int = 1, levels=None) -> None:
        ran.append((cfg.config_id, host))
        await asyncio.sleep(0.01)
        for rec in M.measure(cfg):
            rec.host, rec.deployment = host, deployment
            sweep.store.append(rec)

    sweep.run_config = run_config  # type: ignore[method-assign]
    asyncio.run(asyncio.wait_for(together(*(sweep._worker(h) for h in sweep.hosts)), 60))


@pytest.mark.parametrize("records", ["deploy", "one level"])
def test_a_resumed_half_measured_configuration_one_slot_refuses_is_finished_on_the_other(records):
    """`--resume` of a model search whose last run stopped while k3 was deployed (its deploy record
    alone, or one level in): it is finished first, by the slot that runs it. The refusing slot
    (gpu1, asking first) passed over it and, with nothing else open, ended the search for every
    slot ("[search] done"): k3 was never measured whole."""
    sweep, log = two_slots("model")
    k3 = next(c for c in sweep.plan.configs if c.config_id == "k3-t1")
    for cfg in sweep.plan.configs:
        recs = M.measure(cfg)
        if cfg is k3:
            recs = recs[: 1 if records == "deploy" else 2]
        for rec in recs:
            rec.host = "gpu2"
            sweep.store.append(rec)
    ran: list[tuple[str, str]] = []
    _drive(sweep, ran)
    assert ran == [("k3-t1", "gpu2")], (ran, log.getvalue())
    assert sweep.planner._all_levels_done("k3-t1")


def test_a_pick_no_host_of_a_resumed_sweep_runs_is_said_so():
    """`--resume --limit gpu1` of a sweep whose k3 was measured on gpu2: --deploy-best deploys it
    nowhere. The log said gpu1 refused it and "another host runs it" (none does), and nothing of
    --deploy-best itself."""
    sweep, log = two_slots("grid", {"gpu1": LORA})
    k3 = SpecConfig(3)
    summary = SimpleNamespace(recommendation=SimpleNamespace(chosen=SimpleNamespace(config=k3)))
    assert asyncio.run(sweep._deploy_best(summary)) is False  # type: ignore[arg-type]
    out = log.getvalue()
    assert f"[{k3.label}] kept off gpu1: its role refuses it there ({LORA_WORDS}" in out, out
    assert "another host runs it" not in out and out.count("; no host does") == 1, out
    assert f"--deploy-best: nothing deployed: the role of every host refuses {k3.label}" in out, out


def test_a_confirmation_no_host_runs_gives_way_to_the_next_contender():
    """`--resume --limit gpu1` (LoRA: NEXTN refused) of a sweep that measured k2, k3 (NEXTN) and
    NGRAM k3 on gpu2, all close: the round asked for one plan per host, got k3 (the most urgent),
    which gpu1 refuses, and ended ("the role of every host refuses k=3") without confirming the
    NGRAM depth gpu1 runs."""
    sweep, log = two_slots("grid", {"gpu1": LORA})
    w = WorkloadSpec(concurrency=(4,), input_len=256, output_len=256)
    sweep.spec = sweep.planner.spec = dataclasses.replace(sweep.spec, confirm=2, workload=w)
    sweep.deployer = SimpleNamespace(cancel=threading.Event())  # type: ignore[assignment]
    sweep._rebuild = lambda: None  # type: ignore[method-assign]
    ngram = SpecConfig(3, spec_algorithm="NGRAM")
    for rec in cell(2, 1000) + cell(3, 1010) + cell(0, 1005):
        rec.config = ngram if rec.config.spec_steps == 0 else rec.config
        sweep.store.append(rec)
    ran: list[tuple[str, str, int]] = []

    async def run_config(cfg: SpecConfig, host: str, deployment: int = 1, levels=None) -> None:
        ran.append((cfg.config_id, host, deployment))

    sweep.run_config = run_config  # type: ignore[method-assign]
    asyncio.run(sweep._confirm_round())
    out = log.getvalue()
    assert ran == [(ngram.config_id, "gpu1", 2)], (ran, out)
    assert "[confirm] done (the role of every host refuses" in out, out


def _measured_then_resumed(tmp_path):
    """A grid sweep of k0-k6 measured whole on both hosts (gpu2 ran the NEXTN depths), then
    `--resume --limit gpu1`: gpu1's role refuses every NEXTN depth, so the resumed plan sets them
    all aside (ConfigPlan.set_aside_refused)."""
    from tuner.data.store import Store

    first, _ = two_slots("grid")
    store = Store(tmp_path)
    for cfg in first.plan.configs:
        for rec in M.measure(cfg):
            rec.host = "gpu1" if cfg.spec_steps == 0 else "gpu2"
            store.append(rec)
    sweep, log = two_slots("grid", {"gpu1": LORA})
    assert not sweep.plan.configs[1:] and len(sweep.plan.infeasible) == 6  # k0 alone is left to run
    sweep.store = sweep.planner.store = store
    sweep.deployer = SimpleNamespace(cancel=threading.Event())  # type: ignore[assignment]
    return sweep, log, store


def test_a_resume_on_hosts_that_all_refuse_a_measured_configuration_keeps_its_measurements(tmp_path):
    """`--resume --limit gpu1` wrote an `infeasible` skip for each NEXTN depth gpu2 had measured:
    the report said each "was not deployed" and the state's set-aside named measured
    configurations. Now nothing is written for them, the log says why the resume runs nothing new
    of them (in the play's words), and the recommendation still stands on their measurements."""
    sweep, log, store = _measured_then_resumed(tmp_path)
    ran: list[str] = []

    async def run_config(cfg: SpecConfig, host: str, deployment: int = 1, levels=None) -> None:
        ran.append(cfg.config_id)

    sweep.run_config = run_config  # type: ignore[method-assign]
    rc = asyncio.run(sweep._run(threading.Event()))
    out = log.getvalue()
    assert ran == [] and rc == 0, (ran, out)  # k0 was measured: nothing to run
    assert [r for r in store.records() if r["type"] == "skip"] == []
    st = store.state()
    assert st.skipped == {} and st.set_aside == set()
    k3 = SpecConfig(3)
    assert out.count(f"[{k3.label}] ") == 1, out
    said = f"[{k3.label}] measured in an earlier run; nothing more of it runs here: the role of every host refuses it"
    assert f"{said} ({LORA_WORDS}" in out, out
    report = (tmp_path / "report.md").read_text()
    assert "was not deployed" not in report, report
    rec = json.loads((tmp_path / "recommendation.json").read_text())
    refused = {c.config_id for c, _ in sweep.plan.infeasible}
    assert set(rec["recommended"]["scores"]) == {"k0"} | refused, rec["recommended"]  # every one competes
    assert rec["by_concurrency"]["1"]["config_id"] in refused  # a NEXTN depth gpu2 measured wins C=1
    assert rec["skipped"] == []


def test_an_infeasible_skip_written_after_measurements_does_not_shadow_them(tmp_path):
    """records.jsonl of a sweep resumed before the fix: the skip came after k3's levels. Folded, k3
    is measured, not set aside, and the report names no skip of it."""
    from tuner.data.records import SkipRecord
    from tuner.data.store import Store

    sweep, _log, store = _measured_then_resumed(tmp_path)
    k3 = SpecConfig(3)
    why = dict((c.config_id, w) for c, w in sweep.plan.infeasible)[k3.config_id]
    store.append(SkipRecord(config=k3, kind="infeasible", reason=why))
    st = Store(tmp_path).state()  # read back from the file, as --resume and `report` read it
    assert k3.config_id not in st.skipped and k3.config_id not in st.set_aside
    assert st.has_levels(k3.config_id) and k3.config_id not in st.terminal()
    # one set aside before anything of it was measured is still a skip
    k7 = SpecConfig(7)
    store.append(SkipRecord(config=k7, kind="infeasible", reason=why))
    assert Store(tmp_path).state().set_aside == {k7.config_id}


@pytest.mark.parametrize("search", ["grid", "model"])
def test_a_configuration_a_limited_resume_set_aside_is_measured_by_a_resume_on_hosts_that_run_it(search):
    """`--limit gpu1` (LoRA: every NEXTN depth refused) recorded the NEXTN depths as `infeasible`
    skips; a later `--resume` on both hosts, gpu2 running them, treated those skips as decided and
    measured none of them (the report said each "was not deployed"). A set-aside holds for the run
    whose hosts refuse it: one whose plan runs the configuration measures it."""
    limited, _ = two_slots(search, {"gpu1": LORA})
    for rec in M.measure(SpecConfig(0)):
        rec.host = "gpu1"
        limited.store.append(rec)
    limited.planner.set_aside()
    assert {r.kind for r in limited.store.state().skipped.values()} == {"infeasible"}
    sweep, log = two_slots(search)
    sweep.store = sweep.planner.store = limited.store
    ran: list[tuple[str, str]] = []
    _drive(sweep, ran)
    assert ran and {host for _, host in ran} == {"gpu2"}, (ran, log.getvalue())
    assert not any(sk.kind == "infeasible" for sk in sweep.store.state().skipped.values())


def test_a_resume_on_hosts_that_all_refuse_a_configuration_that_failed_to_start_writes_no_skip(tmp_path):
    """A configuration whose only record is a failed start (k8 on gpu2) is reported failed; a
    `--resume --limit` to hosts that refuse it wrote a set-aside skip beside the failure (the report
    then said it "was not deployed" too). Now the log says why nothing more of it runs, and nothing is
    written; a skip an older resume wrote after the failure does not shadow it either."""
    from tuner.data.records import DeployRecord, SkipRecord
    from tuner.data.store import Store

    sweep, log, store = _measured_then_resumed(tmp_path)
    k8 = SpecConfig(8)
    store.append(DeployRecord(config=k8, host="gpu2", status="failed", reason="out of memory"))
    why = next(w for c, w in sweep.plan.infeasible)
    sweep.plan = dataclasses.replace(sweep.plan, infeasible=[*sweep.plan.infeasible, (k8, why)])
    sweep.planner.plan = sweep.plan
    sweep.planner.set_aside()
    assert [r for r in store.records() if r["type"] == "skip"] == []
    assert f"[{k8.label}] failed to start in an earlier run; nothing more of it runs here" in log.getvalue()
    store.append(SkipRecord(config=k8, kind="infeasible", reason=why))
    st = Store(tmp_path).state()
    assert k8.config_id in st.failed and k8.config_id not in st.skipped
