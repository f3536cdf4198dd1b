"""NVIDIA's CUDA apt repository tasks (roles/cuda_env/tasks/repo.yml) against a Debian 12 emulator-host
container with no network: a real run, a second run that changes nothing, a check-mode run that changes
nothing, and apt reading the source the role wrote. The key comes from a file:// URL (a mirror's form);
package installation needs the repository itself and is not tested here, only its dry run on the fresh
host."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, REPO
from podman_host import labelled_run

IMAGE = os.environ.get("SGLANG_EMU_IMAGE", "localhost/sglang-emulator-host:bookworm")
SOURCES = "/etc/apt/sources.list.d/cuda-sglang-tune.sources"
KEYRING = "/etc/apt/keyrings/cuda-archive-keyring.asc"


def _podman_ready() -> bool:
    if not shutil.which("podman"):
        return False
    return subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True).returncode == 0


pytestmark = [
    # the file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py)
    pytest.mark.cost(110),
    pytest.mark.slow,
    pytest.mark.systemd,
    pytest.mark.skipif(not _podman_ready(), reason=f"podman or {IMAGE} missing (make setup)"),
]


def podman(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *argv], capture_output=True, text=True, timeout=120, check=check)


@pytest.fixture(scope="module")
def container():
    name = f"sgt-test-cuda-{uuid.uuid4().hex[:8]}"
    try:
        podman(*labelled_run(name, IMAGE, "sleep", "infinity"))
        podman("cp", str(FIXTURES / "placeholder-repo-key.asc"), f"{name}:/srv/key.asc")
        yield name
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def run_play(tmp: Path, name: str, *extra: str, **hostvars) -> subprocess.CompletedProcess:
    inv = {
        "all": {
            "hosts": {
                name: {
                    "ansible_connection": "containers.podman.podman",
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "cuda_env_install": True,
                    "cuda_env_gpu_source": "declared",
                    "cuda_env_declared_gpus": [
                        {
                            "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                            "memory_mib": 97887,
                            "compute_capability": "12.0",
                            "driver": "580.95.05",
                            "count": 4,
                        }
                    ],
                    "cuda_env_repo_key_url": "file:///srv/key.asc",
                    **hostvars,
                }
            }
        }
    }
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(path),
            str(REPO / "tests" / "cuda_env" / "playbooks" / "repo.yml"),
            *extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def changed(proc: subprocess.CompletedProcess) -> int:
    m = re.search(r"changed=(\d+)", proc.stdout)
    assert m and proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return int(m.group(1))


def test_repository_is_added_idempotently_offline(container, tmp_path) -> None:
    # a dry run of the install on the fresh host: apt refreshes no index in check mode, so the
    # packages of the source not yet written were unknown and the run failed ("No package matching")
    dry = run_play(tmp_path, container, "--check")
    assert dry.returncode == 0 and "would install cuda-toolkit-12-8, libnccl2=" in dry.stdout, dry.stdout[-3000:]
    assert podman("exec", container, "test", "-e", SOURCES, check=False).returncode == 1  # nothing written
    assert changed(run_play(tmp_path, container)) >= 2  # keyring + source (the directory may exist)
    source = podman("exec", container, "cat", SOURCES).stdout
    assert "URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/\n" in source
    assert "Suites: /\n" in source and f"Signed-By: {KEYRING}\n" in source and "Types: deb\n" in source
    assert podman("exec", container, "cat", KEYRING).stdout == (FIXTURES / "placeholder-repo-key.asc").read_text()
    assert podman("exec", container, "stat", "-c", "%a %U", KEYRING, SOURCES).stdout.split() == [
        "644",
        "root",
        "644",
        "root",
    ]

    assert changed(run_play(tmp_path, container)) == 0

    mirror = "http://mirror.example.internal/cuda/debian12/x86_64/"
    check = run_play(tmp_path, container, "--check", "--diff", cuda_env_repo_url=mirror)
    assert changed(check) == 1 and mirror in check.stdout
    assert mirror not in podman("exec", container, "cat", SOURCES).stdout  # check mode wrote nothing

    # apt reads the source: with no network it fails to fetch from that URL, not to parse the file.
    update = podman("exec", container, "apt-get", "update", check=False)
    out = update.stdout + update.stderr
    assert "developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64" in out, out
    assert "Malformed" not in out and "not parse" not in out


def test_a_source_cuda_keyring_wrote_is_used_not_duplicated(container, tmp_path) -> None:
    """NVIDIA's cuda-keyring package writes its own source for the repository: a second entry with
    another Signed-By makes apt refuse every source, so the role uses that one and removes its own."""
    own = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
    line = (
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n"
    )
    podman("exec", container, "sh", "-c", f"printf '%s' '{line}' > {own}")
    try:
        assert changed(run_play(tmp_path, container)) >= 1  # this role's own source removed
        assert podman("exec", container, "test", "-e", SOURCES, check=False).returncode == 1
        assert changed(run_play(tmp_path, container)) == 0
        update = podman("exec", container, "apt-get", "update", check=False)
        assert "Conflicting values" not in update.stdout + update.stderr
    finally:
        podman("exec", container, "rm", "-f", own, check=False)


def test_a_disabled_source_does_not_count_and_a_conflict_is_repaired(container, tmp_path) -> None:
    """apt's own reading decides which sources carry the repository: a deb822 stanza with
    `Enabled: no` names it but carries nothing, so the role writes its own source. When a
    cuda-keyring source arrives after that (two entries disagreeing on Signed-By, apt refusing every
    source), the files are searched line by line and the role's own source goes."""
    disabled = "/etc/apt/sources.list.d/cuda-disabled.sources"
    stanza = (
        "Types: deb\\n"
        "URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/\\n"
        "Suites: /\\n"
        "Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg\\n"
        "Enabled: no\\n"
    )
    keyring_list = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
    line = (
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64 /\\n"
    )
    podman("exec", container, "sh", "-c", f"printf '{stanza}' > {disabled}")
    try:
        run_play(tmp_path, container)  # whatever the earlier tests left: the role's source is written
        assert podman("exec", container, "test", "-e", SOURCES, check=False).returncode == 0
        assert changed(run_play(tmp_path, container)) == 0
        update = podman("exec", container, "apt-get", "update", check=False)
        assert "Conflicting values" not in update.stdout + update.stderr

        # the keyring's own source arrives: apt now refuses every source until one entry goes
        podman("exec", container, "sh", "-c", f"printf '{line}' > {keyring_list}")
        broken = podman("exec", container, "apt-get", "indextargets", "--no-release-info", check=False)
        assert broken.returncode != 0 and "Conflicting values" in broken.stderr, broken.stderr
        assert changed(run_play(tmp_path, container)) >= 1  # this role's own source removed
        assert podman("exec", container, "test", "-e", SOURCES, check=False).returncode == 1
        assert changed(run_play(tmp_path, container)) == 0
        fixed = podman("exec", container, "apt-get", "indextargets", "--no-release-info", check=False)
        assert fixed.returncode == 0, fixed.stderr
    finally:
        podman("exec", container, "rm", "-f", disabled, keyring_list, check=False)


