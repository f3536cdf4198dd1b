"""The rendered sglang-qwen.service for several variable sets, checked by systemd itself.

The role's preflight and template run for real (tests/roles/fixtures/render_unit.yml, local
connection); `systemd-analyze verify` (systemd 252, no booted systemd needed) must accept every
unit and `systemd-analyze security --offline=true` must rate its exposure at most MAX_EXPOSURE.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from roles_testlib import ROOT, run

SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"
# Exposure is 0 (locked down) to 10 (unsafe). A GPU server keeps
# its devices (no PrivateDevices=), address families and system calls; the role's units rate 4.0-4.2
# on systemd 252 (Debian 12), by variant.
MAX_EXPOSURE = 4.5
VAULTED_KEY = "vault-key-'q'\"$x%n-0001"


def _head_ip() -> str:
    """An address of this machine that is not its loopback: the render runs rank 0's preflight
    here, which refuses a dist-init IP that no interface has (SGLang binds SGLANG_HOST_IP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("203.0.113.1", 9))  # TEST-NET-3: no packet is sent, the route picks the source
        return str(s.getsockname()[0])


HEAD_IP = _head_ip()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The cases rendered once per test run. The unit stage spreads this file's tests over its
    xdist workers, and each worker that got one ran the play (about 50 CPU-seconds on this 2-core
    machine, 2026-12-03): the first worker renders under a lock, the others read what it wrote."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's own directory
    tmp = shared / "rendered-units"
    with open(shared / "rendered-units.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (tmp / "done").exists():
            shutil.rmtree(tmp, ignore_errors=True)  # a worker's failed attempt: render again
            tmp.mkdir()
            _render(tmp)
            (tmp / "done").write_text("rendered\n")
    return tmp / "out"


def _render(tmp: Path) -> None:
    """The role's preflight and templates for every case, into tmp/out/<host>/ (render_unit.yml)."""
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    # systemd-analyze verify checks that ExecStart's binary exists.
    (venv / "bin" / "python").symlink_to(sys.executable)
    model = tmp / "models" / "Qwen3.5-122B-A10B"
    model.mkdir(parents=True)
    common = {
        "ansible_python_interpreter": sys.executable,
        "sglang_server_venv_dir": str(venv),
        "sglang_server_model_path": str(model),
        "sglang_server_emulator_build_wheelhouse": False,
        # The play renders the templates outside the role, where role_path (the default's base) is unset.
        "sglang_server_emulator_wheelhouse_dir": str(ROOT / "build" / "wheelhouse"),
    }
    inventory = {
        "all": {
            "vars": common,
            "hosts": {
                "emulator-nokey": {
                    "sglang_server_engine": "emulator",
                    "sglang_server_tp_size": 4,
                    "sglang_server_emulator_startup_s": 5,
                    "spec_steps": "3",
                },
                "sglang-key": {
                    "sglang_server_engine": "sglang",
                    "sglang_server_api_key": "k3y-$ecret%n",
                    "sglang_server_max_running_requests": 64,
                    "sglang_server_mem_fraction_static": 0.8,
                    "sglang_server_extra_flags": {
                        "attention-backend": "flashinfer",
                        "json-model-override-args": '{"rope_scaling": null}',
                    },
                    "sglang_server_environment": {"SGLANG_ENABLE_SPEC_V2": "1", "HF_TOKEN": "hf_$x"},
                    "sglang_server_deployment": "2",
                    "spec_steps": 4,
                },
                "nospec-home": {
                    "sglang_server_engine": "sglang",
                    "spec_steps": 0,
                    "sglang_server_device_policy": "",
                    "sglang_server_read_write_paths": ["/home"],  # one that exists: the preflight checks it
                },
                # null limits: no directive at all (systemd warned at an empty LimitNOFILE=)
                "vaulted": {
                    "sglang_server_engine": "emulator",
                    "spec_steps": 2,
                    "sglang_server_limit_nofile": None,
                    "sglang_server_limit_memlock": None,
                },
                # DevicePolicy=auto with no DeviceAllow=: nothing closes the devices but ProtectClock's
                # implied char-rtc entry would, before systemd 252
                "auto-open": {
                    "sglang_server_engine": "emulator",
                    "spec_steps": 2,
                    "sglang_server_device_policy": "auto",
                    "sglang_server_device_allow": [],
                },
                "topk": {
                    "sglang_server_engine": "emulator",
                    "spec_steps": 3,
                    "spec_topk": 2,
                    "spec_draft_tokens": 6,
                    "sglang_server_emulator_faults": ["slow-startup=2"],
                    "sglang_server_unit_extra": {"CPUAffinity": "0-15", "Environment": ["A=1", "B=2"]},
                },
            },
            "children": {
                "tp2": {
                    "hosts": {
                        "node-a": {"sglang_server_dist_init_host": HEAD_IP},
                        "node-b": {},
                    },
                    "vars": {
                        "sglang_server_engine": "sglang",
                        "sglang_server_multinode_group": "tp2",
                        # the role's preflight bind-tests the port on rank 0's host, here this
                        # machine, where the other tests' HTTP clients take ephemeral ports
                        # (32768-60999): a make test of 2026-12-02 found the default 50000 taken
                        "sglang_server_dist_init_port": 29500,
                        "sglang_server_tp_size": 8,
                        "spec_steps": 2,
                    },
                }
            },
        }
    }
    inv = tmp / "inventory.yml"
    inv.write_text(yaml.safe_dump(inventory))
    # The vaulted host's key, as `ansible-vault encrypt_string` writes it for a host_vars file.
    password = tmp / "vault-password"
    password.write_text("render-test-password\n")
    enc = run(
        [str(ROOT / ".venv/bin/ansible-vault"), "encrypt_string", "--vault-password-file", str(password), VAULTED_KEY],
        timeout=60,
    )
    assert enc.returncode == 0, enc.stderr
    (tmp / "host_vars").mkdir()
    (tmp / "host_vars" / "vaulted.yml").write_text("sglang_server_api_key: " + enc.stdout.strip() + "\n")
    out = tmp / "out"
    proc = run(
        [
            str(ROOT / ".venv/bin/ansible-playbook"),
            "-i",
            str(inv),
            "--vault-password-file",
            str(password),
            "-e",
            f"render_dir={out}",
            str(ROOT / "tests/roles/fixtures/render_unit.yml"),
        ],
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def unit(rendered: Path, host: str) -> str:
    return (rendered / host / "sglang-qwen.service").read_text()


def exec_start(text: str) -> str:
    m = re.search(r"^ExecStart=(.*?)(?<!\\)\n", text, re.S | re.M)
    assert m
    return re.sub(r"\s*\\\n\s*", " ", m.group(1))


HOSTS = ["emulator-nokey", "sglang-key", "nospec-home", "auto-open", "topk", "vaulted", "node-a", "node-b"]


@pytest.mark.parametrize("host", HOSTS)
def test_systemd_analyze_verify_accepts_the_unit(rendered, host):
    path = rendered / host / "sglang-qwen.service"
    proc = subprocess.run([SYSTEMD_ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60)
    # Unknown or misspelt keys are only warnings to systemd: fail on any message about this unit.
    own = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "sglang-qwen" in ln]
    assert proc.returncode == 0 and not own, proc.stdout + proc.stderr


@pytest.mark.parametrize("host", HOSTS)
def test_systemd_analyze_security_rates_the_unit(rendered, host):
    path = rendered / host / "sglang-qwen.service"
    proc = subprocess.run(
        [SYSTEMD_ANALYZE, "security", "--offline=true", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for \S+: ([\d.]+)", proc.stdout + proc.stderr)
    assert m, proc.stdout + proc.stderr
    assert float(m.group(1)) <= MAX_EXPOSURE, proc.stdout


def test_one_template_for_both_engines(rendered):
    emu, real = exec_start(unit(rendered, "emulator-nokey")), exec_start(unit(rendered, "nospec-home"))
    assert " -m tuner.emulator " in emu and " -m sglang.launch_server " in real

    def strip(s):
        return [ln for ln in s.splitlines() if not ln.startswith(("ExecStart", "    ", "Description"))]

    assert strip(unit(rendered, "emulator-nokey")).count("NoNewPrivileges=yes") == 1


def test_hardening_keeps_the_gpus(rendered):
    text = unit(rendered, "sglang-key")
    # off where the test's venv and model lie under /tmp (pytest's), which PrivateTmp= would hide
    # (tests/roles/test_sglang_server_vars.py pins the rule); then the host's /tmp and /var/tmp stay
    # writable, which ProtectSystem=strict would make read-only (nvcc's JIT writes there)
    under_tmp = re.match(r"/(var/)?tmp(/|$)", str(rendered)) is not None
    venv = rendered.parent / "venv"
    for line in (
        "User=sglang",
        "Type=exec",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/sglang" + (" /tmp /var/tmp" if under_tmp else ""),
        "PrivateTmp=" + ("no" if under_tmp else "yes"),
        # JIT builds run the venv's tools by name (FlashInfer's `ninja`): its bin first on PATH
        f"Environment=PATH={venv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "Environment=TORCHINDUCTOR_CACHE_DIR=/var/lib/sglang/torchinductor",
        "ProtectHome=yes",
        "DevicePolicy=closed",
        "DeviceAllow=char-nvidiactl rw",
        "DeviceAllow=char-nvidia-uvm rwm",
        "DeviceAllow=char-nvidia-caps rw",
        "DeviceAllow=char-nvidia rw",
        # the GPUs' major 195 before driver 550.40 (the 535 long-term branch): /proc/devices names
        # it nvidia-frontend, and systemd drops a group that matches nothing
        "DeviceAllow=char-nvidia-frontend rw",
        "Restart=on-failure",
        "KillSignal=SIGTERM",
        "KillMode=mixed",
        "TimeoutStopSec=300",
        "TimeoutStartSec=1800",
        "LimitMEMLOCK=infinity",
        "LimitNOFILE=65536",
        "SyslogIdentifier=sglang-qwen",
        "EnvironmentFile=-/etc/sglang/cuda_env.env",
        "EnvironmentFile=/etc/sglang/sglang-qwen.env",
    ):
        assert f"\n{line}\n" in text, line
    directives = [ln for ln in text.splitlines() if not ln.startswith("#")]
    for forbidden in (
        "PrivateDevices=",
        "MemoryDenyWriteExecute=",
        "DeviceAllow=char-infiniband_verbs",
        "DeviceAllow=char-nvidia-caps-imex",
        "User=root",
    ):
        assert not [ln for ln in directives if ln.startswith(forbidden)], forbidden
    # nvidia-uvm loaded before the unit starts (DeviceAllow= resolves its group then) and its node
    # made as root: after a reboot the first CUDA call's setuid nvidia-modprobe could not, under
    # NoNewPrivileges=, and the GPUs stayed closed until StartLimitBurst=
    for line in ("Wants=modprobe@nvidia_uvm.service", "After=modprobe@nvidia_uvm.service"):
        assert f"\n{line}\n" in text, line
    assert "\nExecStartPre=+/bin/sh -c 'command -v nvidia-modprobe >/dev/null 2>&1 && nvidia-modprobe -u -c=0" in text
    # the emulator's unit opens no GPU, and a unit without device rules has nothing to resolve
    for other in (unit(rendered, "emulator-nokey"), unit(rendered, "nospec-home")):
        assert "modprobe" not in other


def test_api_key_only_in_the_secrets_file_handed_over_as_a_credential(rendered):
    import yaml as _yaml

    text = unit(rendered, "sglang-key")
    cmd = exec_start(text)
    assert "k3y" not in text and "--api-key" not in cmd
    assert "\nLoadCredential=server-secrets.yaml:/etc/sglang/sglang-qwen.secrets.yaml\n" in text
    # the credentials directory by its path, not %d: systemd 247-250 have LoadCredential= but refuse a
    # unit with %d (251 added it: Ubuntu 22.04's 249 failed every start with a key)
    launcher = "/opt/sglang/launcher/sglang_launcher.py --secrets /run/credentials/%n/server-secrets.yaml -- "
    assert cmd.split(" ", 1)[1].startswith(launcher), cmd
    assert " -m sglang.launch_server --config /run/credentials/%n/server-secrets.yaml --model-path " in cmd
    assert "%d" not in text
    secrets = (rendered / "sglang-key" / "secrets.yaml").read_text()
    assert _yaml.safe_load(secrets) == {"api-key": "k3y-$ecret%n"}
    env = (rendered / "sglang-key" / "env").read_text()
    assert "k3y" not in env
    assert 'HF_TOKEN="hf_\\$x"' in env and 'SGLANG_ENABLE_SPEC_V2="1"' in env
    # a redeploy's tag (the tuner's -e sglang_server_deployment) beside the inventory's environment
    assert '\nSGLANG_TUNE_DEPLOYMENT="2"\n' in env
    assert "SGLANG_TUNE_DEPLOYMENT" not in (rendered / "emulator-nokey" / "env").read_text()
    # the engine's packages: a new SGLang version changes the file, so a run that stopped between the
    # install and the restart (its queued handler lost) restarts the server on the next run
    assert '\nSGLANG_TUNE_ENGINE="sglang==0.5.9 python=/usr/bin/python3"\n' in env
    # the emulator's: the wheelhouse's content stamp (a new build of the project restarts it too)
    # (none without a built wheelhouse, whose install would stop the play first)
    stamp_file = ROOT / "build" / "wheelhouse" / ".stamp"
    emu_env = (rendered / "emulator-nokey" / "env").read_text()
    if stamp_file.exists():
        stamp = stamp_file.read_text().strip()
        assert f'\nSGLANG_TUNE_ENGINE="sglang-tune wheelhouse {stamp} python=/usr/bin/python3"\n' in emu_env
    else:
        assert "SGLANG_TUNE_ENGINE" not in emu_env
    # No key: the launcher still runs the server (it masks nothing), no credential, no --config.
    nokey = unit(rendered, "emulator-nokey")
    assert "LoadCredential=" not in nokey and "/run/credentials/" not in exec_start(nokey)
    assert exec_start(nokey).split(" ")[1:3] == ["/opt/sglang/launcher/sglang_launcher.py", "--"]
    assert _yaml.safe_load((rendered / "emulator-nokey" / "secrets.yaml").read_text()) is None


def test_a_vaulted_key_is_written_in_clear_to_the_secrets_file_only(rendered):
    """Users keep the key in Ansible Vault (README): the file gets the plain value, JSON-quoted."""
    import yaml as _yaml

    assert _yaml.safe_load((rendered / "vaulted" / "secrets.yaml").read_text()) == {"api-key": VAULTED_KEY}
    assert VAULTED_KEY not in unit(rendered, "vaulted")


def test_flags_reach_exec_start(rendered):
    real = exec_start(unit(rendered, "sglang-key"))
    assert "--speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5" in real
    assert "--max-running-requests 64" in real and "--mem-fraction-static 0.8" in real
    assert '--json-model-override-args "{\\"rope_scaling\\": null}"' in real
    emu = exec_start(unit(rendered, "emulator-nokey"))
    assert "--tp-size 4" in emu and "--emulator-startup-s 5" in emu
    topk = exec_start(unit(rendered, "topk"))
    assert "--speculative-eagle-topk 2 --speculative-num-draft-tokens 6" in topk
    assert "--emulator-fault slow-startup=2" in topk
    assert "--speculative" not in exec_start(unit(rendered, "nospec-home"))


def test_multinode_ranks_from_the_group(rendered):
    a, b = exec_start(unit(rendered, "node-a")), exec_start(unit(rendered, "node-b"))
    assert "--tp-size 8" in a and f"--nnodes 2 --node-rank 0 --dist-init-addr {HEAD_IP}:29500" in a
    assert f"--nnodes 2 --node-rank 1 --dist-init-addr {HEAD_IP}:29500" in b
    # rank 0's cross-node message queue binds the dist-init network, not the default route's
    # (SGLang's get_local_ip_auto reads SGLANG_HOST_IP first); the worker node needs none
    assert f"\nSGLANG_HOST_IP={HEAD_IP}\n" in (rendered / "node-a" / "env").read_text()
    assert "SGLANG_HOST_IP" not in (rendered / "node-b" / "env").read_text()
    assert "SGLANG_HOST_IP" not in (rendered / "nospec-home" / "env").read_text()
    # NCCL over InfiniBand or RoCE opens /dev/infiniband/uverbs*: denied, it ran over TCP sockets
    # and said so at INFO only (one node's unit does not open them: test_hardening_keeps_the_gpus)
    for node in (unit(rendered, "node-a"), unit(rendered, "node-b")):
        assert "\nDeviceAllow=char-infiniband_verbs rw\n" in node
        # and the IMEX channels a multi-node NVLink system's NCCL needs (src/mnnvl.cc)
        assert "\nDeviceAllow=char-nvidia-caps-imex-channels rw\n" in node


def test_switches(rendered):
    home = unit(rendered, "nospec-home")
    assert "\nProtectHome=read-only\n" in home and "\nDevicePolicy=" not in home and "\nDeviceAllow=" not in home
    # no device policy, no ProtectClock= (its implied DeviceAllow=char-rtc closes the GPUs under
    # DevicePolicy=auto before systemd 252): the clock's calls are filtered instead
    assert "\nProtectClock=" not in home and "\nSystemCallFilter=~@clock\n" in home
    assert "\nProtectClock=yes\n" in unit(rendered, "sglang-key")
    auto = unit(rendered, "auto-open")
    assert "\nDevicePolicy=auto\n" in auto and "\nDeviceAllow=" not in auto
    assert "\nProtectClock=" not in auto and "\nSystemCallFilter=~@clock\n" in auto
    under_tmp = re.match(r"/(var/)?tmp(/|$)", str(rendered)) is not None  # (PrivateTmp=no: test_hardening_...)
    assert "ReadWritePaths=/var/lib/sglang /home" + (" /tmp /var/tmp" if under_tmp else "") + "\n" in home
    # HOME is the state directory (in ReadWritePaths=) whatever the user's passwd entry says: the
    # role sets that home only when it makes the user (usermod refuses a new one while it runs)
    assert "\nEnvironment=HOME=/var/lib/sglang\n" in home
    topk = unit(rendered, "topk")
    assert "\nCPUAffinity=0-15\n" in topk and "\nEnvironment=A=1\nEnvironment=B=2\n" in topk


SHELLCHECK = shutil.which("shellcheck")


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed (apt install shellcheck)")
@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("script", ["restart_unit.sh", "install_emulator.sh", "venv.sh"])
def test_rendered_shell_passes_shellcheck(rendered, host, script):
    """The role's shell (the restart handler, the offline install, the venv), as rendered for each case."""
    path = rendered / host / script
    proc = subprocess.run([SHELLCHECK, "--shell=sh", "--severity=style", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + path.read_text()


def test_a_deliberate_restart_begins_a_new_start_count(rendered):
    """StartLimitBurst= counts every start, and from systemd 255 the count survives daemon-reload
    (systemd PR #30024): on Ubuntu 24.04 the fourth configuration within the hour, and the
    rollback's restart after it, met start-limit-hit. The handler's script (the rollback runs it
    too) clears the counter before its restart; a multi-node cycle clears every rank's."""
    script = (rendered / "emulator-nokey" / "restart_unit.sh").read_text()
    lines = [ln.strip() for ln in script.splitlines() if ln.strip().startswith("systemctl")]
    assert (
        lines.index('systemctl reset-failed "$unit" 2>/dev/null || true')
        == lines.index('systemctl restart "$unit"') - 1
    )
    tasks = ROOT / "roles" / "sglang_server" / "tasks"
    assert "restart_unit.sh.j2" in (tasks / "rollback.yml").read_text()
    assert "systemctl reset-failed" in (tasks / "multinode_cycle.yml").read_text()
