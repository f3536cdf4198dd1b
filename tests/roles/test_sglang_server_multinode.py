"""One SGLang server over two emulator hosts (issue 21), on real systemd.

Two podman hosts with systemd as PID 1, made by playbooks/emulator_hosts.yml (indexes 220 and 221,
names mn21-*), form one server: `sglang_server_multinode_group: mn21_group`, TP 2 over 2 nodes.
Each host's own veth pair only reaches the controller (10.213.<idx>.1/30, no forwarding), so the
test adds the cluster network real nodes have between them: a veth pair from one host's network
namespace to the other's, 10.213.222.1/30 (mn21-a, rank 0) and 10.213.222.2/30 (mn21-b), and
rank 0's `sglang_server_dist_init_host` is its address there. The namespaces go with the hosts
(playbooks/emulator_hosts.yml absent), and the pair with them.

Checked through the deploy play run by ansible-runner: the flags of each rank, rank 0 gated on its
/health and the worker on its journal, the worker's dummy health, idempotence across the nodes, a
change of spec_steps restarting both ranks once, a worker that never joins rolling both back, the
worker killed (the gate sees the server down, with the reason), and a host of the group that
cannot be reached failing before either host changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import urllib.error
import urllib.request

import pytest
import yaml
from roles_testlib import (
    ROOT,
    VENV_BIN,
    EmulatorHost,
    ansible_env,
    base_inventory,
    deploy_play,
    emulator_inventory,
    remove_container,
    run,
)

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(345)

HEAD, WORKER, GHOST = "mn21-a", "mn21-b", "mn21-c"
INDEX = {HEAD: 220, WORKER: 221, GHOST: 223}
LINK_INDEX = 222
HEAD_LINK_ADDR = f"10.213.{LINK_INDEX}.1"
DIST_PORT = 50021
GROUP = "mn21_group"
UNIT = "sglang-qwen.service"
HEAD_URL = f"http://10.213.{INDEX[HEAD]}.2:30000"
WORKER_URL = f"http://10.213.{INDEX[WORKER]}.2:30000"
JOINED = "Init torch distributed ends."


EMU = {h: EmulatorHost(h, i) for h, i in INDEX.items()}


def podman(host: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return EMU[host].podman(*args, check=check)


def inventory(path, wheelhouse, hosts=(HEAD, WORKER)):
    """`emulator_inventory` with `hosts` as one TP-2 server (GROUP), one GPU declared per host."""
    gpu = yaml.safe_load(base_inventory())["all"]["children"]["emulator_hosts"]["vars"]["cuda_env_declared_gpus"][0]
    spec = {h: {"emulator_host_index": INDEX[h]} for h in hosts}
    spec[HEAD]["sglang_server_dist_init_host"] = HEAD_LINK_ADDR
    return emulator_inventory(
        path,
        wheelhouse,
        spec,
        groups={GROUP: list(hosts)},
        sglang_server_tp_size=2,
        sglang_server_multinode_group=GROUP,
        sglang_server_dist_init_port=DIST_PORT,
        sglang_server_dist_timeout=60,
        # A dead rank stays dead, so the test sees what the gate sees (no systemd restart).
        sglang_server_restart="no",
        cuda_env_declared_gpus=[dict(gpu, count=1)],
    )


def deploy(tmp_path, inv, name, **extravars):
    """One ansible-runner run of the deploy play: (rc, stdout, stats event data)."""
    d = deploy_play(tmp_path, inv, name, **extravars)
    return d.rc, d.out, d.stats


def exec_start(host: str) -> str:
    return EMU[host].exec_start()


def argv(host: str) -> str:
    """The unit's command line (ExecStart without the run's start time and pid)."""
    text = exec_start(host)
    return text.split("argv[]=", 1)[-1].split(" ;", 1)[0]


def invocation(host: str) -> str:
    return EMU[host].invocation()


def active(host: str) -> str:
    return podman(host, "systemctl", "is-active", UNIT, check=False).stdout.strip()


def starts(host: str) -> int:
    """How many times the unit's server started (its `server_args=` lines in the journal)."""
    out = podman(host, "journalctl", "-u", UNIT, "--no-pager", "-o", "cat", check=False).stdout
    return out.count("server_args=")


def journal_now(host: str) -> str:
    return podman(
        host,
        "sh",
        "-c",
        f"journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID=$(systemctl show {UNIT} -p InvocationID --value)",
    ).stdout


def http(url: str, method: str = "GET", body: bytes | None = None) -> int:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return -1


