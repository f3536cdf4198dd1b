"""Bad input fails before anything on a host changes, with a message that names the variable.

`ansible-playbook deploy.yml -e ...` runs from the repo root against the default emulator
inventory, with its host renamed to one that does not exist: the play can only fail the way the
test expects if the check ran on the controller, before any connection. The missing-model case
needs a real-engine host; it runs against the controller itself (local connection) and proves
nothing was created there.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
import yaml
from roles_testlib import ROOT, run

ABSENT = "sgt-absent-201"  # index 201: the ad-hoc range (docs/architecture.md); never created

CASES = {
    "steps-negative": (["-e", "spec_steps=-1"], "spec_steps must be a whole number from 0 to 16"),
    "steps-abc": (["-e", "spec_steps=abc"], "spec_steps must be a whole number from 0 to 16"),
    "steps-fraction": (["-e", "spec_steps=1.5"], "spec_steps must be a whole number from 0 to 16"),
    "steps-too-deep": (["-e", "spec_steps=100"], "spec_steps must be a whole number from 0 to 16"),
    "topk-zero": (["-e", "spec_steps=3 spec_topk=0"], "spec_topk must be a whole number from 1 to 16"),
    "draft-contradiction": (
        ["-e", "spec_steps=3 spec_draft_tokens=6"],
        "spec_draft_tokens=6 contradicts spec_steps=3 with spec_topk=1",
    ),
    "draft-out-of-tree": (
        ["-e", "spec_steps=3 spec_topk=2 spec_draft_tokens=12"],
        "spec_draft_tokens must be a whole number from 2 to spec_topk + (spec_steps - 1) * spec_topk^2 + 1 = 11",
    ),
    "unknown-algorithm": (["-e", "spec_steps=3 spec_algorithm=MEDUSA"], "spec_algorithm must be one of EAGLE"),
    "port-range": (
        ["-e", "spec_steps=3 sglang_server_port=70000"],
        "sglang_server_port must be a whole number from 1 to 65535",
    ),
    "port-type": (["-e", "spec_steps=3 sglang_server_port=abc"], "sglang_server_port"),
    "unknown-engine": (["-e", "spec_steps=3 sglang_server_engine=vllm"], "sglang_server_engine"),
    "unknown-fault": (
        ["-e", '{"spec_steps": 3, "sglang_server_emulator_faults": ["bogus"]}'],
        "sglang_server_emulator_faults: 'bogus' is not one of",
    ),
    # spec_schedule (adaptive speculation) on a release that has it, unless the case is the release.
    "schedule-no-bucket-1": (
        ["-e", 'sglang_server_sglang_version=0.5.23 spec_schedule={"16":3}'],
        'spec_schedule must have bucket "1"',
    ),
    "schedule-empty-ladder": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"1": {"candidate_steps": []}}}'],
        "spec_schedule: bucket '1' needs candidate_steps, a non-empty list",
    ),
    "schedule-hysteresis-type": (
        [
            "-e",
            '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": '
            '{"1": {"candidate_steps": [3, 5], "up_hysteresis": "high"}, "8": 2}}',
        ],
        "spec_schedule: bucket '1' up_hysteresis must be a number",
    ),
    "schedule-bound-fraction": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"1": 4, "1.5": 3}}'],
        "spec_schedule: keys are batch-size lower bounds, whole numbers of at least 1; got '1.5'",
    ),
    "schedule-update-interval-0": (
        [
            "-e",
            '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": '
            '{"1": {"candidate_steps": [3], "update_interval": 0}}}',
        ],
        "spec_schedule: bucket '1' update_interval must be a whole number of at least 1",
    ),
    "schedule-steps-99": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"1": 99}}'],
        "spec_schedule: bucket '1' must have steps from 0 to 16",
    ),
    "schedule-key-abc": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"1": 4, "abc": 3}}'],
        "spec_schedule: keys are batch-size lower bounds, whole numbers of at least 1; got 'abc'",
    ),
    "schedule-key-0": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"0": 4, "1": 3}}'],
        "spec_schedule: keys are batch-size lower bounds, whole numbers of at least 1; got '0'",
    ),
    "schedule-topk-2": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"1": 4}, "spec_topk": 2}'],
        "spec_schedule needs spec_topk 1",
    ),
    "schedule-old-sglang": (
        ["-e", '{"sglang_server_sglang_version": "0.5.9", "spec_schedule": {"1": 4, "16": 3}}'],
        "spec_schedule needs SGLang 0.5.13 or later",
    ),
    "schedule-default-old-sglang": (
        ["-e", "sglang_server_sglang_version=0.5.10 spec_schedule=default"],
        "spec_schedule=default needs SGLang 0.5.11 or later",
    ),
    "schedule-malformed-json": (
        ["-e", "sglang_server_sglang_version=0.5.23", "-e", 'spec_schedule={"1": 4,'],
        "spec_schedule must be a JSON object",
    ),
    "schedule-ngram": (
        ["-e", '{"sglang_server_sglang_version": "0.5.23", "spec_schedule": {"1": 4}, "spec_algorithm": "NGRAM"}'],
        "spec_schedule needs spec_algorithm EAGLE, EAGLE3, NEXTN",
    ),
    # The seed has 4 GPUs; TP 8 on one node does not fit (checked by cuda_env's preflight).
    "tp-too-large": (["-e", "spec_steps=3 sglang_server_tp_size=8"], "sglang_server_tp_size"),
}


@pytest.fixture(scope="module")
def absent_inventory(tmp_path_factory) -> Path:
    inv = yaml.safe_load((ROOT / "inventory" / "emulator.yml").read_text())
    hosts = inv["all"]["children"]["emulator_hosts"]["hosts"]
    assert list(hosts) == ["emu1", "emu2"]
    inv["all"]["children"]["emulator_hosts"]["hosts"] = {ABSENT: {"emulator_host_index": 201}}
    path = tmp_path_factory.mktemp("inv") / "emulator-absent.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_on_the_controller_naming_the_variable(absent_inventory, case):
    # One playbook run per case, in the test itself: pytest-xdist spreads a module's tests over
    # its workers, and a module-scoped fixture running every case ran them all again on each
    # worker that drew one (two or three times per stage on 8 workers).
    args, message = CASES[case]
    proc = run(
        [str(ROOT / ".venv/bin/ansible-playbook"), "deploy.yml", "-i", str(absent_inventory), *args], timeout=180
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert message in out, out[-3000:]
    # Failed by a check, not by trying to reach the (absent) host.
    assert "unreachable=0" in out and "changed=0" in out and "failed=1" in out, out[-3000:]
    assert "UNREACHABLE" not in out


def _controller_host(tmp_path, gpu=None, **host_vars) -> dict:
    """A real-engine host on the controller itself: local connection, declared GPUs, every path
    the role would create under `tmp_path`."""
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "sglang_server_engine": "sglang",
        "sglang_server_install_dir": str(tmp_path / "opt-sglang"),
        "sglang_server_state_dir": str(tmp_path / "state"),
        "sglang_server_config_dir": str(tmp_path / "etc"),
        "cuda_env_install": False,
        "cuda_env_gpu_source": "declared",
        "cuda_env_env_file": str(tmp_path / "etc/cuda.env"),
        "cuda_env_declared_gpus": [
            {
                "name": "NVIDIA H200",
                "memory_mib": 143771,
                "compute_capability": "9.0",
                "driver": "580.95.05",
                "count": 1,
                **(gpu or {}),
            }
        ],
        **host_vars,
    }


def _refused(tmp_path, inventory: dict, env=None) -> str:
    """The deploy play over `inventory` (hosts of `_controller_host`) must fail before it changes
    anything. Its output."""
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    cmd = [str(ROOT / ".venv/bin/ansible-playbook"), "deploy.yml", "-i", str(path), "-e", "spec_steps=3"]
    proc = run(cmd, timeout=180, **(env or {}))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "changed=0" in out, out[-3000:]
    for made in (tmp_path / "opt-sglang", tmp_path / "state", tmp_path / "etc"):
        assert not made.exists()
    return out


def _refused_on_the_controller(tmp_path, name: str, gpu=None, env=None, **host_vars) -> str:
    """One such host, refused: the play's output."""
    host = _controller_host(tmp_path, gpu, **host_vars)
    return _refused(tmp_path, {"all": {"children": {"sglang_servers": {"hosts": {name: host}}}}}, env)


