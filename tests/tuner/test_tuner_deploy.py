"""The ansible-runner wrapper (tuner/run/deploy.py): event parsing, and real runs of a fixture play;
the inventory (tuner/run/inventory.py)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from tuner_testlib import FIXTURES, grep_tree

from tuner.data.redact import Redactor
from tuner.run.deploy import FAST_TAGS, Deployer, outcome_from_events, project_root
from tuner.run.inventory import InventoryError, inventory_hosts, read_inventory
from tuner.spec.configs import SpecConfig

REPORT = {
    "ready_seconds": 2.5,
    "capacity": {"max_total_num_tokens": 295931, "max_running_requests": 17},
    "speculative": {"num_steps": 3, "num_draft_tokens": 4},
    "server": {"served_model_name": "m"},
}


def ev(kind, host="h1", **data):
    return {"event": kind, "event_data": {"host": host, **data}}


def test_outcome_from_set_stats():
    events = [
        ev("runner_on_ok", task="Gate", task_action="sglang_ready", res={"censored": "hidden"}),
        {
            "event": "playbook_on_stats",
            "event_data": {
                "artifact_data": {
                    "sglang_ready": {
                        "h1": {"client_url": "http://10.213.1.2:30000", "report": REPORT},
                        "h2": {"client_url": "http://10.213.2.2:30000", "report": {}},
                    }
                }
            },
        },
    ]
    out = outcome_from_events(events, "h1")
    assert out.report == REPORT and out.client_url == "http://10.213.1.2:30000"
    assert out.source == "set_stats" and out.failure is None


def test_outcome_falls_back_to_the_module_event():
    res = {**REPORT, "url": "http://127.0.0.1:30000", "invocation": {"module_args": {"api_key": "x"}}}
    events = [
        ev("runner_on_ok", host="h2", resolved_action="sglang_ready", res={"x": 1}),
        ev("runner_on_ok", resolved_action="local.sglang_ready", res=res),
    ]
    out = outcome_from_events(events, "h1")
    assert out.source == "runner_on_ok" and "invocation" not in out.report
    assert out.report["capacity"]["max_total_num_tokens"] == 295931
    assert out.client_url == "http://127.0.0.1:30000"


def test_the_deploy_record_keeps_sglangs_warnings_not_ansibles():
    """The module returns SGLang's warnings as `sglang_warnings` (always a list); Ansible's
    `warnings` is there only when some were emitted and may carry its own (interpreter discovery)."""
    from tuner.run.deploy import DeployResult

    def record(report):
        return DeployResult("h1", SpecConfig(3), True, None, None, report, 1.0, "successful", 0).record()

    ansible = "Host 'h1' is using the discovered Python interpreter at '/usr/bin/python3'"
    sglang = "The speculative decoding acceptance is low"
    assert record({**REPORT, "sglang_warnings": [sglang], "warnings": [sglang, ansible]}).warnings == [sglang]
    assert record({**REPORT, "sglang_warnings": []}).warnings == []
    assert record({**REPORT, "warnings": [sglang]}).warnings == [sglang]  # a report without the key


def test_outcome_failure_reason_is_the_roles_final_message():
    events = [
        ev("runner_on_failed", task="Wait until the server is ready", res={"censored": "no_log"}),
        ev("runner_on_failed", task="ignored one", ignore_errors=True, res={"msg": "meh"}),
        ev("runner_on_failed", host="other", task="x", res={"msg": "not mine"}),
        ev(
            "runner_on_failed",
            task="Fail with the reason",
            res={"msg": "KV cache pool cannot be allocated: Not enough memory (rolled back)"},
        ),
    ]
    out = outcome_from_events(events, "h1")
    assert out.failure.startswith("KV cache pool cannot be allocated")
    assert out.failed_task == "Fail with the reason"
    assert (
        outcome_from_events([ev("runner_on_unreachable", res={"msg": "no route"})], "h1").failure
        == "unreachable: no route"
    )
    only_censored = outcome_from_events(events[:1], "h1")
    assert only_censored.failure and "no_log" in only_censored.failure


def test_a_groups_final_failure_is_told_in_the_heads_words_whatever_the_event_order():
    """Every node of a multi-node group ends on the same group failure: whichever host's event came
    last spoke for the group ("gpu-b: timed out ... (on gpu-a, node rank 0 ...)" in one order, the
    plain reason in the other)."""
    why = "timed out after 60 s waiting for /health (on gpu-a, node rank 0 of sglang_server_multinode_group='g')"
    a = ev("runner_on_failed", host="gpu-a", task="Fail with the group's reason", res={"msg": why})
    b = ev("runner_on_failed", host="gpu-b", task="Fail with the group's reason", res={"msg": why})
    for order in ([a, b], [b, a]):
        out = outcome_from_events(order, "gpu-a", ("gpu-b",))
        assert out.failure == why, out.failure
    # a worker's own failure still names it
    own = ev("runner_on_failed", host="gpu-b", task="Install", res={"msg": "apt failed"})
    assert outcome_from_events([own], "gpu-a", ("gpu-b",)).failure == "gpu-b: apt failed"


def test_inventory_hosts_group_and_limit():
    inv = FIXTURES / "local_inventory.yml"
    hosts, hostvars = inventory_hosts(inv, None, project_root())
    assert hosts == ["local-a", "local-b"]  # group sglang_servers only
    assert hostvars["local-a"]["ansible_connection"] == "local"
    assert inventory_hosts(inv, "local-b", project_root())[0] == ["local-b"]
    assert inventory_hosts(inv, "nomatch*", project_root())[0] == []
    # a --limit of hosts outside the group selects none of the play's hosts (ansible-inventory then
    # lists the group only among its parent's children), not every host of the inventory
    assert inventory_hosts(inv, "not-a-server", project_root())[0] == []
    assert inventory_hosts(inv, "local-a,not-a-server", project_root())[0] == ["local-a"]
    with pytest.raises(InventoryError):
        bad = FIXTURES.parent / "__bad_inventory_for_test.yml"
        try:
            bad.write_text("all: [unclosed\n")
            inventory_hosts(bad, None, project_root())
        finally:
            bad.unlink()


@pytest.mark.slow
def test_real_runner_runs_tags_failure_and_scrubbing(tmp_path, monkeypatch):
    key = "sk-deploy-test-77aa"
    monkeypatch.setenv("SGLANG_API_KEY", key)
    runner_tmp = tmp_path / "tmp"
    runner_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runner_tmp))
    out = tmp_path / "out"
    d = Deployer(
        inventory=FIXTURES / "local_inventory.yml",
        out_dir=out,
        extravars={"fail_from": 4},
        playbook=str(FIXTURES / "fake_deploy.yml"),
        redactor=Redactor([key]),
    )
    first = d.deploy(SpecConfig(3), "local-a")
    assert first.ok, first.reason
    assert first.tags == [] and first.source == "set_stats"
    assert first.report["capacity"]["max_total_num_tokens"] == 260000
    assert first.report["api_key_seen"] == "<redacted>"  # the play got the key from the env
    again = d.deploy(SpecConfig(3), "local-a")
    assert again.ok and again.tags == list(FAST_TAGS)  # no re-provisioning
    bad = d.deploy(SpecConfig(4), "local-a")
    assert not bad.ok and bad.reason.startswith("KV cache pool cannot be allocated at spec_steps 4")
    rec = bad.record()
    assert rec.status == "failed" and rec.config_id == "k4-t1"
    # what is kept: scrubbed stdout + events; the private data dirs (env, command) are gone
    assert sorted(p.name for p in (out / "deploy").iterdir()) == ["k3-t1", "k3-t1-2", "k4-t1"]
    stdout = (out / "deploy" / "k3-t1" / "stdout.txt").read_text()
    assert "key=<redacted> steps=3" in stdout and "\x1b[" not in stdout
    events = [json.loads(line) for line in (out / "deploy" / "k3-t1" / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "playbook_on_stats" for e in events)
    assert grep_tree(out, key) == []
    assert list(runner_tmp.iterdir()) == []


def test_multinode_group_is_one_slot():
    inv = read_inventory(FIXTURES / "multinode_inventory.yml", None, project_root())
    assert inv.slots() == {"tp2": ["node-a", "node-b"], "single-c": ["single-c"]}
    assert read_inventory(FIXTURES / "multinode_inventory.yml", "single-c", project_root()).slots() == {
        "single-c": ["single-c"]
    }


def test_a_group_the_sweep_cannot_deploy_as_one_server_is_named(tmp_path):
    """A host in two groups' slots: the role refuses both groups' plays in seconds, and those slots
    recorded every configuration as failed while the others measured it. The tuner names the
    host and the groups before any deploy."""
    assert read_inventory(FIXTURES / "multinode_inventory.yml", None, project_root()).slot_errors() == []
    inv = tmp_path / "inv.yml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "sglang_servers": {
                            "children": {
                                "g1": {"hosts": {"a": {}, "b": {}}, "vars": {"sglang_server_multinode_group": "g1"}},
                                "g2": {"hosts": {"b": {}, "c": {}}, "vars": {"sglang_server_multinode_group": "g2"}},
                            }
                        }
                    }
                }
            }
        )
    )
    errors = read_inventory(inv, None, project_root()).slot_errors()
    assert ("--inventory", "b is a host of group g1, a multi-node group, but names group g2") in errors, errors


def test_a_killed_tuners_runner_directory_goes_with_the_next_tuner(tmp_path):
    """SIGKILL skips the `finally` that removes ansible-runner's private directory, whose
    artifacts/*/command holds the play's environment (the API key): the next tuner removes the
    directories of tuners that are gone, and leaves a live one's and any it did not name."""
    import subprocess

    from tuner.run.deploy import remove_stale_runner_dirs

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"sgt-runner-{gone.pid}-abc"
    live = tmp_path / f"sgt-runner-{os.getpid()}-def"
    other = tmp_path / "sgt-runner-xyz"
    for d in (dead, live, other):
        (d / "artifacts").mkdir(parents=True)
    assert remove_stale_runner_dirs(str(tmp_path)) == [dead]
    assert not dead.exists() and live.exists() and other.exists()


def test_outcome_fails_when_a_member_fails():
    events = [
        {
            "event": "playbook_on_stats",
            "event_data": {
                "artifact_data": {"sglang_ready": {"node-a": {"client_url": "http://head:30000", "report": REPORT}}}
            },
        },
        ev("runner_on_failed", host="node-b", task="Gate", res={"msg": "NCCL timeout"}),
    ]
    out = outcome_from_events(events, "node-a", ("node-b",))
    assert out.client_url == "http://head:30000" and out.failure == "node-b: NCCL timeout"
    assert outcome_from_events(events, "node-a").failure is None


@pytest.mark.slow
def test_real_runner_deploys_a_multinode_group_at_once(tmp_path):
    inv = FIXTURES / "multinode_inventory.yml"
    d = Deployer(
        inventory=inv,
        out_dir=tmp_path,
        playbook=str(FIXTURES / "fake_deploy.yml"),
        slots=read_inventory(inv, None, project_root()).slots(),
    )
    res = d.deploy(SpecConfig(2), "tp2")
    assert res.ok, res.reason
    events = [json.loads(x) for x in (tmp_path / "deploy" / "k2-t1" / "events.jsonl").read_text().splitlines()]
    assert {e["event_data"].get("host") for e in events if e["event"] == "runner_on_ok"} == {"node-a", "node-b"}
    assert res.record().hosts == ["node-a", "node-b"]
    bad = Deployer(
        inventory=inv,
        out_dir=tmp_path / "b",
        playbook=str(FIXTURES / "fake_deploy.yml"),
        extravars={"fail_hosts": ["node-b"]},
        slots={"tp2": ["node-a", "node-b"]},
    )
    res = bad.deploy(SpecConfig(2), "tp2")
    assert not res.ok and res.reason.startswith("node-b: KV cache pool cannot be allocated")


def _hung_play(tmp_path: Path, hang_s: float, timeout_s: float) -> Deployer:
    """A deployer whose play hangs `hang_s` seconds under a `timeout_s` deploy timeout."""
    return Deployer(
        inventory=FIXTURES / "local_inventory.yml",
        out_dir=tmp_path / "out",
        extravars={"hang_s": hang_s},
        playbook=str(FIXTURES / "fake_deploy.yml"),
        timeout_s=timeout_s,
    )


def test_a_play_stopped_from_outside_says_its_host_was_not_rolled_back(tmp_path):
    """ansible-runner kills a play past --deploy-timeout: the role's rescue (its rollback) never
    runs, so the reason must not read like the role's own failure, which always rolled back."""
    res = _hung_play(tmp_path, 60, 4).deploy(SpecConfig(3), "local-a")
    assert not res.ok
    assert res.reason.startswith("the deploy play ran past 4 s, stopped before its gate or rollback could finish")
    assert "local-a may be left on this configuration" in res.reason


def test_a_play_stopped_during_its_rollback_says_so_not_the_gates_failure(tmp_path):
    """The gate failed (no_log: its output censored) and the rollback was still running when the
    play ran past --deploy-timeout: the censored failure was the reason ("failed (output hidden by
    no_log)"), which read like an ordinary failure the role had rolled back."""
    d = Deployer(
        inventory=FIXTURES / "local_inventory.yml",
        out_dir=tmp_path / "out",
        extravars={"rollback_hang_s": 60},
        playbook=str(FIXTURES / "fake_deploy.yml"),
        timeout_s=4,
    )
    res = d.deploy(SpecConfig(3), "local-a")
    assert not res.ok and res.runner_status == "timeout"
    assert res.reason.startswith("the deploy play ran past 4 s, stopped before its gate or rollback could finish")
    assert "before that: failed (output hidden by no_log)" in (res.detail or "")
    assert res.record().rollback is None


def test_a_failed_loop_task_is_told_by_its_failed_item():
    """A loop task's own message is Ansible's summary ("One or more items failed", or "All items
    completed" for a host that went unreachable mid-loop): the cause is in its items."""
    failed = ev(
        "runner_on_failed",
        task="Check the read-write paths",
        res={
            "msg": "One or more items failed",
            "results": [{"item": "/ok", "failed": False}, {"item": "/data", "failed": True, "msg": "no such path"}],
        },
    )
    assert outcome_from_events([failed], "h1").failure == "item '/data': no such path"
    gone = ev(
        "runner_on_unreachable",
        res={
            "msg": "All items completed",
            "results": [{"item": "a", "unreachable": True, "msg": "Failed to connect to the host via ssh"}],
        },
    )
    assert outcome_from_events([gone], "h1").failure == "unreachable: item 'a': Failed to connect to the host via ssh"


def test_a_deploy_timeout_under_a_second_still_stops_the_play(tmp_path):
    """--deploy-timeout 0.5 passes the flag's check (above 0); int() made it 0, which ansible-runner
    reads as no timeout at all (`if self.timeout:`), and the hung play ran on."""
    t0 = time.monotonic()
    res = _hung_play(tmp_path, 30, 0.5).deploy(SpecConfig(3), "local-a")
    assert not res.ok and "the deploy play ran past 0.5 s" in (res.reason or "")
    assert time.monotonic() - t0 < 25


def test_extra_vars_never_reach_the_plays_command_line(tmp_path, monkeypatch):
    """ansible-runner's `extravars=` becomes `-e '{json}'` on ansible-playbook's command line,
    which every local user reads in /proc: the tuner hands them over in a 0600 file instead."""
    import ansible_runner

    seen: dict = {}
    real = ansible_runner.run

    def spy(**kw):
        path = kw["cmdline"].split("@", 1)[1]
        seen.update(kw, mode=os.stat(path).st_mode & 0o777, vars=json.loads(Path(path).read_text()))
        r = real(**kw)
        seen["command"] = " ".join(r.config.command)
        return r

    monkeypatch.setattr(ansible_runner, "run", spy)
    d = Deployer(
        inventory=FIXTURES / "local_inventory.yml",
        out_dir=tmp_path / "out",
        extravars={"sglang_server_environment": {"SGLANG_X": "hf_not_on_argv"}},
        playbook=str(FIXTURES / "fake_deploy.yml"),
    )
    assert d.deploy(SpecConfig(3), "local-a").ok
    assert "extravars" not in seen and seen["mode"] == 0o600
    assert seen["vars"]["sglang_server_environment"] == {"SGLANG_X": "hf_not_on_argv"}
    assert seen["vars"]["spec_steps"] == 3
    assert "hf_not_on_argv" not in seen["command"] and "spec_steps" not in seen["command"]


def test_a_host_of_a_groups_slot_is_not_a_slot_of_its_own():
    """A group named on its head only: its other host was a member of the group's slot and a slot of
    its own, so a sweep ran two plays on it at once (the role's group check now refuses the group)."""
    from tuner.run.inventory import Inventory

    inv = Inventory(
        hosts=["gpu-a", "gpu-b", "gpu-c"],
        hostvars={"gpu-a": {"sglang_server_multinode_group": "tp16"}, "gpu-b": {}, "gpu-c": {}},
        groups={"tp16": ["gpu-a", "gpu-b"]},
    )
    assert inv.slots() == {"tp16": ["gpu-a", "gpu-b"], "gpu-c": ["gpu-c"]}


def test_a_group_is_benchmarked_at_the_rank_that_serves_not_a_worker():
    """A head the tuner cannot read (`sglang_server_multinode_head: "{{ tp_head }}"`) leaves the
    group in the inventory's order, its first host a worker node; the role made the other rank 0.
    The deploy's URL is the rank whose published report is no worker's (`joined`): the worker's
    was taken, whose /health is SGLang's placeholder and which has no API."""
    events = [
        {
            "event": "playbook_on_stats",
            "event_data": {
                "artifact_data": {
                    "sglang_ready": {
                        "gpu-a": {"client_url": "http://10.0.0.1:30000", "report": {"joined": True}},
                        "gpu-b": {"client_url": "http://10.0.0.2:30000", "report": REPORT},
                    }
                }
            },
        },
    ]
    out = outcome_from_events(events, "gpu-a", ("gpu-b",))
    assert out.client_url == "http://10.0.0.2:30000" and out.report == REPORT
    # a group whose head the tuner read right keeps it
    out = outcome_from_events(events, "gpu-b", ("gpu-a",))
    assert out.client_url == "http://10.0.0.2:30000"


def test_the_inventory_is_read_as_ansible_reads_it(tmp_path, monkeypatch):
    """What the tuner read differed from what `ansible-inventory` and the play read (a review,
    2026-12-07): an inventory given through a symlink lost the group_vars/ beside the link (the
    path was resolved; Ansible reads beside the path as given); a README in an inventory directory
    was fatal (Ansible warns); a vaulted group_vars file of a group the sweep never deploys needed
    its password (every host's variables were worked out); a relative `--limit @file` was looked up
    in the project's directory."""
    from tuner.spec.flags import limit_pattern

    real = tmp_path / "real"
    real.mkdir()
    (real / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      hosts:\n        h1: {ansible_host: 10.0.0.1}\n"
        "        h2: {ansible_host: 10.0.0.2}\n    databases:\n      hosts:\n        db1: {}\n"
    )
    site = tmp_path / "site"
    (site / "group_vars").mkdir(parents=True)
    (site / "inv.yml").symlink_to(real / "hosts.yml")
    (site / "group_vars" / "sglang_servers.yml").write_text("sglang_server_spec_max_steps: 2\n")
    # a whole-file vault of another group's variables, no password anywhere
    (site / "group_vars" / "databases.yml").write_text(
        "$ANSIBLE_VAULT;1.1;AES256\n62313365396662343061393464336163383764373764613633653634306231386433626665363030\n"
    )
    (site / "README").write_text("Our GPU servers.\nKeep this file beside the inventory.\n")
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    from tuner.spec.flags import absolute_path

    given = absolute_path("site/inv.yml", "--inventory")
    assert given == str(site / "inv.yml")  # not the link's target
    inv = read_inventory(Path(given), None, project_root())
    assert inv.hosts == ["h1", "h2"] and inv.hostvars["h1"]["sglang_server_spec_max_steps"] == 2
    # a directory of the inventory with a README in it: read, as Ansible reads it
    (site / "inv.yml").unlink()
    (site / "hosts.yml").write_text((real / "hosts.yml").read_text())
    assert read_inventory(site, None, project_root()).hosts == ["h1", "h2"]
    # --limit @file, relative to where the user typed it
    (tmp_path / "lim.txt").write_text("h2\n")
    pattern = limit_pattern("@lim.txt")
    assert pattern == f"@{tmp_path / 'lim.txt'}"
    assert read_inventory(site, pattern, project_root()).hosts == ["h2"]
    # split as Ansible splits a pattern: on commas, else on colons outside brackets
    assert limit_pattern("@lim.txt:!h3") == f"@{tmp_path / 'lim.txt'},!h3"
    assert limit_pattern("h1,@lim.txt") == f"h1,@{tmp_path / 'lim.txt'}"
    assert limit_pattern("h[1:2]") == "h[1:2]"
    assert read_inventory(site, limit_pattern("@lim.txt:!h3"), project_root()).hosts == ["h2"]
    # the group is intersected with the limit as Ansible reads it: `h1:h2` is two hosts
    assert read_inventory(site, "h1:h2", project_root()).hosts == ["h1", "h2"]
    assert read_inventory(site, "all:!h1", project_root()).hosts == ["h2"]
    # an inventory without the group, where a pattern that matches nothing is made an error
    monkeypatch.setenv("ANSIBLE_HOST_PATTERN_MISMATCH", "error")
    (tmp_path / "flat.yml").write_text("all:\n  hosts:\n    f1: {}\n")
    assert read_inventory(tmp_path / "flat.yml", None, project_root()).hosts == ["f1"]
    assert read_inventory(tmp_path / "flat.yml", "f1", project_root()).hosts == ["f1"]
