"""Playbook-level tests of the cuda_env role on localhost (ansible_connection: local).

One ansible-playbook run covers every case: each inventory host is a case whose host vars are the case's
variables (playbooks/cases.yml runs the role's entry point on it and records the result). Emulator-like
hosts declare 4 x RTX PRO 6000; GPU hosts use a fake nvidia-smi (a real executable printing realistic
output from fixtures/). Nothing outside the test's temporary directory is written: install is off and
the environment file goes to the temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, REPO

pytestmark = pytest.mark.slow

RTX = {
    "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "memory_mib": 97887,
    "compute_capability": "12.0",
    "driver": "580.95.05",
    "count": 4,
}
H200_LIST = "[0,1,2,3,4,5,6,7] NVIDIA H200 143771 MiB cc 9.0"


def fake_smi(
    dest: Path,
    query: str,
    banner: str = "smi_banner_h200.txt",
    topo: str = "smi_topo_h200x8.txt",
    lines: int | None = None,
    fail: bool = False,
    old_driver: bool = False,
    mig: str | None = None,
) -> str:
    """A stand-in nvidia-smi: answers the three commands the role runs with fixture text."""
    if old_driver:  # the 470 series: no compute_cap query field (huggingface/candle#733)
        body = "echo 'Field \"compute_cap\" is not a valid field to query.'; echo; exit 2"
    elif fail:
        body = (
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            'Make sure that the latest NVIDIA driver is installed and running."; exit 9'
        )
    else:
        head = f"| head -n {lines}" if lines else ""
        body = (
            'case "$1" in\n'
            f'  --query-gpu=index,name,memory.total,driver_version,compute_cap,pci.bus_id,uuid) cat "{FIXTURES / query}" {head};;\n'
            + (f'  --query-gpu=index,mig.mode.current) printf "{mig}";;\n' if mig is not None else "")
            + f'  topo) cat "{FIXTURES / topo}";;\n'
            f'  "") cat "{FIXTURES / banner}";;\n'
            '  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2;;\n'
            "esac\n"
        )
    dest.write_text("#!/bin/sh\n" + body + "\n")
    dest.chmod(0o755)
    return str(dest)


def cases(tmp: Path) -> dict[str, dict]:
    smi8 = fake_smi(tmp / "smi-h200x8", "smi_query_h200x8.txt")
    smi1 = fake_smi(tmp / "smi-h200x1", "smi_query_h200x1.txt", topo="smi_topo_h200x1.txt")
    smi2 = fake_smi(tmp / "smi-h200x2", "smi_query_h200x8.txt", lines=2)
    smi_bad = fake_smi(tmp / "smi-failing", "", fail=True)
    smi_old = fake_smi(tmp / "smi-old-driver", "", old_driver=True)
    # GPU 0 split into MIG instances: --query-gpu still lists it whole, at its full memory
    smi_mig = fake_smi(tmp / "smi-mig", "smi_query_h200x8.txt", lines=2, mig="0, Enabled\\n1, Disabled\\n")
    gpu_host = {"cuda_env_gpu_source": "auto", "cuda_env_declared_gpus": []}
    # a Python whose "check" has a rank die with its reason on stderr, then the check's report
    crashed = tmp / "python-rank-crashed"
    report = {
        "ok": False,
        "reason": "worker-crashed",
        "message": "NCCL all-reduce check FAILED (worker-crashed): rank 1",
    }
    crashed.write_text(
        "#!/bin/sh\n"
        "echo 'rank 1: torch.distributed.DistBackendError: NCCL error: unhandled system error' >&2\n"
        f"echo '{report['message']}' >&2\n"
        f"echo '{json.dumps(report)}'\n"
        "exit 1\n"
    )
    crashed.chmod(0o755)
    return {
        "nccl_rank_crashed": {
            **gpu_host,
            "case_entry": "nccl_check",
            "cuda_env_nvidia_smi": smi2,
            "cuda_env_nccl_check_python": str(crashed),
        },
        "ok_declared_tp4": {},
        "tp8_too_big": {"sglang_server_tp_size": 8},
        "visible_hides": {"cuda_env_cuda_env": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,1"}},
        "visible_bad": {
            "sglang_server_tp_size": 1,
            "cuda_env_cuda_env": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,7"},
        },
        "bad_cuda_version": {"cuda_env_cuda_version": "12"},
        "cuda_too_old_for_blackwell": {"cuda_env_cuda_version": "12.6"},
        "driver_too_old": {
            "cuda_env_cuda_version": "12.9",
            "cuda_env_declared_gpus": [dict(RTX, driver_cuda_version="12.8")],
        },
        "min_cc_too_high": {"cuda_env_min_compute_capability": "12.1"},
        "bad_gpu_source": {"cuda_env_gpu_source": "guess"},
        "tp_not_int": {"sglang_server_tp_size": "four"},
        "bad_env_name": {"cuda_env_extra_env": {"BAD-NAME": "1"}},
        "declared_missing_mem": {"cuda_env_declared_gpus": [{k: v for k, v in RTX.items() if k != "memory_mib"}]},
        "repo_distro_bad": {"cuda_env_install": True, "cuda_env_repo_distro": "centos7"},
        "smi_missing": {**gpu_host, "cuda_env_nvidia_smi": "/nonexistent/nvidia-smi"},
        # declared GPUs make nvidia-smi optional (cuda_env_require_nvidia_smi's default), as on emulator hosts
        "smi_missing_fallback": {"cuda_env_gpu_source": "auto", "cuda_env_nvidia_smi": "/nonexistent/nvidia-smi"},
        "smi_missing_required": {
            "cuda_env_gpu_source": "auto",
            "cuda_env_require_nvidia_smi": True,
            "cuda_env_nvidia_smi": "/nonexistent/nvidia-smi",
        },
        "smi_failing": {**gpu_host, "cuda_env_nvidia_smi": smi_bad},
        "smi_old_driver": {**gpu_host, "cuda_env_nvidia_smi": smi_old},
        "smi_h200x8_tp8": {**gpu_host, "cuda_env_nvidia_smi": smi8, "sglang_server_tp_size": 8},
        "smi_h200x8_tp16": {**gpu_host, "cuda_env_nvidia_smi": smi8, "sglang_server_tp_size": 16},
        "smi_mig_enabled": {**gpu_host, "cuda_env_nvidia_smi": smi_mig, "sglang_server_tp_size": 2},
        "main_bad_input": {"case_entry": "main", "sglang_server_tp_size": 8},
        "main_emulator": {
            "case_entry": "main",
            "cuda_env_nccl_env": {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": 1, "NCCL_SOCKET_IFNAME": ""},
            "cuda_env_extra_env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        },
        # the env file in a directory of another's, which exists already (made by the fixture)
        "main_shared_dir": {"case_entry": "main"},
        "nccl_forced_no_torch": {
            "case_entry": "nccl_check",
            "cuda_env_nccl_check_force": True,
            "cuda_env_nccl_check_python": sys.executable,
            "cuda_env_nccl_env": {"NCCL_P2P_LEVEL": "SYS"},
        },
        "nccl_single_gpu_skip": {
            **gpu_host,
            "case_entry": "nccl_check",
            "cuda_env_nvidia_smi": smi1,
            "cuda_env_nccl_check_python": sys.executable,
        },
        "nccl_two_gpus_no_torch": {
            **gpu_host,
            "case_entry": "nccl_check",
            "cuda_env_nvidia_smi": smi2,
            "cuda_env_nccl_check_python": sys.executable,
        },
        "nccl_python_missing": {
            **gpu_host,
            "case_entry": "nccl_check",
            "cuda_env_nvidia_smi": smi2,
            "cuda_env_nccl_check_python": "/nonexistent/bin/python",
        },
        "nccl_python_empty": {**gpu_host, "case_entry": "nccl_check", "cuda_env_nvidia_smi": smi2},
        # nccl_check on its own checks the role's variables first, naming the one at fault
        "nccl_bad_sizes": {"case_entry": "nccl_check", "cuda_env_nccl_check_sizes": ["3"]},
        "nccl_bad_env_name": {"case_entry": "nccl_check", "cuda_env_nccl_check_env": {"BAD-NAME": "1"}},
        # a preflight of an earlier play (cases.yml's first, at cuda_env_min_gpus 1) does not stand
        # for main's: here 8 GPUs are needed where 4 are declared
        "main_after_another_plays_preflight": {"case_entry": "main", "sglang_server_tp_size": 8},
    }


def write_inventory(tmp: Path) -> Path:
    inv = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "results_dir": str(tmp),
                "cuda_env_install": False,
                "cuda_env_gpu_source": "declared",
                "cuda_env_declared_gpus": [RTX],
                "sglang_server_tp_size": 4,
                "cuda_env_min_gpus": "{{ sglang_server_tp_size }}",
                "cuda_env_env_file": str(tmp) + "/{{ inventory_hostname }}/cuda_env.env",
            },
            "hosts": cases(tmp),
        }
    }
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def run_playbook(inventory: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory),
            "-f",
            "6",
            str(REPO / "tests" / "cuda_env" / "playbooks" / "cases.yml"),
            *extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def outcome(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("cuda_env_cases")
    inventory = write_inventory(tmp)
    shared = tmp / "main_shared_dir"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    shared.chmod(0o1777)
    proc = run_playbook(inventory)
    results_file = tmp / "results.json"
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    missing = set(cases(tmp)) - set(results)
    assert not missing, f"no result for {missing}:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    return {"tmp": tmp, "inventory": inventory, "results": results, "proc": proc}


def ok(outcome: dict, case: str) -> dict:
    r = outcome["results"][case]
    assert r["ok"], r
    return r


def failed(outcome: dict, case: str) -> str:
    r = outcome["results"][case]
    assert not r["ok"], r
    return re.sub(r"\s+", " ", r["msg"])


def test_declared_gpus_fit(outcome) -> None:
    r = ok(outcome, "ok_declared_tp4")
    assert r["source"] == "declared" and r["gpu_count"] == 4 and r["visible_gpu_count"] == 4
    assert r["gpus"][3] == {
        "index": 3,
        "name": RTX["name"],
        "memory_mib": 97887,
        "driver": "580.95.05",
        "compute_capability": "12.0",
        "pci_bus_id": "",
        "uuid": "",
    }
    assert r["problems"] == []


def test_tp_size_larger_than_gpus(outcome) -> None:
    msg = failed(outcome, "tp8_too_big")
    assert (
        "cuda_env_min_gpus is 8 (the deploy play sets it to the GPUs per node that SGLang's tensor-parallel size "
        "sglang_server_tp_size needs)"
    ) in msg
    assert "this host has 4 usable GPU(s), declared in cuda_env_declared_gpus: [0,1,2,3] " + RTX["name"] in msg
    assert "allowed: sglang_server_tp_size (per node) / cuda_env_min_gpus from 1 to 4 on this host" in msg


def test_cuda_visible_devices_limits_the_count(outcome) -> None:
    msg = failed(outcome, "visible_hides")
    assert "has 2 usable GPU(s) (2 of 4 hidden by CUDA_VISIBLE_DEVICES in cuda_env_cuda_env)" in msg
    assert "CUDA_VISIBLE_DEVICES (cuda_env_cuda_env) entry '7' of '0,7' names no single GPU" in failed(
        outcome, "visible_bad"
    )


@pytest.mark.parametrize(
    ("case", "needles"),
    [
        ("bad_cuda_version", ["cuda_env_cuda_version is '12'; allowed: MAJOR.MINOR"]),
        (
            "cuda_too_old_for_blackwell",
            ["cuda_env_cuda_version 12.6 cannot build for " + RTX["name"], "allowed: cuda_env_cuda_version >= 12.8"],
        ),
        (
            "driver_too_old",
            ["supports CUDA up to 12.8, below cuda_env_cuda_version 12.9", "allowed: cuda_env_cuda_version <= 12.8"],
        ),
        ("min_cc_too_high", ["below cuda_env_min_compute_capability 12.1"]),
        ("bad_gpu_source", ["cuda_env_gpu_source", "guess", "auto, nvidia-smi, declared"]),
        ("tp_not_int", ["cuda_env_min_gpus", "int"]),
        ("bad_env_name", ["cuda_env_extra_env: environment variable name 'BAD-NAME'"]),
        ("declared_missing_mem", ["cuda_env_declared_gpus[0] lacks memory_mib"]),
        ("repo_distro_bad", ["cuda_env_repo_distro is 'centos7'", "ubuntu2204, ubuntu2404, debian12"]),
        (
            "smi_missing",
            [
                "nvidia-smi (/nonexistent/nvidia-smi) is not on smi_missing (or cannot run)",
                "cuda_env_gpu_source: declared with cuda_env_declared_gpus",
            ],
        ),
        ("smi_missing_required", ["nvidia-smi (/nonexistent/nvidia-smi) is not on smi_missing_required"]),
        ("smi_failing", ["nvidia-smi failed on smi_failing (rc 9)", "couldn't communicate with the NVIDIA driver"]),
        (
            "smi_old_driver",
            ["nvidia-smi failed on smi_old_driver (rc 2)", "this nvidia-smi is older than the query fields"],
        ),
        ("smi_mig_enabled", ["MIG is enabled on GPU(s) 0 (", "SGLang's tensor parallelism needs whole GPUs"]),
        (
            "smi_h200x8_tp16",
            [
                "cuda_env_min_gpus is 16",
                "8 usable GPU(s), found by nvidia-smi: " + H200_LIST,
                "from 1 to 8 on this host",
            ],
        ),
    ],
)
def test_bad_input_messages_name_the_variable(outcome, case: str, needles: list[str]) -> None:
    msg = failed(outcome, case)
    for needle in needles:
        assert needle in msg, msg


def test_nvidia_smi_facts(outcome) -> None:
    r = ok(outcome, "smi_h200x8_tp8")
    assert r["source"] == "nvidia-smi" and r["gpu_count"] == 8
    assert r["gpus"][7]["pci_bus_id"] == "00000000:DB:00.0" and r["gpus"][0]["compute_capability"] == "9.0"
    assert r["driver_cuda_version"] == "13.0"
    assert r["topology"]["nvlink"] and r["topology"]["link_types"] == ["NV18"]


def test_missing_nvidia_smi_falls_back_to_declared_when_allowed(outcome) -> None:
    r = ok(outcome, "smi_missing_fallback")
    assert r["source"] == "declared" and r["gpu_count"] == 4


def test_bad_input_fails_before_anything_changes(outcome) -> None:
    msg = failed(outcome, "main_bad_input")
    assert "cuda_env_min_gpus is 8" in msg
    assert not (outcome["tmp"] / "main_bad_input").exists()  # the env file's directory was never created


def test_main_on_an_emulator_host_writes_the_env_file(outcome) -> None:
    r = ok(outcome, "main_emulator")
    assert r["nccl_skip"].startswith("the GPUs are declared (cuda_env_declared_gpus, an emulator host)")
    env_file = outcome["tmp"] / "main_emulator" / "cuda_env.env"
    text = env_file.read_text()
    assert oct(env_file.stat().st_mode & 0o777) == "0o644"
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        'CUDA_DEVICE_ORDER="PCI_BUS_ID"',
        'NCCL_IB_DISABLE="1"',
        'NCCL_P2P_LEVEL="SYS"',
        'PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"',
    ]
    assert f"EnvironmentFile=-{env_file}" in text
    assert r["env_file_changed"] is True


def test_an_existing_directory_keeps_its_owner_and_mode(outcome) -> None:
    """The env file's directory is created when missing, never re-owned: at `/tmp/cuda_env.env` the
    role had made /tmp root's 0755, its sticky, world-writable bit gone."""
    ok(outcome, "main_shared_dir")
    shared = outcome["tmp"] / "main_shared_dir"
    assert (shared / "cuda_env.env").is_file()
    st = shared.stat()
    assert (oct(st.st_mode & 0o7777), st.st_uid, st.st_gid) == ("0o1777", 65534, 65534)