def test_a_failed_install_says_what_to_change_and_leaves_apt_working(container, tmp_path) -> None:
    """Offline, nothing can be fetched. The role failed with the apt module's raw words and left its
    source behind, so every later `apt-get update` on the host failed too; now it says what to
    change and takes back the source and key this run wrote."""
    podman("exec", container, "rm", "-f", SOURCES, KEYRING)
    # the repository play writes the source and key, then the install runs (here, for real)
    proc = run_play(tmp_path, container, "-e", "run_install=true")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    # this image has no python3-apt, which the apt module installs first (offline: it cannot), the
    # failure a host whose own repositories are unreachable meets (the other causes' words:
    # tests/cuda_env/test_cuda_env_gpu_facts.py)
    assert "installing cuda-toolkit-12-8, libnccl2=" in out and "failed: E: Unable to locate package python3-apt" in out
    assert "install python3-apt, or make those repositories reachable" in out, out[-3000:]
    assert f"Taken back so that apt keeps working: {SOURCES}, {KEYRING}" in out, out[-3000:]
    assert podman("exec", container, "test", "-e", SOURCES, check=False).returncode == 1
    assert podman("exec", container, "test", "-e", KEYRING, check=False).returncode == 1
    update = podman("exec", container, "apt-get", "update", check=False)
    assert "developer.download.nvidia.com" not in update.stdout + update.stderr
