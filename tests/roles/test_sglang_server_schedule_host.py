"""spec_schedule on a real host (issue 12): SGLang 0.5.23's adaptive speculation, emulated.

One emulator host (podman, systemd as PID 1, made by playbooks/emulator_hosts.yml, index 236 of the
ad-hoc range), `sglang_server_sglang_version: 0.5.23` so the emulator plays that release, and
`sglang_server_mem_fraction_static: 0.92` so a schedule with a very deep bucket cannot capture its
CUDA graphs (the emulator's 0.5.23 memory model: buffers for the widest candidate come out of what
the pools leave, docs/emulator.md "Memory: what a deep candidate costs"). The deploy play runs
through ansible-runner with the variables the tuner passes (spec_schedule as a JSON string,
spec_topk 1, spec_algorithm). Checked: the file (content, 0644 root:root, readable by the service
user), the unit's flags, the gate's resolved schedule and /server_info, idempotence, rollback of a
schedule that fails at start-up (the last good schedule file comes back), back to static (the file
is removed), and bad input that changes nothing on the host.
"""

from __future__ import annotations

import hashlib
import json
import urllib.request

import pytest
from roles_testlib import EmulatorHost, deploy_play

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(135)

EMU = EmulatorHost("roles-schedule-236", 236)
HOST, URL, UNIT = EMU.name, EMU.url, EMU.unit
FILE = "/etc/sglang/sglang-qwen.adaptive.json"
KEPT = "/etc/sglang/last-good/sglang-qwen/adaptive"
PINNED = {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}
CANONICAL = '{"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}\n'
TUNER_VARS = {"spec_topk": 1, "spec_algorithm": "NEXTN"}
podman, exec_start, invocation = EMU.podman, EMU.exec_start, EMU.invocation


def deploy(tmp_path, inv, name, **extravars):
    """One ansible-runner run of the deploy play: (rc, stdout, stats event data)."""
    d = deploy_play(tmp_path, inv, name, **extravars)
    return d.rc, d.out, d.stats


def report(stats):
    return stats["artifact_data"]["sglang_ready"][HOST]["report"]


def server_info() -> dict:
    with urllib.request.urlopen(URL + "/server_info", timeout=10) as resp:
        return json.loads(resp.read())


def file_state(path: str):
    """(content, mode, owner:group) of a file on the host, or None when it is not there."""
    st = podman("stat", "-c", "%a %U:%G", path, check=False)
    if st.returncode != 0:
        return None
    return podman("cat", path).stdout, *st.stdout.split()


def etc_digest() -> str:
    """Every file under /etc/sglang and the unit, with mode, owner and content, plus the unit's InvocationID."""
    listing = podman(
        "sh", "-c", f"find /etc/sglang /etc/systemd/system/{UNIT} -type f -exec stat -c '%n %a %U %Y' {{}} + | sort"
    ).stdout
    contents = podman("sh", "-c", f"find /etc/sglang /etc/systemd/system/{UNIT} -type f | sort | xargs cat").stdout
    return hashlib.sha256((listing + contents + invocation()).encode()).hexdigest()