def digest(host: str) -> str:
    listing = podman(
        host,
        "sh",
        "-c",
        f"find /etc/sglang /etc/systemd/system/{UNIT} -type f -exec stat -c '%n %a %U %Y' {{}} + 2>/dev/null | sort",
        check=False,
    ).stdout
    return hashlib.sha256((listing + invocation(host)).encode()).hexdigest()


def node_link(up: bool) -> None:
    """The cluster network between the two hosts' namespaces (see the module docstring)."""
    a, b = f"sgt-{HEAD}", f"sgt-{WORKER}"
    ca, cb = f"sgtm{LINK_INDEX}a", f"sgtm{LINK_INDEX}b"
    if not up:
        subprocess.run(["ip", "-n", a, "link", "del", ca], capture_output=True)
        return
    if subprocess.run(["ip", "-n", a, "link", "show", ca], capture_output=True).returncode == 0:
        return
    for cmd in (
        ["ip", "-n", a, "link", "add", ca, "type", "veth", "peer", "name", cb, "netns", b],
        ["ip", "-n", a, "addr", "add", f"{HEAD_LINK_ADDR}/30", "dev", ca],
        ["ip", "-n", b, "addr", "add", f"10.213.{LINK_INDEX}.2/30", "dev", cb],
        ["ip", "-n", a, "link", "set", ca, "up"],
        ["ip", "-n", b, "link", "set", cb, "up"],
    ):
        subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def group(need_podman, frozen_wheelhouse, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multinode")
    inv = inventory(tmp / "inventory.yml", frozen_wheelhouse)
    hosts = [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "playbooks/emulator_hosts.yml"]
    made = run(hosts, timeout=300)
    try:
        assert made.returncode == 0, made.stdout[-4000:]
        node_link(True)
        yield tmp, inv
    finally:
        node_link(False)
        run(hosts + ["-e", "emulator_hosts_state=absent"], timeout=300)
        for h in (HEAD, WORKER):
            remove_container(h)


@pytest.mark.systemd
@pytest.mark.slow
def test_two_hosts_form_one_server_change_together_and_roll_back_together(group):
    tmp, inv = group

    # Deploy: one server, rank 0 on mn21-a, the worker on mn21-b.
    rc, out, stats = deploy(tmp, inv, "first", spec_steps=3)
    assert rc == 0, out[-8000:]
    head_flags, worker_flags = exec_start(HEAD), exec_start(WORKER)
    addr = f"--dist-init-addr {HEAD_LINK_ADDR}:{DIST_PORT}"
    assert f"--nnodes 2 --node-rank 0 {addr} --dist-timeout 60" in head_flags, head_flags
    assert f"--nnodes 2 --node-rank 1 {addr} --dist-timeout 60" in worker_flags, worker_flags
    assert "--tp-size 2" in head_flags and "--tp-size 2" in worker_flags
    assert active(HEAD) == active(WORKER) == "active"
    assert JOINED in journal_now(WORKER)
    # worker stop timeout sized for rank 0's drain (300 + 60), rank 0's the role default
    assert podman(WORKER, "systemctl", "show", UNIT, "-p", "TimeoutStopUSec", "--value").stdout.strip() == "6min"
    assert podman(HEAD, "systemctl", "show", UNIT, "-p", "TimeoutStopUSec", "--value").stdout.strip() == "5min"
    # rank 0 serves; the worker's health is SGLang's dummy 200 and it has no API
    assert http(HEAD_URL + "/health") == 200
    assert http(WORKER_URL + "/health") == 200 and http(WORKER_URL + "/ping") == 200
    assert http(WORKER_URL + "/generate", "POST", b'{"text": "hi"}') == 404
    published = stats["artifact_data"]["sglang_ready"]
    assert published[HEAD]["report"]["capacity"]["max_total_num_tokens"] > 0
    assert published[WORKER]["report"]["joined"] is True
    assert "worker node 1 of 2" in out

    # Unchanged: nothing restarts on either node.
    first = {h: invocation(h) for h in (HEAD, WORKER)}
    rc, out, stats = deploy(tmp, inv, "again", spec_steps=3)
    assert rc == 0, out[-8000:]
    assert stats["changed"].get(HEAD, 0) == 0 and stats["changed"].get(WORKER, 0) == 0, stats["changed"]
    assert {h: invocation(h) for h in (HEAD, WORKER)} == first

    # A change of spec_steps restarts both ranks, once each, and the gate passes.
    before = {h: starts(h) for h in (HEAD, WORKER)}
    rc, out, stats = deploy(tmp, inv, "steps-2", spec_steps=2)
    assert rc == 0, out[-8000:]
    assert {h: starts(h) - before[h] for h in (HEAD, WORKER)} == {HEAD: 1, WORKER: 1}
    assert all(invocation(h) != first[h] for h in (HEAD, WORKER))
    assert "--speculative-num-steps 2" in exec_start(HEAD) and "--speculative-num-steps 2" in exec_start(WORKER)
    good = {h: argv(h) for h in (HEAD, WORKER)}

    # A worker that never joins: rank 0 fails at the dist timeout, both nodes go back together.
    rc, out, stats = deploy(
        tmp,
        inv,
        "never-joins",
        spec_steps=3,
        sglang_server_dist_timeout=4,
        sglang_server_emulator_faults=["worker-never-joins"],
    )
    assert rc != 0, out[-8000:]
    assert "Timed out after 5 seconds waiting for clients. 1/2 clients joined." in out, out[-8000:]
    assert f"node rank 0 of sglang_server_multinode_group='{GROUP}'" in out
    assert "every rank is healthy again" in out, out[-8000:]
    assert {h: argv(h) for h in (HEAD, WORKER)} == good
    assert active(HEAD) == active(WORKER) == "active"
    assert http(HEAD_URL + "/health") == 200

    # The worker dies: rank 0 goes down with it (a collective failure), and the gate says why.
    podman(WORKER, "systemctl", "kill", "-s", "SIGKILL", UNIT)
    gate = run(
        [
            str(VENV_BIN / "ansible"),
            "-i",
            str(inv),
            HEAD,
            "-m",
            "sglang_tune.serving.sglang_ready",
            "-a",
            f"url={HEAD_URL} unit={UNIT} timeout=20 interval=0.2",
        ],
        timeout=120,
    )
    assert gate.returncode != 0, gate.stdout[-4000:]
    assert "Connection closed by peer" in gate.stdout, gate.stdout[-4000:]
    assert active(HEAD) != "active" and active(WORKER) != "active"
    # ... and the next run brings the whole group back (each rank once).
    rc, out, stats = deploy(tmp, inv, "heal", spec_steps=2)
    assert rc == 0, out[-8000:]
    assert active(HEAD) == active(WORKER) == "active"


@pytest.mark.systemd
@pytest.mark.slow
def test_an_unreachable_host_of_the_group_fails_before_any_host_changes(group, frozen_wheelhouse):
    tmp, _ = group
    inv = inventory(tmp / "inventory-ghost.yml", frozen_wheelhouse, hosts=(HEAD, WORKER, GHOST))
    before = {h: digest(h) for h in (HEAD, WORKER)}
    rc, out, _stats = deploy(tmp, inv, "ghost", spec_steps=4, sglang_server_tp_size=3)
    assert rc != 0
    assert f"host(s) {GHOST} of the group is unreachable" in out, out[-6000:]
    assert {h: digest(h) for h in (HEAD, WORKER)} == before


@pytest.mark.systemd
@pytest.mark.slow
def test_the_tuner_sweeps_the_group_as_one_server(group):
    """`python -m tuner sweep` deploys each configuration to both nodes and benchmarks rank 0 only."""
    import csv
    import json
    import sys

    tmp, inv = group
    out = tmp / "sweep"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner",
            "sweep",
            "--out",
            str(out),
            "--inventory",
            str(inv),
            "--search",
            "grid",
            "--steps",
            "1,2",
            "--confirm",
            "0",  # the confirmation round's own test: tests/tuner/test_tuner_confirm_local.py
            "--concurrency",
            "1",
            "--input-len",
            "32",
            "--output-len",
            "32",
        ],
        cwd=ROOT,
        env={**ansible_env(), "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=2400,  # a full deploy of two hosts took 600 s on a loaded 2-core machine
    )
    assert p.returncode == 0, p.stderr[-6000:]
    with open(out / "results.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    assert {r["config_id"] for r in rows} == {"k1-t1", "k2-t1"}
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    deploys = [r for r in recs if r["type"] == "deploy" and r["status"] == "ok"]
    assert deploys and all(r["hosts"] == [HEAD, WORKER] for r in deploys), deploys
    assert all(r["client_url"] == f"http://10.213.{INDEX[HEAD]}.2:30000" for r in deploys)
    assert active(HEAD) == active(WORKER) == "active"