def test_nccl_check_on_its_own_names_the_variable_at_fault(outcome) -> None:
    assert failed(outcome, "nccl_bad_sizes").startswith("cuda_env_nccl_check_sizes")
    assert failed(outcome, "nccl_bad_env_name").startswith("cuda_env_nccl_check_env")


def test_main_runs_its_preflight_where_an_earlier_plays_checked_other_variables(outcome) -> None:
    msg = failed(outcome, "main_after_another_plays_preflight")
    assert "8" in msg and "cuda_env_min_gpus" in msg, msg
    assert outcome["results"]["main_after_another_plays_preflight"]["task"] == "Check that the GPUs fit the deploy"


def test_main_is_idempotent(outcome) -> None:
    proc = run_playbook(outcome["inventory"], "--limit", "main_emulator")
    assert proc.returncode == 0, proc.stdout[-3000:]
    r = json.loads((outcome["tmp"] / "results.json").read_text())["main_emulator"]
    assert r["ok"] and r["env_file_changed"] is False


def test_nccl_check_forced_without_torch(outcome) -> None:
    msg = failed(outcome, "nccl_forced_no_torch")
    assert msg.startswith("NCCL all-reduce check FAILED (torch-missing): cannot import torch with " + sys.executable)
    assert "NCCL environment used: CUDA_DEVICE_ORDER=PCI_BUS_ID NCCL_NVLS_ENABLE=0 NCCL_P2P_LEVEL=SYS" in msg
    # the script's summary, which repeats the message, is not added again (the workers' own lines
    # would follow the message: here no worker started)
    assert msg.count("cannot import torch with") == 1 and "Workers' output" not in msg, msg


