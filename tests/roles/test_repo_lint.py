"""ansible-lint (profile production, role-argument-spec enabled: .ansible-lint) and yamllint
(.yamllint) are clean over the repository."""

from __future__ import annotations

from roles_testlib import ROOT, VENV_BIN, run


def test_ansible_lint_production_profile():
    proc = run([str(VENV_BIN / "ansible-lint"), "--nocolor"], timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Profile 'production' was required, and it passed" in out, out[-3000:]


def test_role_argument_spec_rule_is_enabled():
    assert "role-argument-spec" in (ROOT / ".ansible-lint").read_text()


def test_yamllint():
    proc = run([str(VENV_BIN / "yamllint"), "-f", "parsable", "."], timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
