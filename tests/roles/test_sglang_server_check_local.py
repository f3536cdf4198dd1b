"""`--check` of the role's steps on the local connection into a scratch directory: a dry run
changes nothing, does not fail where the real run would pass, and reports as changed what the real
run would change (the multi-node group's restart is tests/roles/test_sglang_server_multinode.py's)."""

from __future__ import annotations

import json
import re
import sys

from roles_testlib import ROOT, VENV_BIN, run

PLAY = str(ROOT / "tests/roles/fixtures/tasks_check_local.yml")


def dry_run(tmp_path, task_files: list[str], **extra) -> str:
    """The fixture in --check over `task_files` with these variables: its output (it must pass)."""
    extra = {"ansible_python_interpreter": sys.executable, "task_files": task_files, **extra}
    proc = run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "--check", "-e", json.dumps(extra), PLAY],
        timeout=180,
        ANSIBLE_REMOTE_TMP=str(tmp_path / "remote-tmp"),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def task_result(out: str, name: str) -> str:
    """`changed`, `ok` or `skipping`: what the task named `name` reported."""
    m = re.search(r"TASK \[[\w.]*sglang_server : " + re.escape(name) + r"\] \*+\n(\w+):", out)
    assert m is not None, out[-4000:]
    return m.group(1)


def test_a_fresh_host_with_the_output_check_dry_runs_and_says_what_it_would_keep(tmp_path):
    """With verify_outputs on, the dry run of a fresh host asked a server that was not there for its
    outputs, failed, and rolled back; and it called keeping the last good copy unchanged where the
    real run writes it."""
    baseline = tmp_path / "baseline.json"
    prompts = {"short_prompts": 1, "long_prompts": 1}
    sha = "04f947a98187b3efff04b852629a2f4332811d51a80109c17aa89276290eccc5"  # of the two prompts below
    baseline.write_text(
        json.dumps(
            {
                "format": 1,
                "server_version": "0.5.9",
                "model": "/m",
                "settings": prompts,
                "short": [{"id": "s0", "prompt": "hi", "text": "hello"}],
                "long": [{"id": "l0", "prompt": "long prompt", "text": "long answer"}],
                "prompt_set_sha256": sha,
            }
        )
    )
    host = tmp_path / "host"
    out = dry_run(
        tmp_path,
        ["configure", "run"],
        sglang_server_engine="emulator",
        sglang_server_model_path="/shared/models/Qwen3.5-122B-A10B",
        sglang_server_config_dir=str(host / "etc"),
        sglang_server_install_dir=str(host / "opt"),
        sglang_server_state_dir=str(host / "state"),
        _sglang_server_unit_path=str(host / "systemd" / "sglang-check.service"),
        sglang_server_unit_name="sglang-check.service",
        sglang_server_cuda_env_file=str(host / "etc" / "cuda_env.env"),
        sglang_server_emulator_build_wheelhouse=False,
        spec_steps=3,
        verify_outputs=True,
        sglang_server_verify_baseline=str(baseline),
    )
    assert not host.exists()
    assert task_result(out, "Wait until the server is ready and read its capacity") == "skipping"
    assert task_result(out, "Check the greedy outputs and the acceptance against the stored baseline") == "skipping"
    assert task_result(out, "Keep this configuration as the last good one") == "changed"
    assert "Roll back to the last good configuration" not in out


def test_a_changed_project_dry_runs_its_new_wheelhouse(tmp_path):
    """The controller's wheelhouse build was skipped in --check: the dry run read the last build's
    stamp, found it installed, and said nothing would change where the real run rebuilds, reinstalls
    and restarts (on a checkout never built it failed instead)."""
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "sglang_tune-0.1.0-py3-none-any.whl").write_bytes(b"")
    (wheelhouse / ".stamp").write_text("old\n")
    venv = tmp_path / "host" / "venv"
    venv.mkdir(parents=True)
    (venv / ".sglang-tune-wheelhouse-old").write_text("")
    # stands in for scripts/build_wheelhouse.py after the project's sources changed
    build = tmp_path / "build.sh"
    build.write_text(f"echo new > {wheelhouse}/.stamp\necho changed\n")
    out = dry_run(
        tmp_path,
        ["install_emulator"],
        sglang_server_engine="emulator",
        sglang_server_emulator_wheelhouse_dir=str(wheelhouse),
        sglang_server_emulator_build_wheelhouse=True,
        sglang_server_emulator_build_command=f"/bin/sh {build}",
        sglang_server_venv_dir=str(venv),
        sglang_server_install_dir=str(tmp_path / "host" / "opt"),
    )
    assert task_result(out, "Install the emulator package into the venv (offline)") == "changed"
    assert sorted(p.name for p in venv.iterdir()) == [".sglang-tune-wheelhouse-old"]
    assert not (tmp_path / "host" / "opt").exists()
