"""Contracts the emulator shares with the role, written once (issue #10): one table, one wording."""

from __future__ import annotations

import subprocess
import sys

import pytest
from emu_testlib import ROOT
from sglang_filters import sglang_flags
from sglang_utils import emulator_faults

from tuner.emulator import faults


def test_the_role_and_the_emulator_read_one_fault_table():
    assert tuple(sglang_flags.EMULATOR_FAULTS) == tuple(emulator_faults.FAULT_SPECS)
    assert faults.FAULT_NAMES == emulator_faults.FAULT_USAGE


@pytest.mark.parametrize(
    "entry",
    [
        "bogus",
        "kv-oom=1",
        "crash-after-ready",
        "http-5xx=1.5",
        "cut-stream=x",
        "hang-before-ready=soon",
        "slow-startup=-2",
    ],
)
def test_a_bad_fault_is_refused_with_the_same_words_by_both(entry):
    role = sglang_flags.server_errors(
        {
            "engine": "emulator",
            "port": 30000,
            "tp_size": 1,
            "model_path": "/m",
            "host": "0.0.0.0",
            "emulator_faults": [entry],
        }
    )
    with pytest.raises(faults.FaultError) as ei:
        faults.parse_fault(entry)
    assert f"sglang_server_emulator_faults: {ei.value}" in role


def test_the_filter_finds_the_table_beside_it_without_the_installed_package(tmp_path):
    # An installed collection has no sglang_utils package: the filter loads module_utils by path.
    code = (
        "import importlib.util, sys\n"
        "sys.modules['sglang_utils'] = None\n"  # make `import sglang_utils...` fail
        f"spec = importlib.util.spec_from_file_location('f', {str(ROOT / 'plugins/filter/sglang_flags.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(','.join(m.EMULATOR_FAULTS))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ",".join(emulator_faults.FAULT_SPECS)
