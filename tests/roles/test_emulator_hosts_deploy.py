"""playbooks/emulator_hosts.yml and the deploy play end to end on two emulator hosts.

Two podman containers with systemd as PID 1, each in its own network namespace (indexes 211 and
212, the ad-hoc range). The deploy play runs through ansible-runner as the tuner runs it:
- a full run publishes one merged `sglang_ready` dict for both hosts in the playbook_on_stats
  event's artifact_data, and each host answers at its client_url from the controller;
- the slim run (`--tags sglang_server_configure,sglang_server_run`) with the same settings changes
  nothing and restarts nothing; with another spec_steps it restarts each host once.
The hosts are removed by `-e emulator_hosts_state=absent`, whose result is checked too.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request

import pytest
from roles_testlib import VENV_BIN, ansible_env, deploy_play, emulator_inventory, remove_container, run

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(100)

HOSTS = {"roles-e2e-211": 211, "roles-e2e-212": 212}
SLIM = "sglang_server_configure,sglang_server_run"


def inventory(path, wheelhouse):
    return emulator_inventory(path, wheelhouse, {name: {"emulator_host_index": idx} for name, idx in HOSTS.items()})


def hosts_play(inv, *extra):
    return run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "playbooks/emulator_hosts.yml", *extra], timeout=300
    )


def deploy(tmp_path, inv, tag, **extravars):
    d = deploy_play(tmp_path, inv, tag, tags=SLIM if tag.startswith("slim") else None, **extravars)
    assert d.rc == 0, d.out[-6000:]
    return d.stats, d.out


def unit_show(host):
    out = subprocess.run(
        ["podman", "exec", host, "systemctl", "show", "sglang-qwen.service", "-p", "MainPID", "-p", "InvocationID"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.split())


def netns():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.mark.systemd
@pytest.mark.slow
def test_emulator_hosts_and_deploy_play(need_podman, frozen_wheelhouse, tmp_path, monkeypatch):
    for key, value in ansible_env().items():
        monkeypatch.setenv(key, value)
    inv = inventory(tmp_path / "inventory.yml", frozen_wheelhouse)
    try:
        first = hosts_play(inv)
        assert first.returncode == 0, first.stdout[-4000:]
        again = hosts_play(inv)
        assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-4000:]
        for name in HOSTS:
            assert f"sgt-{name}" in netns()
            labels = subprocess.run(
                ["podman", "inspect", name, "--format", "{{json .Config.Labels}}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert json.loads(labels).get("io.sglang-tune") == "1"
            assert json.loads(labels).get("io.sglang-tune.run") == os.environ["SGLANG_TUNE_RUN"]

        stats, out = deploy(tmp_path, inv, "full", spec_steps=3)
        published = stats["artifact_data"]["sglang_ready"]
        assert sorted(published) == sorted(HOSTS)
        for name, idx in HOSTS.items():
            entry = published[name]
            assert entry["client_url"] == f"http://10.213.{idx}.2:30000"
            assert entry["report"]["capacity"]["max_total_num_tokens"] == 295931
            assert entry["report"]["speculative"]["num_draft_tokens"] == 4
            assert "invocation" not in entry["report"]
            with urllib.request.urlopen(entry["client_url"] + "/health", timeout=10) as resp:
                assert resp.status == 200
            assert f"{name}: max_total_num_tokens=295931 max_running_requests=17 draft_tokens=4" in out
        before = {name: unit_show(name) for name in HOSTS}

        stats, out = deploy(tmp_path, inv, "slim-same", spec_steps=3)
        assert all(stats["changed"].get(name, 0) == 0 for name in HOSTS), stats
        assert {name: unit_show(name) for name in HOSTS} == before
        assert sorted(stats["artifact_data"]["sglang_ready"]) == sorted(HOSTS)

        stats, out = deploy(tmp_path, inv, "slim-new", spec_steps=2)
        after = {name: unit_show(name) for name in HOSTS}
        for name in HOSTS:
            assert after[name]["InvocationID"] != before[name]["InvocationID"]
            assert stats["artifact_data"]["sglang_ready"][name]["report"]["capacity"]["max_total_num_tokens"] == 377207
            assert out.count("RUNNING HANDLER [sglang_tune.serving.sglang_server : Restart the SGLang unit]") == 1
            journal = subprocess.run(
                [
                    "podman",
                    "exec",
                    name,
                    "journalctl",
                    "--no-pager",
                    "-o",
                    "cat",
                    "UNIT=sglang-qwen.service",
                    "MESSAGE_ID=39f53479d3a045ac8e11786248231fbf",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert len(journal.splitlines()) == 2, journal  # the full run's start and this restart
    finally:
        gone = hosts_play(inv, "-e", "emulator_hosts_state=absent")
        for name in HOSTS:
            remove_container(name)
    assert gone.returncode == 0, gone.stdout[-4000:]
    for name, idx in HOSTS.items():
        assert subprocess.run(["podman", "container", "exists", name]).returncode == 1
        assert f"sgt-{name}" not in netns()
        assert subprocess.run(["ip", "link", "show", f"sgtv{idx}"], capture_output=True).returncode != 0