def test_a_group_whose_rank_0_address_is_not_its_own_changes_no_host(tmp_path):
    """Rank 0's dist-init IP is its SGLANG_HOST_IP, which SGLang's cross-node queue binds: an
    address no interface of the head has (TEST-NET-3 here, a cloud's NAT address in life) failed
    the start after every host had changed. Refused on rank 0 by the preflight, and the other
    rank, whose own checks passed, stops with it before any change."""
    hosts = {"gpu-a": {"ansible_host": "10.9.0.1"}, "gpu-b": {"ansible_host": "10.9.0.2"}}
    inventory = _group(tmp_path, hosts, group="tp2", tp_size=2, dist_init_addr="203.0.113.77:45677")
    out = " ".join(_refused(tmp_path, inventory).split())
    assert "rank 0's dist-init address 203.0.113.77 is not an address of gpu-a" in out, out[-3000:]
    assert "set sglang_server_dist_init_addr to an address of the head's own" in out, out[-3000:]
    assert "host(s) gpu-a of the group failed their checks" in out, out[-3000:]
    assert "changed=1" not in out, out[-3000:]


def test_missing_model_path_on_a_real_engine_host(tmp_path):
    out = _refused_on_the_controller(tmp_path, "gpu-local", sglang_server_model_path=str(tmp_path / "no-such-model"))
    assert f"sglang_server_model_path={tmp_path / 'no-such-model'} is not a directory on gpu-local" in out, out[-3000:]