@pytest.fixture(scope="module")
def host(need_podman, frozen_wheelhouse, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schedule-host")
    inv = EMU.inventory(
        tmp / "inventory.yml",
        frozen_wheelhouse,
        sglang_server_sglang_version="0.5.23",
        sglang_server_mem_fraction_static=0.92,
    )
    with EMU.made(inv):
        yield tmp, inv


@pytest.mark.systemd
@pytest.mark.slow
def test_a_schedule_deploys_reports_stays_idempotent_and_rolls_back(host):
    tmp, inv = host

    # Static first: the last good configuration, with no adaptive file or flag.
    rc, out, stats = deploy(tmp, inv, "static", spec_steps=3)
    assert rc == 0, out[-6000:]
    assert file_state(FILE) is None
    assert "--speculative-adaptive" not in exec_start()
    assert "--emulator-sglang-version 0.5.23" in exec_start()
    spec = report(stats)["speculative"]
    assert spec["adaptive"] is False and spec["schedule"] is None
    assert report(stats)["server"]["version"].startswith("0.5.23+emulator")

    # The schedule, as the tuner passes it (-e spec_schedule='<JSON>').
    rc, out, stats = deploy(tmp, inv, "schedule", spec_schedule='{"1": 4, "16": 3}', **TUNER_VARS)
    assert rc == 0, out[-6000:]
    assert file_state(FILE) == (CANONICAL, "644", "root:root")
    assert podman("cat", FILE, user="sglang").stdout == CANONICAL  # the service user reads it
    assert file_state(KEPT) == (CANONICAL, "644", "root:root")  # kept with the last good configuration
    start = exec_start()
    for flags in (
        "--speculative-algorithm NEXTN",
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        f"--speculative-adaptive --speculative-adaptive-config {FILE}",
    ):
        assert flags in start, start
    spec = report(stats)["speculative"]
    assert spec["adaptive"] is True and spec["schedule"] == PINNED
    assert (spec["algorithm"], spec["num_steps"], spec["num_draft_tokens"]) == ("EAGLE", 3, 4)
    # the play's status line names the depth the server started at (the schedule's, not spec_steps')
    assert "draft_tokens=4 (spec_steps=3, emulator," in " ".join(out.split()), out[-3000:]
    info = server_info()
    assert info["speculative_adaptive"] is True and info["speculative_adaptive_config"] == FILE
    first = invocation()

    # The same schedule in SGLang's own form, as a mapping: nothing changes, no restart.
    rc, out, stats = deploy(tmp, inv, "again", spec_schedule=PINNED, **TUNER_VARS)
    assert rc == 0, out[-6000:]
    assert stats["changed"].get(HOST, 0) == 0, stats["changed"]
    assert invocation() == first
    assert report(stats)["speculative"]["schedule"] == PINNED

    # A bucket of 16 steps: the widest candidate's buffers do not fit, the start fails, and the
    # host is rolled back to the last good schedule (the file comes back, the server is healthy).
    rc, out, stats = deploy(tmp, inv, "too-deep", spec_schedule='{"1": 16, "16": 3}', **TUNER_VARS)
    assert rc != 0, out[-6000:]
    assert "Capture cuda graph failed" in out, out[-6000:]
    assert "Rolled back sglang-qwen.service" in out and "it is healthy again" in out, out[-6000:]
    assert file_state(FILE) == (CANONICAL, "644", "root:root")
    assert podman("systemctl", "is-active", UNIT, check=False).stdout.strip() == "active"
    info = server_info()
    assert info["speculative_adaptive"] is True and info["speculative_adaptive_config"] == FILE

    # Back to static: the file goes, the flags go.
    rc, out, stats = deploy(tmp, inv, "static-again", spec_steps=3, spec_schedule="none")
    assert rc == 0, out[-6000:]
    assert file_state(FILE) is None and file_state(KEPT) is None
    assert "--speculative-adaptive" not in exec_start()
    assert report(stats)["speculative"]["schedule"] is None


BAD = {
    "topk-2": (
        {"spec_schedule": '{"1": 4}', "spec_topk": 2, "spec_draft_tokens": 5},
        "spec_schedule needs spec_topk 1",
    ),
    "no-bucket-1": ({"spec_schedule": {"16": 3}}, 'spec_schedule must have bucket "1"'),
    "steps-99": ({"spec_schedule": {"1": 99}}, "spec_schedule: bucket '1' must have steps from 0 to 16"),
    "old-release": (
        {"spec_schedule": {"1": 4}, "sglang_server_sglang_version": "0.5.9"},
        "spec_schedule needs SGLang 0.5.13 or later",
    ),
    "malformed": ({"spec_schedule": '{"1": 4,'}, "spec_schedule must be a JSON object"),
}


@pytest.mark.systemd
@pytest.mark.slow
@pytest.mark.parametrize("case", list(BAD))
def test_bad_schedules_change_nothing_on_the_host(host, case):
    tmp, inv = host
    if file_state(f"/etc/systemd/system/{UNIT}") is None:
        rc, out, _ = deploy(tmp, inv, f"setup-{case}", spec_steps=3)
        assert rc == 0, out[-6000:]
    before = etc_digest()
    extravars, needle = BAD[case]
    rc, out, _ = deploy(tmp, inv, case, **extravars)
    assert rc != 0
    assert needle in out, out[-6000:]
    assert etc_digest() == before
