"""The role's venv and SGLang install steps, run for real on the local connection into a scratch
directory: a venv made again when `sglang_server_python` names another interpreter or another
Python minor version (the old one's site-packages would not import), an unchanged host unchanged,
and `--check` telling the truth on an air-gapped host's offline wheelhouse. SGLang itself is a
wheel of the same name and version made here (the host installs whatever the wheelhouse holds)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from roles_testlib import ROOT, VENV_BIN, run

VERSION = "0.5.9"  # roles/sglang_server/defaults/main.yml sglang_server_sglang_version
PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


def stand_in_wheel(wheelhouse: Path, version: str, name: str = "sglang", requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel (sglang by default) that imports and says its version, with `requires`
    as its Requires-Dist."""
    pkg = name.replace("-", "_")
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{pkg}/__init__.py": f'__version__ = "{version}"\n',
        f"{pkg}-{version}.dist-info/METADATA": meta,
        f"{pkg}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{fname},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text.encode())}"
        for fname, text in files.items()
    ]
    files[f"{pkg}-{version}.dist-info/RECORD"] = "\n".join([*record, f"{pkg}-{version}.dist-info/RECORD,,"]) + "\n"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    path = wheelhouse / f"{pkg}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for fname, text in files.items():
            zf.writestr(fname, text)
    return path


REPORT_TASK = "TASK [Say what the two steps reported]"  # tests/roles/fixtures/install_local.yml


def install_play(tmp_path: Path, python: Path, *more: str, install: bool = True, **role_vars: str) -> dict:
    """The role's venv and install steps (tests/roles/fixtures/install_local.yml) into tmp_path/opt,
    from the wheelhouse tmp_path/wheelhouse, with `python`: what each step reported (the play's last
    task prints it, in JSON)."""
    extra = {
        "install": install,
        "ansible_python_interpreter": sys.executable,
        "sglang_server_install_dir": str(tmp_path / "opt"),
        "sglang_server_python": str(python),
        "sglang_server_wheelhouse_dir": str(tmp_path / "wheelhouse"),
        "sglang_server_engine": "sglang",
        **role_vars,
    }
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            "localhost,",
            "-e",
            json.dumps(extra),
            *more,
            str(ROOT / "tests/roles/fixtures/install_local.yml"),
        ],
        timeout=240,
        ANSIBLE_REMOTE_TMP=str(tmp_path / "remote-tmp"),
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert proc.stdout.count(REPORT_TASK) == 1, proc.stdout[-4000:]
    after = proc.stdout[proc.stdout.index(REPORT_TASK) :]
    result, _ = json.JSONDecoder().raw_decode(after, after.index("=> ") + 3)
    return result["msg"]