def test_a_port_another_process_holds_changes_no_host(tmp_path):
    """A unit deployed under an earlier sglang_server_unit_name that still listens on the port (or
    any other process there) answered the gate's /health for the new server, whose start could not
    bind it. The preflight refuses the host before it changes, naming the holder."""
    model = tmp_path / "model"
    model.mkdir()
    held = socket.socket()
    held.bind(("0.0.0.0", 0))
    held.listen()
    port = held.getsockname()[1]
    try:
        out = _refused_on_the_controller(
            tmp_path, "gpu-port", sglang_server_model_path=str(model), sglang_server_port=port
        )
    finally:
        held.close()
    said = " ".join(out.split())
    assert (
        f"sglang_server_port={port} at sglang_server_host=0.0.0.0 on gpu-port cannot be bound by sglang-qwen.service "
        f"(in use: address already in use (pid {os.getpid()})): a process that is not this unit holds it"
    ) in said, out[-3000:]


def test_a_missing_read_write_path_on_the_host(tmp_path):
    """systemd stops a unit whose ReadWritePaths= names a missing path at its namespace set-up
    (226/NAMESPACE), after the role had changed the host; the preflight refuses it first, naming
    the missing path and not the one that exists."""
    model, present = tmp_path / "model", tmp_path / "cache"
    model.mkdir()
    present.mkdir()
    missing = tmp_path / "no-such-cache"
    out = _refused_on_the_controller(
        tmp_path,
        "gpu-local",
        sglang_server_model_path=str(model),
        sglang_server_read_write_paths=[str(present), str(missing)],
    )
    said = " ".join(out.split())
    assert f"sglang_server_read_write_paths: {missing} does not exist on gpu-local" in said, out[-3000:]
    assert "226/NAMESPACE" in said and f"{present}," not in said, out[-3000:]


