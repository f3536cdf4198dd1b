"""The role's sglang_server_files module, run for real by Ansible against files on the controller."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from roles_testlib import VENV_BIN, run

SECRET = "k3y-never-printed"


def apply(tmp_path, files, check=False, last_good=""):
    args = json.dumps({"files": files, "last_good_dir": str(last_good)})
    cmd = [
        str(VENV_BIN / "ansible"),
        "localhost",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-m",
        "sglang_tune.serving.sglang_server_files",
        "-a",
        args,
        "-v",
    ] + (["--check"] if check else [])
    proc = run(
        cmd,
        timeout=120,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
    )
    out = proc.stdout + proc.stderr
    assert SECRET not in out
    assert proc.returncode == 0, out
    return json.loads(out[out.index("{") :])


def spec(tmp_path):
    return [
        {
            "path": str(tmp_path / "etc/systemd/sglang-qwen.service"),
            "content": "[Service]\nType=exec\n",
            "last_good_name": "unit",
        },
        {
            "path": str(tmp_path / "etc/sglang/sglang-qwen.env"),
            "content": f'SGLANG_SERVER_API_KEY="{SECRET}"\n',
            "mode": "0600",
            "last_good_name": "env",
        },
    ]


def test_writes_once_then_reports_unchanged(tmp_path):
    files = spec(tmp_path)
    first = apply(tmp_path, files)
    assert first["changed"] is True
    assert first["changed_files"] == [f["path"] for f in files]
    env = tmp_path / "etc/sglang/sglang-qwen.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600 and env.stat().st_uid == os.geteuid()
    assert env.read_text() == files[1]["content"]
    assert stat.S_IMODE((tmp_path / "etc/systemd/sglang-qwen.service").stat().st_mode) == 0o644
    again = apply(tmp_path, files)
    assert again["changed"] is False and again["changed_files"] == []
    assert again["unit_state"] == {}


def test_mode_drift_and_content_change_are_repaired(tmp_path):
    files = spec(tmp_path)
    apply(tmp_path, files)
    env = tmp_path / "etc/sglang/sglang-qwen.env"
    env.chmod(0o644)
    assert apply(tmp_path, files)["changed_files"] == [files[1]["path"]]
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    files[0]["content"] += "Restart=on-failure\n"
    assert apply(tmp_path, files)["changed_files"] == [files[0]["path"]]


def test_check_mode_writes_nothing(tmp_path):
    files = spec(tmp_path)
    res = apply(tmp_path, files, check=True)
    assert res["changed"] is True
    assert not (tmp_path / "etc").exists()


def test_last_good_comparison(tmp_path):
    files = spec(tmp_path)
    good = tmp_path / "last-good"
    assert apply(tmp_path, files, last_good=good)["last_good_current"] is False
    good.mkdir()
    (good / "unit").write_text(files[0]["content"])
    (good / "env").write_text(files[1]["content"])
    assert apply(tmp_path, files, last_good=good)["last_good_current"] is True
    files[0]["content"] += "# changed\n"
    assert apply(tmp_path, files, last_good=good)["last_good_current"] is False


@pytest.mark.parametrize(
    "bad,needle",
    [
        ({"mode": "644x"}, "mode must be an octal string"),
        ({"owner": "no-such-user-xyz"}, "no such user"),
        ({"path": "relative/file"}, "path must be absolute"),
    ],
)
def test_bad_arguments_fail_clearly(tmp_path, bad, needle):
    files = spec(tmp_path)
    files[0].update(bad)
    args = json.dumps({"files": files})
    proc = run(
        [
            str(VENV_BIN / "ansible"),
            "localhost",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            "sglang_tune.serving.sglang_server_files",
            "-a",
            args,
        ],
        timeout=120,
    )
    assert proc.returncode != 0
    assert needle in proc.stdout + proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
