"""The collection as a user gets it: built into a tarball, installed offline into a fresh
collections path, documented by ansible-doc and run by FQCN against an emulator host.

Nothing of the repo is on the way: the commands run in a scratch directory with an ansible.cfg of
their own whose collections path holds only the installed sglang_tune.serving and its dependency
containers.podman (taken from the set-up's collections, as a user's Galaxy install would give it).
The host (index 131, the tests' range) is made and removed by the installed collection's
emulator_hosts play; the deploy play installs the emulator from the wheelhouse that `make setup`
builds (the engine the role installs is not part of the collection).
"""

from __future__ import annotations

import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest
import yaml
from roles_testlib import ROOT, VENV_BIN, ansible_env, remove_container

HOST, INDEX = "coll-e2e-131", 131
COLLECTION = ("sglang_tune", "serving")


def _run(cmd: list[str], cwd: Path, cfg: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = ansible_env(ANSIBLE_CONFIG=str(cfg))
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(ROOT)],
        cwd=ROOT,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = out.glob("sglang_tune-serving-*.tar.gz")
    return path


def test_tarball_holds_the_content_and_no_local_state(tarball) -> None:
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    top = {n.split("/")[0] for n in names}
    assert top == {
        "MANIFEST.json",
        "FILES.json",
        "README.md",
        "CHANGELOG.md",
        "requirements.yml",
        "docs",
        "inventory",
        "meta",
        "playbooks",
        "plugins",
        "roles",
        "tests",
    }, top
    assert "plugins/modules/sglang_ready.py" in names and "playbooks/deploy.yml" in names
    assert {n for n in names if n.startswith("tests/")} <= {"tests/sanity", "tests/sanity/ignore-2.19.txt"}
    assert not [n for n in names if "/molecule/" in n or "__pycache__" in n or n.endswith(".pyc")]


# The systemd stage's share of the file, in seconds (scripts/test.sh schedules the longest first:
# tests/conftest.py); on the test, not the file, so that the tarball's unit test keeps its place.
@pytest.mark.cost(35)
@pytest.mark.systemd
@pytest.mark.slow
def test_installed_collection_documents_and_deploys(need_podman, frozen_wheelhouse, tarball, tmp_path) -> None:
    colls = tmp_path / "collections"
    (colls / "ansible_collections").mkdir(parents=True)
    # The dependency as Galaxy would have installed it (galaxy.yml: containers.podman).
    (colls / "ansible_collections" / "containers").symlink_to(
        ROOT / ".ansible" / "collections" / "ansible_collections" / "containers"
    )
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text(
        "[defaults]\n"
        f"collections_path = {colls}\n"
        "interpreter_python = auto_silent\n"
        "gathering = explicit\n"
        "callback_result_format = yaml\n"
        f"local_tmp = {tmp_path / 'ansible-tmp'}\n"
    )
    galaxy = str(VENV_BIN / "ansible-galaxy")
    inst = _run([galaxy, "collection", "install", "--offline", "-p", str(colls), str(tarball)], tmp_path, cfg)
    assert inst.returncode == 0 and "sglang_tune.serving:0.1.0 was installed successfully" in inst.stdout, (
        inst.stdout + inst.stderr
    )
    installed = colls / "ansible_collections" / "sglang_tune" / "serving"
    assert (installed / "plugins" / "modules" / "sglang_ready.py").is_file()

    doc = _run([str(VENV_BIN / "ansible-doc"), "sglang_tune.serving.sglang_ready"], tmp_path, cfg)
    assert doc.returncode == 0, doc.stderr
    assert str(installed / "plugins" / "modules" / "sglang_ready.py") in doc.stdout
    assert "Polls `GET /health'" in doc.stdout

    inv = yaml.safe_load((installed / "inventory" / "emulator.yml").read_text())
    group = inv["all"]["children"]["emulator_hosts"]
    group["hosts"] = {HOST: {"emulator_host_index": INDEX}}
    # the installed collection has no build script: the role's default leaves the build out
    # (it failed the deploy's first install task) and installs from the wheelhouse it is given
    group["vars"].update(
        sglang_server_emulator_wheelhouse_dir=str(frozen_wheelhouse),
        sglang_server_emulator_startup_s=1,
    )
    inv_path = tmp_path / "inventory.yml"
    inv_path.write_text(yaml.safe_dump(inv))
    play = str(VENV_BIN / "ansible-playbook")
    try:
        made = _run([play, "-i", str(inv_path), "sglang_tune.serving.emulator_hosts"], tmp_path, cfg)
        assert made.returncode == 0, made.stdout[-4000:] + made.stderr[-2000:]
        deployed = _run([play, "-i", str(inv_path), "sglang_tune.serving.deploy", "-e", "spec_steps=2"], tmp_path, cfg)
        out = deployed.stdout
        assert deployed.returncode == 0, out[-6000:] + deployed.stderr[-2000:]
        assert f"{HOST}: max_total_num_tokens=377207" in out, out[-4000:]
        # The tasks ran from the installed copy, not from a checkout.
        assert str(ROOT / "roles") not in out
        with urllib.request.urlopen(f"http://10.213.{INDEX}.2:30000/health", timeout=10) as resp:
            assert resp.status == 200
    finally:
        gone = _run(
            [play, "-i", str(inv_path), "sglang_tune.serving.emulator_hosts", "-e", "emulator_hosts_state=absent"],
            tmp_path,
            cfg,
        )
        remove_container(HOST)
    assert gone.returncode == 0, gone.stdout[-3000:]