def test_a_key_on_a_host_whose_systemd_predates_loadcredential(tmp_path):
    """The key reaches the server through LoadCredential= (systemd 247, NEWS "CHANGES WITH 247"): on
    RHEL 8's 239 or Ubuntu 20.04's 245 the setting is ignored and the server could not read it. The
    host is refused before it changes, naming its systemd (a stand-in `systemctl` answers as 245's)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && printf 'systemd 245 (245.4-4ubuntu3.24)\\n+PAM +AUDIT +SELINUX\\n'\n"
    )
    (fake / "systemctl").chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    out = _refused_on_the_controller(
        tmp_path,
        "gpu-old",
        env={"PATH": f"{fake}:{os.environ['PATH']}"},
        sglang_server_model_path=str(model),
        sglang_server_api_key="an-api-key-1234",
    )
    assert "gpu-old runs systemd 245: the API key is handed to the server with LoadCredential=" in " ".join(
        out.split()
    ), out[-3000:]
    assert "an-api-key-1234" not in out, out[-3000:]


@pytest.mark.parametrize(
    ("version", "python_version", "driver_cuda", "message"),
    [
        ("0.5.22", "3.10", "13.0", "gpu-host: SGLang 0.5.22 needs Python 3.11 or later"),
        (
            "0.5.11",
            "3.12",
            "12.8",
            "gpu-host: SGLang 0.5.11 installs a PyTorch built for CUDA 13, and the NVIDIA driver",
        ),
    ],
    ids=["python", "driver"],
)
def test_a_release_the_host_cannot_install_or_run(tmp_path, version, python_version, driver_cuda, message):
    """SGLang 0.5.22's wheels need Python 3.11 (Requires-Python): with Ubuntu 22.04's 3.10 pip said
    only "no matching distribution", after the user, directories and venv were made; 0.5.11's torch
    is PyPI's CUDA 13 build, which a CUDA 12 driver cannot run. The host is refused before it changes
    (a stand-in python3, and the driver's CUDA as cuda_env's facts give it)."""
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\necho {python_version}\n")
    python.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    out = _refused_on_the_controller(
        tmp_path,
        "gpu-host",
        gpu={"driver_cuda_version": driver_cuda},
        sglang_server_sglang_version=version,
        sglang_server_python=str(python),
        sglang_server_model_path=str(model),
    )
    assert message in " ".join(out.split()), out[-3000:]


def test_a_tensor_parallel_world_of_unequal_gpu_memory(tmp_path):
    """SGLang refuses to start a TP world whose GPUs' memory differs beyond 10% ("The memory
    capacity is unbalanced", model_runner.py), after the role had changed the host; the preflight
    refuses it first, from cuda_env's GPU facts and the server's environment."""
    model = tmp_path / "model"
    model.mkdir()
    gpus = [
        {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "driver": "580.95.05"},
        {"name": "NVIDIA H200", "memory_mib": 143771, "compute_capability": "9.0", "driver": "580.95.05"},
    ]
    out = " ".join(
        _refused_on_the_controller(
            tmp_path,
            "gpu-mixed",
            sglang_server_model_path=str(model),
            sglang_server_tp_size=2,
            cuda_env_declared_gpus=gpus,
        ).split()
    )
    assert (
        "gpu-mixed: the GPUs of one tensor-parallel world differ in memory "
        "(0: NVIDIA H100 80GB HBM3 81559 MiB, 1: NVIDIA H200 143771 MiB)"
    ) in out, out[-3000:]


def _own_address() -> str:
    """An IPv4 address of this machine that is not the loopback's (the default route's, else the
    first global one): rank 0's dist-init address must be one of the head's own."""
    import json
    import subprocess

    routes = json.loads(
        subprocess.run(["ip", "-j", "-4", "route", "show", "default"], capture_output=True, text=True).stdout or "[]"
    )
    dev = routes[0].get("dev") if routes else None
    cmd = ["ip", "-j", "-4", "addr", "show", "scope", "global"] + (["dev", dev] if dev else [])
    addrs = [
        a["local"]
        for i in json.loads(subprocess.run(cmd, capture_output=True, text=True).stdout or "[]")
        for a in i.get("addr_info", [])
    ]
    assert addrs, "this machine has no IPv4 address but the loopback's"
    return addrs[0]


def _group(tmp_path, hosts: dict, *, group: str, tp_size: int, dist_init_addr: str, **common_vars) -> dict:
    """Real-engine hosts on the controller (`_controller_host`) forming one server: `hosts` maps
    each to its own variables (a host's own `cuda_env_declared_gpus` overrides the common one)."""
    model = tmp_path / "model"
    model.mkdir()
    common = _controller_host(
        tmp_path,
        sglang_server_model_path=str(model),
        sglang_server_multinode_group=group,
        sglang_server_tp_size=tp_size,
        sglang_server_dist_init_addr=dist_init_addr,
        **common_vars,
    )
    children = {"sglang_servers": {"hosts": hosts}, group: {"hosts": dict.fromkeys(hosts)}}
    return {"all": {"vars": common, "children": children}}


def _group_of_two(tmp_path, gpus_a: list, gpus_b: list, **common_vars) -> dict:
    """Two hosts forming one server (group `tp4`, TP 4 over two nodes), each with its own declared
    GPUs; rank 0's dist-init address is one of this machine's."""
    hosts = {
        "gpu-a": {"ansible_host": "127.0.0.1", "cuda_env_declared_gpus": gpus_a},
        "gpu-b": {"ansible_host": "127.0.0.2", "cuda_env_declared_gpus": gpus_b},
    }
    return _group(tmp_path, hosts, group="tp4", tp_size=4, dist_init_addr=f"{_own_address()}:45677", **common_vars)


def _gpu(name: str, mib: int, **extra) -> dict:
    return {"name": name, "memory_mib": mib, "compute_capability": "9.0", "driver": "580.95.05", "count": 2, **extra}


def test_a_multi_node_world_of_unequal_gpu_memory_changes_no_host(tmp_path):
    """SGLang compares every rank's memory over the whole world group, across the nodes: H100s on
    one node and H200s on the other are refused on both, before either changes."""
    inventory = _group_of_two(tmp_path, [_gpu("NVIDIA H100 80GB HBM3", 81559)], [_gpu("NVIDIA H200", 143771)])
    out = " ".join(_refused(tmp_path, inventory).split())
    for host in ("gpu-a", "gpu-b"):
        assert (
            f"{host}: the GPUs of one tensor-parallel world differ in memory (gpu-a 0: NVIDIA H100 80GB HBM3 81559 MiB"
        ) in out, out[-3000:]
    assert "gpu-b 1: NVIDIA H200 143771 MiB" in out and "changed=1" not in out, out[-3000:]


def test_a_rank_refused_by_its_host_checks_stops_the_group(tmp_path):
    """A rank whose own host check fails (here its driver runs CUDA 12, where SGLang 0.5.11's torch
    needs 13) leaves the play; the other rank, whose checks passed, stops with it before it changes
    (cuda_env's environment file and the install came next)."""
    inventory = _group_of_two(
        tmp_path,
        [_gpu("NVIDIA H200", 143771, driver_cuda_version="13.0")],
        [_gpu("NVIDIA H200", 143771, driver_cuda_version="12.8")],
        sglang_server_sglang_version="0.5.11",
    )
    out = " ".join(_refused(tmp_path, inventory).split())
    assert "gpu-b: SGLang 0.5.11 installs a PyTorch built for CUDA 13" in out, out[-3000:]
    assert "host(s) gpu-b of the group failed their checks" in out, out[-3000:]
    assert "changed=1" not in out, out[-3000:]
