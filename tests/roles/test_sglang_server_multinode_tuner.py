"""`python -m tuner sweep` on one SGLang server over two emulator hosts (issue 21), on real systemd.

Its own pair of hosts (mn22-a rank 0 at index 226, mn22-b at 227, the cluster network 10.213.228.0/30:
tests/roles/multinode_testlib.py), so that it runs beside test_sglang_server_multinode.py, which
checks the role's side of the same group, on another pytest-xdist worker.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from multinode_testlib import TwoNodes
from roles_testlib import ROOT, VENV_BIN, ansible_env
from tuner_cli import sweep_cmd

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(170)

PAIR = TwoNodes(
    head="mn22-a",
    worker="mn22-b",
    ghost="mn22-c",
    index={"mn22-a": 226, "mn22-b": 227, "mn22-c": 229},
    link_index=228,
    dist_port=50022,
    group="mn22_group",
)
HEAD, WORKER, INDEX, active = PAIR.head, PAIR.worker, PAIR.index, PAIR.active


@pytest.fixture(scope="module")
def group(need_podman, frozen_wheelhouse, tmp_path_factory):
    with PAIR.made(tmp_path_factory.mktemp("multinode-tuner"), frozen_wheelhouse) as made:
        yield made


@pytest.mark.systemd
@pytest.mark.slow
def test_the_tuner_sweeps_the_group_as_one_server(group):
    """`python -m tuner sweep` deploys each configuration to both nodes and benchmarks rank 0 only."""
    import csv
    import json

    tmp, inv = group
    out = tmp / "sweep"
    p = subprocess.run(
        sweep_cmd(
            out,
            inv,
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
        ),
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
