"""The lint stage's configuration: ansible-lint holds the repository to the production profile with
role-argument-spec enabled (.ansible-lint) and yamllint runs over every YAML file (.yamllint).

The linters themselves run once, in scripts/test.sh's lint stage (`ansible-lint --offline -q`,
`yamllint -s .`), which fails the run on any finding; running them again here only doubled
their time. These tests pin what that stage enforces, so weakening it shows up as a failure."""

from __future__ import annotations

import yaml
from roles_testlib import ROOT


def test_ansible_lint_requires_the_production_profile_and_the_role_argument_spec_rule():
    cfg = yaml.safe_load((ROOT / ".ansible-lint").read_text())
    assert cfg["profile"] == "production"
    assert "role-argument-spec" in cfg["enable_list"]
    # what it skips is one rule that needs a public forge address, nothing else
    assert cfg.get("skip_list", []) == ["galaxy[no-repository]"]
    assert not cfg.get("warn_list")


def test_the_lint_stage_runs_both_linters_over_the_repository():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "timed yamllint yamllint -s ." in script
    assert "timed ansible-lint ansible-lint --offline -q" in script


def test_yamllint_covers_the_roles_playbooks_and_inventories():
    cfg = yaml.safe_load((ROOT / ".yamllint").read_text())
    ignored = cfg.get("ignore", "")
    for path in ("roles", "playbooks", "inventory", "molecule", "meta"):
        assert path not in ignored.split(), path
