"""The sglang_server role's one way of writing host files: the sglang_server_apply action plugin
(plugins/action/sglang_server_apply.py) and its host program (roles/sglang_server/files/sglang_apply.py).

The host program's three states are run directly on real files in a scratch directory (the tests
run as root, as the program does on a host); the action plugin runs for real through
ansible-playbook and the role's own tasks/configure.yml (local connection), with pipelining
(program and payload on stdin) and without (a file in the remote temporary directory).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import sys

import pytest
from roles_testlib import ROOT, VENV_BIN, run

ROLE = ROOT / "roles" / "sglang_server"
_spec = importlib.util.spec_from_file_location("sglang_apply", ROLE / "files" / "sglang_apply.py")
A = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(A)  # type: ignore[union-attr]

KEY = "k3y-'never\"-printed-$x"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files, as on a host")


def layout(tmp_path, profile=True):
    return [
        {
            "name": "unit",
            "path": str(tmp_path / "systemd/sglang-qwen.service"),
            "mode": "0644",
            "present": True,
            "keep": True,
        },
        {"name": "env", "path": str(tmp_path / "etc/sglang-qwen.env"), "mode": "0600", "present": True, "keep": True},
        {
            "name": "secrets",
            "path": str(tmp_path / "etc/sglang-qwen.secrets.yaml"),
            "mode": "0600",
            "present": True,
            "keep": True,
        },
        {"name": "profile", "path": str(tmp_path / "etc/p.yaml"), "mode": "0644", "present": profile, "keep": True},
        {
            "name": "launcher",
            "path": str(tmp_path / "opt/launcher/l.py"),
            "mode": "0644",
            "present": True,
            "keep": False,
        },
    ]


CONTENTS = {
    "unit": "[Service]\n",
    "env": "A=1\n",
    "secrets": f"api-key: {json.dumps(KEY)}\n",
    "profile": "p: 1\n",
    "launcher": "#\n",
}


def payload(tmp_path, state="configured", files=None, contents=None, check=False):
    files = [dict(f) for f in (files or layout(tmp_path))]
    if state == "configured":
        for f in files:
            if f["present"] and f.get("managed", True):  # as the action sends them
                f["content"] = (contents or CONTENTS)[f["name"]]
    return {"state": state, "check_mode": check, "unit": "", "last_good_dir": str(tmp_path / "good"), "files": files}


def mode(path):
    st = os.stat(path)
    return oct(stat.S_IMODE(st.st_mode)), st.st_uid, st.st_gid


def test_configured_writes_once_with_modes_then_changes_nothing(tmp_path):
    first = A.apply(payload(tmp_path))
    assert sorted(first["changed_files"]) == sorted(f["path"] for f in layout(tmp_path))
    assert first["last_good_current"] is False and first["unit_state"] == {}
    assert mode(tmp_path / "etc/sglang-qwen.secrets.yaml") == ("0o600", 0, 0)
    assert mode(tmp_path / "systemd/sglang-qwen.service") == ("0o644", 0, 0)
    assert (tmp_path / "etc/sglang-qwen.secrets.yaml").read_text() == CONTENTS["secrets"]
    assert A.apply(payload(tmp_path))["changed_files"] == []
    # A mode that drifted is put back; a file no longer wanted is removed.
    os.chmod(tmp_path / "etc/sglang-qwen.secrets.yaml", 0o644)
    files = layout(tmp_path, profile=False)
    again = A.apply(payload(tmp_path, files=files))
    assert sorted(again["changed_files"]) == sorted(
        [str(tmp_path / "etc/sglang-qwen.secrets.yaml"), str(tmp_path / "etc/p.yaml")]
    )
    assert mode(tmp_path / "etc/sglang-qwen.secrets.yaml")[0] == "0o600" and not (tmp_path / "etc/p.yaml").exists()
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()], "temporary files left behind"


def test_check_mode_reports_and_writes_nothing(tmp_path):
    res = A.apply(payload(tmp_path, check=True))
    assert len(res["changed_files"]) == 5 and not any(tmp_path.rglob("*.env"))


def test_kept_and_restored_are_the_last_good_layout(tmp_path):
    A.apply(payload(tmp_path))
    kept = A.apply(payload(tmp_path, state="kept"))
    good = tmp_path / "good"
    assert sorted(os.listdir(good)) == ["env", "profile", "secrets", "unit"]  # not the launcher (keep: false)
    assert mode(good) == ("0o700", 0, 0) and mode(good / "secrets") == ("0o600", 0, 0)
    assert len(kept["changed_files"]) == 4
    assert A.apply(payload(tmp_path))["last_good_current"] is True
    # A new configuration without the profile, then the rollback puts the good one back.
    A.apply(payload(tmp_path, files=layout(tmp_path, profile=False), contents=dict(CONTENTS, unit="[Service]\nbad\n")))
    assert A.apply(payload(tmp_path, files=layout(tmp_path, profile=False)))["last_good_current"] is False
    restored = A.apply(payload(tmp_path, state="restored"))
    assert restored["found"] is True
    assert (tmp_path / "systemd/sglang-qwen.service").read_text() == "[Service]\n"
    assert (tmp_path / "etc/p.yaml").read_text() == "p: 1\n"
    # Keeping a configuration without the profile removes the profile's copy.
    A.apply(payload(tmp_path, files=layout(tmp_path, profile=False)))
    A.apply(payload(tmp_path, state="kept"))
    assert not (good / "profile").exists()


def test_another_roles_file_is_kept_and_restored_never_written(tmp_path):
    """cuda_env's environment file, which the unit loads: a new NCCL setting that failed the start
    stayed through the rollback, which restarted the old flags in the new environment (a mix that
    never passed the gate). It is kept and restored with the rest, and never written or removed by
    `configured`; a last good configuration kept before it was leaves it as it is."""
    cuda = tmp_path / "etc/cuda_env.env"
    files = layout(tmp_path) + [
        {"name": "cuda_env", "path": str(cuda), "mode": "0644", "present": True, "keep": True, "managed": False}
    ]
    cuda.parent.mkdir(parents=True, exist_ok=True)
    A.apply(payload(tmp_path))  # a last good configuration from before the file was kept
    A.apply(payload(tmp_path, state="kept"))
    cuda.write_text("NCCL_SOCKET_IFNAME=eth0\n")
    os.chmod(cuda, 0o644)
    first = A.apply(payload(tmp_path, files=files))
    assert first["changed_files"] == [] and first["last_good_current"] is True
    assert A.apply(payload(tmp_path, state="restored", files=files))["changed_files"] == []
    assert cuda.read_text() == "NCCL_SOCKET_IFNAME=eth0\n"
    A.apply(payload(tmp_path, state="kept", files=files))
    assert (tmp_path / "good" / "cuda_env").read_text() == "NCCL_SOCKET_IFNAME=eth0\n"
    cuda.write_text("NCCL_SOCKET_IFNAME=nope0\n")  # cuda_env's next run
    assert A.apply(payload(tmp_path, files=files))["last_good_current"] is False
    restored = A.apply(payload(tmp_path, state="restored", files=files))
    assert restored["changed_files"] == [str(cuda)] and cuda.read_text() == "NCCL_SOCKET_IFNAME=eth0\n"


def test_restored_without_a_last_good_configuration_changes_nothing(tmp_path):
    A.apply(payload(tmp_path))
    res = A.apply(payload(tmp_path, state="restored"))
    assert res == {"changed_files": [], "found": False, "changed": False}
    assert (tmp_path / "etc/sglang-qwen.secrets.yaml").exists()


def test_a_failed_write_changes_no_file(tmp_path):
    """Every temporary file is written before the first rename: one that cannot be written leaves
    every file as it was (here the launcher's directory is a file)."""
    A.apply(payload(tmp_path))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    (tmp_path / "opt/launcher/l.py").unlink()
    (tmp_path / "opt/launcher").rmdir()
    (tmp_path / "opt/launcher").write_text("not a directory")
    new = dict(CONTENTS, unit="[Service]\nnew\n", secrets='api-key: "another-key-1"\n')
    out = json.loads(_run_main(tmp_path, payload(tmp_path, contents=new)))
    assert out["failed"] is True and "launcher" in out["msg"] and "another-key" not in out["msg"]
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != "launcher"}
    assert {p: v for p, v in before.items() if p.parent.name != "launcher"} == after