def test_a_failed_nccl_check_says_what_the_workers_said(outcome) -> None:
    """A rank that died says why only on its output: the message carries it after the report's
    (stderr and stdout alike, as an SSH connection's tty merges them), the summary not twice."""
    msg = failed(outcome, "nccl_rank_crashed")
    assert msg.startswith("NCCL all-reduce check FAILED (worker-crashed): rank 1 Workers' output (last lines): "), msg
    assert msg.endswith("rank 1: torch.distributed.DistBackendError: NCCL error: unhandled system error"), msg


def test_nccl_check_runs_on_two_gpus_by_itself(outcome) -> None:
    """nccl_check.yml included on its own gathers facts, decides to run on >= 2 GPUs and reports the script's failure."""
    msg = failed(outcome, "nccl_two_gpus_no_torch")
    assert "FAILED (torch-missing)" in msg


def test_nccl_check_skips_single_gpu_and_missing_python(outcome) -> None:
    r = ok(outcome, "nccl_single_gpu_skip")
    assert r["nccl_skip"].startswith("this host has 1 GPU, so no traffic crosses GPUs; set cuda_env_nccl_check_force")
    assert r["nccl_report"] == {}
    r = ok(outcome, "nccl_python_empty")
    assert r["nccl_skip"].startswith("cuda_env_nccl_check_python is empty")
    msg = failed(outcome, "nccl_python_missing")
    assert (
        'cuda_env_nccl_check_python is "/nonexistent/bin/python", which is not an executable on nccl_python_missing'
        in msg
    )
