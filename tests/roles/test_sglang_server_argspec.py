"""meta/argument_specs.yml documents every variable of the sglang_server role, as prometheus-community
diffs defaults against argument specs in CI (docs/reference/ansible.md §1.1)."""

from __future__ import annotations

import re

import yaml
from roles_testlib import ROOT

ROLE = ROOT / "roles" / "sglang_server"
# Documented, but not in defaults/main.yml: play-level variables and optional per-host ones.
NO_DEFAULT = {
    "spec_steps",
    "spec_topk",
    "spec_draft_tokens",
    "spec_algorithm",
    "spec_schedule",
    "sglang_server_client_host",
    "sglang_server_dist_init_host",
}


def load(path):
    return yaml.safe_load(path.read_text())


def specs():
    return load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]


def test_every_default_is_documented_and_every_option_has_a_default():
    defaults = load(ROLE / "defaults" / "main.yml")
    options = specs()["main"]["options"]
    assert sorted(set(defaults) - set(options)) == [], "defaults without argument spec"
    assert sorted(set(options) - set(defaults) - NO_DEFAULT) == [], "argument spec options without a default"
    assert NO_DEFAULT <= set(options)


def test_documented_defaults_equal_the_real_ones():
    defaults = load(ROLE / "defaults" / "main.yml")
    options = specs()["main"]["options"]
    for name, value in defaults.items():
        doc = options[name]
        assert "default" in doc, name
        assert doc["default"] == value, name
        assert doc.get("description"), name


def test_entry_points_share_the_options():
    s = specs()
    assert set(s) == {"main", "preflight"}
    assert s["preflight"]["options"] == s["main"]["options"]


def test_no_undocumented_variable_is_read():
    """Every public sglang_server_* name the role's files mention is documented."""
    options = set(specs()["main"]["options"])
    used = set()
    for path in (
        list(ROLE.glob("tasks/*.yml"))
        + list(ROLE.glob("templates/*.j2"))
        + [ROLE / "vars" / "main.yml", ROLE / "handlers" / "main.yml"]
    ):
        used |= set(re.findall(r"(?<![_\w])sglang_server_[a-z0-9_]+", path.read_text()))
    # Module, filter and tag names are not variables.
    used -= {
        "sglang_server_apply",
        "sglang_server_errors",
        "sglang_server_host_errors",
        "sglang_server_paths",
        "sglang_server_install",
        "sglang_server_configure",
        "sglang_server_run",
    }
    assert sorted(used - options) == []


def test_every_emulator_fault_is_documented():
    """The fault table is written once (plugins/module_utils/emulator_faults.py); the variable that
    takes them names each one."""
    from sglang_utils.emulator_faults import FAULT_SPECS

    desc = " ".join(specs()["main"]["options"]["sglang_server_emulator_faults"]["description"])
    missing = [name for name in FAULT_SPECS if f"C({name}" not in desc]
    assert missing == [], f"faults not named in sglang_server_emulator_faults' description: {missing}"