def _run_main(tmp_path, data):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        A.main(data)
    return buf.getvalue()


def test_the_payload_file_is_removed_first(tmp_path):
    tmpdir = tmp_path / "ansible-tmp-1"
    tmpdir.mkdir()
    (tmpdir / "sglang_apply.py").write_text("payload")
    data = dict(payload(tmp_path), cleanup=[str(tmpdir)])
    assert json.loads(_run_main(tmp_path, data))["changed"] is True
    assert not tmpdir.exists()


# ------------------------------------------------------------------------------------------
# The action plugin through the role's tasks/configure.yml
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pipelining,installed", [(True, False), (False, False), (False, True)], ids=["stdin", "tmpdir", "payload-dir"]
)
def test_configure_through_ansible_never_shows_the_key(tmp_path, pipelining, installed):
    """stdin: the program and payload on the exec's stdin. tmpdir: a file in a new remote temporary
    directory (configure before install). payload-dir: a file in the last-good directory that
    install made (one exec over podman)."""
    etc, opt, state = tmp_path / "etc", tmp_path / "opt", tmp_path / "state"
    good = etc / "last-good" / "sglang-qwen"
    if installed:
        good.mkdir(parents=True, mode=0o700)
    result = tmp_path / "result.json"
    extra = {
        "out": str(result),
        "ansible_python_interpreter": sys.executable,
        "sglang_server_engine": "emulator",
        "sglang_server_model_path": "/shared/models/Qwen3.5-122B-A10B",
        "sglang_server_config_dir": str(etc),
        "sglang_server_install_dir": str(opt),
        "sglang_server_state_dir": str(state),
        "_sglang_server_unit_path": str(tmp_path / "systemd" / "sglang-qwen.service"),
        "sglang_server_api_key": KEY,
        "sglang_server_emulator_build_wheelhouse": False,
        "spec_steps": 3,
    }
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps(extra))

    def play(*more):
        proc = run(
            [
                str(VENV_BIN / "ansible-playbook"),
                "-i",
                "localhost,",
                "-e",
                f"@{varsfile}",
                "-vvv",
                *more,
                str(ROOT / "tests/roles/fixtures/configure_local.yml"),
            ],
            timeout=180,
            ANSIBLE_PIPELINING="True" if pipelining else "False",
            ANSIBLE_REMOTE_TMP=str(tmp_path / "remote-tmp"),
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        return out, json.loads(result.read_text())

    out, first = play("--check")
    assert first["changed"] is True and not (etc / "sglang-qwen.env").exists()
    out, first = play()
    assert "api-key" not in out and "sha256" not in out.lower()
    for form in (KEY, json.dumps(KEY)[1:-1], repr(KEY)[1:-1]):
        assert form not in out
    assert str(etc / "sglang-qwen.secrets.yaml") in first["changed_files"]
    assert mode(etc / "sglang-qwen.secrets.yaml") == ("0o600", 0, 0)
    assert (etc / "sglang-qwen.secrets.yaml").read_text().endswith(f"api-key: {json.dumps(KEY)}\n")
    assert (opt / "launcher" / "sglang_launcher.py").read_bytes() == (ROLE / "files/sglang_launcher.py").read_bytes()
    assert (opt / "launcher" / "sglang_secrets.py").read_bytes() == (
        ROOT / "plugins/module_utils/sglang_secrets.py"
    ).read_bytes()
    unit = (tmp_path / "systemd" / "sglang-qwen.service").read_text()
    assert KEY not in unit and "LoadCredential=server-secrets.yaml:" + str(etc / "sglang-qwen.secrets.yaml") in unit
    out, second = play()
    assert second["changed"] is False and second["changed_files"] == []
    # Nothing of the payload is left behind, and only the program's way was used.
    assert not [p for p in (tmp_path / "remote-tmp").rglob("*") if p.is_file()]
    assert not list(etc.rglob(".sglang-apply-*"))
    task = re.split(r"TASK \[[\w.]*sglang_server : Write the unit", out, maxsplit=1)[1].split("\nTASK [", 1)[0]
    execs = [ln for ln in task.splitlines() if "EXEC /bin/sh -c" in ln]
    assert len(execs) == (2 if not pipelining and not installed else 1), execs