@pytest.mark.cost(45)  # seconds, measured alone: the unit stage starts its longest tests first (tests/conftest.py)
def test_the_venv_follows_the_interpreter_and_check_tells_the_truth_offline(tmp_path):
    assert PYTHON.exists(), PYTHON
    wheelhouse = tmp_path / "wheelhouse"
    stand_in_wheel(wheelhouse, VERSION)
    opt = tmp_path / "opt"
    venv = opt / "venv"
    # another interpreter of the same Python: a copy of the binary elsewhere (it finds its standard
    # library through the prefix it was built with)
    other = tmp_path / "other-python" / PYTHON.name
    other.parent.mkdir()
    shutil.copy2(PYTHON, other)

    def play(python: Path, *more: str, install: bool = True) -> dict:
        return install_play(tmp_path, python, *more, install=install)

    def version_in_venv() -> str:
        proc = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sglang; print(sglang.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout.strip()

    made = play(PYTHON)
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert made["venv"] == [f"created with {PYTHON.resolve()} (Python {minor})"]
    assert made["venv_changed"] and made["install_changed"]
    assert version_in_venv() == VERSION
    assert (venv / "bin" / "python").resolve() == PYTHON.resolve()

    again = play(PYTHON)
    assert again == {"venv": ["unchanged"], "venv_changed": False, "install_changed": False}
    # The offline wheelhouse reaches pip through its environment: with it as extra_args the pip
    # module reported every --check of an air-gapped host as a change (and a restart).
    checked = play(PYTHON, "--check")
    assert checked == {"venv": ["unchanged"], "venv_changed": False, "install_changed": False}

    # Another interpreter: --check says so and touches nothing; the run makes the venv again and
    # the engine is installed into it afresh.
    (venv / "left-by-the-old-venv").write_text("")
    would = play(other, "--check", install=False)
    assert would["venv"][-1].startswith(f"would be rebuilt: made by {PYTHON.resolve()} ")
    assert would["venv_changed"] and (venv / "left-by-the-old-venv").exists()
    rebuilt = play(other)
    assert rebuilt["venv"][-1].startswith("rebuilt: ") and str(other) in rebuilt["venv"][-1]
    assert rebuilt["install_changed"] and not (venv / "left-by-the-old-venv").exists()
    assert (venv / "bin" / "python").resolve() == other.resolve() and version_in_venv() == VERSION

    # A venv of another minor version at the same path (the interpreter upgraded in place): made
    # again (the engine's reinstall into it is the case above's).
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(f"version = {minor}.", "version = 3.9."))
    (venv / "left-by-the-old-venv").write_text("")
    upgraded = play(other, install=False)
    assert upgraded["venv"] == [
        f"rebuilt: made by {other.resolve()} (Python 3.9), not {other.resolve()} (Python {minor})"
    ]
    assert not (venv / "left-by-the-old-venv").exists() and f"version = {minor}." in cfg.read_text()

    # A launcher script that runs the same binary is the same interpreter: the venv stays (the
    # resolved path of the launcher itself differed, and every run rebuilt the venv).
    shim = tmp_path / "shim" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {other} "$@"\n')
    shim.chmod(0o755)
    assert play(shim, install=False)["venv"] == ["unchanged"]


@pytest.mark.cost(30)  # seconds, measured alone
def test_a_release_change_takes_out_the_kernel_packages_the_old_release_pinned(tmp_path):
    """pip keeps what nothing requires any more: a flashinfer-cubin pinned by 0.5.15 and earlier,
    left beside 0.5.16's flashinfer, stops its import ("flashinfer-cubin version ... does not
    match"), and 0.5.11's CUDA 13 sgl_kernel files left under 0.5.9 fail its import. A release
    change takes the kernel packages out first; pip installs the new release's own. A dry run over a
    venv the run would make again says the install changes too."""
    wheelhouse = tmp_path / "wheelhouse"
    stand_in_wheel(wheelhouse, "0.6.3", name="flashinfer-cubin")
    stand_in_wheel(wheelhouse, VERSION, requires=("flashinfer-cubin==0.6.3",))
    stand_in_wheel(wheelhouse, "0.5.16")
    opt = tmp_path / "opt"
    venv = opt / "venv"

    def play(version: str, *more: str, python: Path = PYTHON) -> dict:
        return install_play(tmp_path, python, *more, sglang_server_sglang_version=version)

    def installed() -> dict[str, str]:
        proc = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import importlib.metadata as m, json; print(json.dumps({d.name: d.version for d in m.distributions()}))",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return {
            k: v for k, v in json.loads(proc.stdout).items() if k in ("sglang", "flashinfer-cubin", "flashinfer_cubin")
        }

    assert play(VERSION)["install_changed"]
    assert installed() == {"sglang": VERSION, "flashinfer-cubin": "0.6.3"}
    assert play("0.5.16")["install_changed"]
    assert installed() == {"sglang": "0.5.16"}  # the old release's kernel package is gone
    assert not play("0.5.16")["install_changed"]  # the same release again: nothing taken out

    # another interpreter: the run would make the venv again and install into it, so --check says so
    other = tmp_path / "other-python" / PYTHON.name
    other.parent.mkdir()
    shutil.copy2(PYTHON, other)
    would = play("0.5.16", "--check", python=other)
    assert would["venv_changed"] and would["install_changed"], would
