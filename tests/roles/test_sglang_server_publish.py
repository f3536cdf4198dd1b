"""The role publishes the gate's report with set_stats (aggregate, not per host): with several
hosts, ansible-runner must deliver one merged dict in the playbook_on_stats event's
event_data.artifact_data (docs/architecture.md "Roles"; docs/reference/ansible.md §3)."""

from __future__ import annotations

import sys

import ansible_runner
from roles_testlib import ROOT, ansible_env


def _publish(tmp_path, monkeypatch, hosts: dict, extravars: dict | None = None, **group_vars):
    """The publish step (tests/roles/fixtures/publish_only.yml) on `hosts` through ansible-runner:
    the runner, its output, with its return code checked."""
    for key, value in ansible_env().items():
        monkeypatch.setenv(key, value)
    inventory = {
        "all": {
            "hosts": hosts,
            "vars": {"ansible_python_interpreter": sys.executable, "sglang_server_engine": "emulator", **group_vars},
        }
    }
    private = tmp_path / "runner"
    private.mkdir()
    r = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(ROOT),
        inventory=inventory,
        playbook=str(ROOT / "tests/roles/fixtures/publish_only.yml"),
        extravars=extravars or {},
        quiet=True,
        envvars={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        timeout=300,
    )
    out = r.stdout.read()
    assert r.rc == 0, out[-3000:]
    return r, out


def test_set_stats_from_several_hosts_merge_into_one_dict(tmp_path, monkeypatch):
    hosts = {f"h{i}": {"ansible_host": f"10.213.{200 + i}.2", "host_no": i} for i in range(1, 4)}
    hosts["h3"]["sglang_server_client_host"] = "client.example"
    r, out = _publish(tmp_path, monkeypatch, hosts, sglang_server_port=30100)
    stats = [e for e in r.events if e["event"] == "playbook_on_stats"]
    assert len(stats) == 1
    published = stats[0]["event_data"]["artifact_data"]["sglang_ready"]
    assert sorted(published) == ["h1", "h2", "h3"]
    assert published["h1"]["client_url"] == "http://10.213.201.2:30100"
    assert published["h3"]["client_url"] == "http://client.example:30100"
    for i, name in enumerate(["h1", "h2", "h3"], start=1):
        report = published[name]["report"]
        assert int(report["capacity"]["max_total_num_tokens"]) == 295931 + i
        assert report["speculative"]["num_draft_tokens"] == 4
        assert "invocation" not in report
    # The capacity line the play prints, once per host.
    assert out.count("max_total_num_tokens=") == 3, out[-3000:]
    assert "h2: max_total_num_tokens=295933 max_running_requests=17 draft_tokens=4" in out


def test_the_status_line_names_the_depth_a_schedule_started_the_server_at(tmp_path, monkeypatch):
    """With spec_schedule the server starts at the schedule's depth, not spec_steps' (the line said
    spec_steps=3, the default, for a server launched at 4)."""
    _, out = _publish(
        tmp_path,
        monkeypatch,
        {"h1": {"ansible_host": "10.213.201.2", "host_no": 1}},
        {
            "spec_schedule": '{"1": 5, "16": 4}',
            "spec_topk": 1,
            "sglang_server_sglang_version": "0.5.23",
            "gate_num_steps": 4,  # the stand-in gate's report: the server started at the schedule's 4
        },
    )
    assert "draft_tokens=4 (spec_steps=4, emulator," in " ".join(out.split()), out[-3000:]
