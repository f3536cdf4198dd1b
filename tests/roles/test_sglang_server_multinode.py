"""One SGLang server over two emulator hosts (issue 21), on real systemd.

Two podman hosts with systemd as PID 1, made by playbooks/emulator_hosts.yml (indexes 220 and 221,
names mn21-*), form one server: `sglang_server_multinode_group: mn21_group`, TP 2 over 2 nodes.
The pair and the cluster network between them (10.213.222.1/30 on mn21-a, rank 0, and
10.213.222.2/30 on mn21-b) come from tests/roles/multinode_testlib.py. The tuner's sweep of such a
group has its own pair and file (test_sglang_server_multinode_tuner.py), so the two run side by side.

Checked through the deploy play run by ansible-runner: the flags of each rank, rank 0 gated on its
/health and the worker on its journal, the worker's dummy health, idempotence across the nodes, a
change of spec_steps restarting both ranks once, a worker that never joins rolling both back, the
worker killed (the gate sees the server down, with the reason), and a host of the group that
cannot be reached failing before either host changes; `--check` on the fresh group and on the
running one with another depth (nothing restarts, the running server is reported as it is).
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request

import pytest
from multinode_testlib import UNIT, TwoNodes
from roles_testlib import VENV_BIN, deploy_play, run

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(245)

PAIR = TwoNodes(
    head="mn21-a",
    worker="mn21-b",
    ghost="mn21-c",
    index={"mn21-a": 220, "mn21-b": 221, "mn21-c": 223},
    link_index=222,
    dist_port=50021,
    group="mn21_group",
)
HEAD, WORKER, GHOST = PAIR.head, PAIR.worker, PAIR.ghost
INDEX = PAIR.index
HEAD_LINK_ADDR = PAIR.head_link_addr
DIST_PORT = PAIR.dist_port
GROUP = PAIR.group
HEAD_URL, WORKER_URL = PAIR.url(HEAD), PAIR.url(WORKER)
JOINED = "Init torch distributed ends."
EMU = {h: PAIR.emu(h) for h in INDEX}
podman, inventory, active = PAIR.podman, PAIR.inventory, PAIR.active


def deploy(tmp_path, inv, name, **extravars):
    """One ansible-runner run of the deploy play: (rc, stdout, stats event data)."""
    d = deploy_play(tmp_path, inv, name, **extravars)
    return d.rc, d.out, d.stats


def dry_run(inv, *extra: str) -> str:
    """`ansible-playbook deploy.yml --check` as a user types it: it must pass. Its output with every
    run of blanks one space (the callback wraps a long message anywhere)."""
    proc = run([str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "deploy.yml", "--check", *extra], timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return " ".join(proc.stdout.split())


def exec_start(host: str) -> str:
    return EMU[host].exec_start()


def argv(host: str) -> str:
    """The unit's command line (ExecStart without the run's start time and pid)."""
    text = exec_start(host)
    return text.split("argv[]=", 1)[-1].split(" ;", 1)[0]


def invocation(host: str) -> str:
    return EMU[host].invocation()


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


@pytest.fixture(scope="module")
def group(need_podman, frozen_wheelhouse, tmp_path_factory):
    with PAIR.made(tmp_path_factory.mktemp("multinode"), frozen_wheelhouse) as made:
        yield made


@pytest.mark.systemd
@pytest.mark.slow
def test_two_hosts_form_one_server_change_together_and_roll_back_together(group):
    tmp, inv = group

    # --check on the fresh group, as a user types it: it passes, writes and starts nothing, and says
    # what it would write (it failed stopping rank 0's unit, which did not exist yet)
    out = dry_run(inv)
    for h in (HEAD, WORKER):
        assert podman(h, "test", "-e", f"/etc/systemd/system/{UNIT}", check=False).returncode == 1
    assert f"{HEAD}: no server running (check mode); would write /etc/systemd/system/{UNIT}" in out, out[-6000:]
    worker = f"{WORKER}: worker node 1 of 2 (sglang_server_multinode_group={GROUP})"
    assert f"{worker} of a group not running (check mode); would write /etc/systemd/system/{UNIT}" in out, out[-6000:]
    assert f"--check: a real run would restart every rank of {GROUP}" in out, out[-6000:]

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

    # --check with another depth on the running group: no rank restarts; rank 0's running server is
    # gated and reported as it is (spec_steps 2), beside what would be written
    running = {h: invocation(h) for h in (HEAD, WORKER)}
    out = dry_run(inv, "-e", "spec_steps=3")
    assert {h: invocation(h) for h in (HEAD, WORKER)} == running
    assert "--speculative-num-steps 2" in exec_start(HEAD)
    assert f"{HEAD}: the running server (check mode): max_total_num_tokens=" in out, out[-6000:]
    assert "(spec_steps=2, emulator," in out and f"would write /etc/systemd/system/{UNIT}" in out, out[-6000:]
    assert f"{worker} joined rank 0" in out, out[-6000:]
    # ... and it says, as a change, that a real run would restart every rank (it said nothing)
    assert f"--check: a real run would restart every rank of {GROUP}" in out, out[-6000:]

    # A worker that never joins, in a run that also moves the head to the other node: rank 0 (now
    # WORKER) fails at the dist timeout, and both nodes go back together to the configuration that
    # last passed, restarted and gated in its own ranks (HEAD rank 0 again), not the run's new ones.
    rc, out, stats = deploy(
        tmp,
        inv,
        "never-joins",
        spec_steps=3,
        sglang_server_dist_timeout=4,
        sglang_server_emulator_faults=["worker-never-joins"],
        sglang_server_multinode_head=WORKER,
        sglang_server_gate_timeout=60,
    )
    assert rc != 0, out[-8000:]
    assert "Timed out after 5 seconds waiting for clients. 1/2 clients joined." in out, out[-8000:]
    assert f"node rank 0 of sglang_server_multinode_group='{GROUP}'" in out
    assert "every rank is healthy again" in out, out[-8000:]
    # ... HEAD gated as rank 0 (its gate asked its /health, which uvicorn logs), not as a worker:
    # gated in the run's ranks, the other node's dummy health server would have passed for rank 0
    assert '"GET /health HTTP/1.1" 200' in journal_now(HEAD), journal_now(HEAD)[-3000:]
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
