"""scripts/setup.sh's venv step: `make demo` installs the tuner's packages only, `make setup` the
test tools as well, and neither reinstalls what a venv already has.

The step runs for real on a copy of the files it reads (the script, pyproject.toml, the
constraints), with a stand-in `.venv/bin/python` that records the pip commands it is given instead
of installing: what is asserted is which installs the stamps lead to, not pip itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../../pip-calls.log"
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts/setup.sh", tmp_path / "scripts/setup.sh")
    (tmp_path / "requirements").mkdir()
    shutil.copy(ROOT / "requirements/constraints.txt", tmp_path / "requirements/constraints.txt")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    py = tmp_path / ".venv/bin/python"
    py.parent.mkdir(parents=True)
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    return tmp_path


def venv_step(tree: Path, extras: str | None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_TUNE_SETUP_EXTRAS"}
    if extras is not None:
        env["SGLANG_TUNE_SETUP_EXTRAS"] = extras
    log = tree / "pip-calls.log"
    log.unlink(missing_ok=True)
    proc = subprocess.run(
        ["bash", str(tree / "scripts/setup.sh"), "venv"], env=env, capture_output=True, text=True, timeout=60
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, [c for c in calls if " -e " in f" {c} "]


def stamps(tree: Path) -> list[str]:
    return sorted(p.name.rsplit(".", 1)[-1] for p in (tree / ".cache/setup").glob("venv.*"))


def test_the_demo_installs_the_tuner_then_setup_adds_the_test_tools_once(tree: Path) -> None:
    proc, installs = venv_step(tree, "tuner")
    assert proc.returncode == 0, proc.stderr
    assert installs == ["-m pip install -q -c requirements/constraints.txt -e .[tuner]"]
    assert "no test tools" in proc.stdout
    assert stamps(tree) == ["tuner"]

    proc, installs = venv_step(tree, "tuner")  # the demo again: nothing to do
    assert (proc.returncode, installs) == (0, [])

    proc, installs = venv_step(tree, None)  # make setup: the test tools too
    assert proc.returncode == 0, proc.stderr
    assert installs == ["-m pip install -q -c requirements/constraints.txt -e .[tuner,dev]"]
    assert stamps(tree) == ["tuner,dev"]

    for extras in ("tuner", None):  # a venv with the test tools has what either asks for
        proc, installs = venv_step(tree, extras)
        assert (proc.returncode, installs) == (0, [])


def test_a_changed_pin_installs_again(tree: Path) -> None:
    assert venv_step(tree, None)[1]
    with open(tree / "requirements/constraints.txt", "a") as f:
        f.write("# a new pin\n")
    proc, installs = venv_step(tree, "tuner")
    assert proc.returncode == 0, proc.stderr
    assert installs == ["-m pip install -q -c requirements/constraints.txt -e .[tuner]"]
    assert stamps(tree) == ["tuner"]


def test_an_unknown_extras_value_is_refused_before_anything_is_installed(tree: Path) -> None:
    proc, installs = venv_step(tree, "tuner,gpu")
    assert proc.returncode == 2
    assert "SGLANG_TUNE_SETUP_EXTRAS must be 'tuner' or 'tuner,dev', not 'tuner,gpu'" in proc.stderr
    assert installs == [] and not list((tree / ".cache/setup").glob("venv.*"))


def _canonical(line: str) -> str:
    name, _, version = line.partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def test_every_installed_package_is_pinned() -> None:
    """The constraints pin every Python package the venv holds, pip, setuptools and wheel among them
    (mypy's own dependencies, types-PyYAML and the build tools were taken at their newest)."""
    out = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-m", "pip", "freeze", "--all", "--exclude-editable"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    installed = {_canonical(x) for x in out.stdout.splitlines() if x and not x.startswith("#")}
    pins = {
        _canonical(x)
        for x in (ROOT / "requirements/constraints.txt").read_text().splitlines()
        if x and not x.startswith("#")
    }
    assert not installed - pins, sorted(installed - pins)
