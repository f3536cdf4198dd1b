"""Contracts the emulator shares with the role, written once (issue #10): one table, one wording."""

from __future__ import annotations

import subprocess
import sys

import pytest
from emu_testlib import ROOT
from sglang_utils import emulator_faults, sglang_flags, sglang_spec

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


def test_the_filter_imports_the_rules_by_fqcn_as_ansible_does(tmp_path):
    # The filter plugin is a thin FilterModule over plugins/module_utils, imported by FQCN: from the
    # collection path alone (no sglang_utils package) it maps the role's filters to those rules.
    code = (
        "import sys\n"
        "sys.modules['sglang_utils'] = None\n"  # make `import sglang_utils...` fail
        f"sys.path.insert(0, {str(ROOT / '.ansible' / 'collections')!r})\n"
        "from ansible_collections.sglang_tune.serving.plugins.filter.sglang_flags import FilterModule\n"
        "f = FilterModule().filters()\n"
        "print(f['sglang_server_errors'].__module__)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_flags"


def test_the_release_facts_the_role_checks_are_the_emulators():
    from sglang_utils import sglang_releases

    from tuner.emulator import versions

    assert versions.SUPPORTED == sglang_releases.EMULATED_RELEASES
    assert sglang_spec.SPEC_ALGORITHMS == sglang_releases.SPEC_ALGORITHMS
    for v in versions.SUPPORTED:
        row = versions.get(v)
        assert row.builtin_spec_algorithms == sglang_releases.spec_algorithms(v)
        assert row.adaptive == sglang_releases.adaptive_config_form(v)


def _settings(**over):
    base = {"engine": "emulator", "port": 30000, "tp_size": 1, "model_path": "/m", "host": "0.0.0.0"}
    return {**base, **over}


def test_the_role_passes_the_release_it_installs_to_the_emulator():
    lines = sglang_flags.server_flags(_settings(sglang_version="0.5.23"))
    assert ["--emulator-sglang-version", "0.5.23"] in lines
    assert not any(line[0] == "--emulator-sglang-version" for line in sglang_flags.server_flags(_settings()))
    real = sglang_flags.server_flags(_settings(engine="sglang", sglang_version="0.5.23"))
    assert not any(line[0].startswith("--emulator") for line in real)
    # what the role renders is what the emulator of that release accepts
    from tuner.emulator import parse as P

    argv = [w for line in lines for w in line]
    assert P.parse_flags(argv).emulator_facts.version == "0.5.23"


def test_a_release_the_emulator_does_not_play_fails_before_the_host():
    assert sglang_flags.server_errors(_settings(sglang_version="0.5.12.post1")) == []
    errors = sglang_flags.server_errors(_settings(sglang_version="0.5.99"))
    assert errors == [
        "sglang_server_sglang_version='0.5.99' is not emulated: with sglang_server_engine=emulator use one of "
        "0.5.9, 0.5.10, 0.5.11, 0.5.12, 0.5.23"
    ]
    assert sglang_flags.server_errors(_settings(engine="sglang", sglang_version="0.5.99")) == []
    assert sglang_flags.MANAGED_FLAGS["--emulator-sglang-version"] == "sglang_server_sglang_version"


def test_a_fault_given_twice_is_refused_by_both():
    """The role refuses what the emulator's start would: a fault twice in one list (slow-startup adds up)."""
    settings = {"engine": "emulator", "port": 30000, "tp_size": 1, "model_path": "/m", "host": "0.0.0.0"}
    role = sglang_flags.server_errors({**settings, "emulator_faults": ["accept-collapse=10", "accept-collapse=2"]})
    assert "sglang_server_emulator_faults: accept-collapse given more than once: give each fault once" in role
    with pytest.raises(faults.FaultError, match="accept-collapse given more than once"):
        faults.parse_faults(["accept-collapse=10", "accept-collapse=2"])
    twice = sglang_flags.server_errors({**settings, "emulator_faults": ["slow-startup=1", "slow-startup=2"]})
    assert not [e for e in twice if "emulator_faults" in e]
