"""Each role's README names every variable the role takes, and names none it does not have.

meta/argument_specs.yml holds each variable's type, default and meaning, and tests keep it equal to
defaults/main.yml (tests/roles/test_sglang_server_argspec.py); this keeps the README, which a user
reads first, from leaving variables out (35 of sglang_server's and 9 of cuda_env's were named only
in the spec) or keeping one that was renamed away."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("sglang_server", "cuda_env")


def role_variables(role_dir: Path) -> set[str]:
    """What a user may set: defaults/main.yml and every entry point's options in argument_specs."""
    names = set(yaml.safe_load((role_dir / "defaults" / "main.yml").read_text()) or {})
    for entry in yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())["argument_specs"].values():
        names |= set(entry.get("options") or {})
    return names


def named(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def missing_from_readme(role_dir: Path) -> list[str]:
    readme = (role_dir / "README.md").read_text(encoding="utf-8")
    return sorted(n for n in role_variables(role_dir) if not named(readme, n))


def unknown_in_readme(root: Path, role: str) -> list[str]:
    """`<role>_...` words of the README that nothing in the project defines or uses: a tag, a fact
    the role sets, an action or a file is fine so long as the code has it."""
    readme = (root / "roles" / role / "README.md").read_text(encoding="utf-8")
    code = "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for d in ("roles", "playbooks", "plugins", "tests")
        for p in (root / d).rglob("*")
        if p.is_file() and p.suffix in {".yml", ".yaml", ".j2", ".py"}
    )
    words = set(re.findall(rf"(?<![\w.]){role}_[a-z0-9_]*[a-z0-9]", readme))
    return sorted(w for w in words if not named(code, w))


@pytest.mark.parametrize("role", ROLES)
def test_the_readme_names_every_variable_of_its_role(role):
    assert role_variables(ROOT / "roles" / role)
    missing = missing_from_readme(ROOT / "roles" / role)
    assert not missing, f"roles/{role}/README.md does not name: {missing}"


@pytest.mark.parametrize("role", ROLES)
def test_the_readme_names_no_variable_the_role_lacks(role):
    unknown = unknown_in_readme(ROOT, role)
    assert not unknown, f"roles/{role}/README.md names what nothing in the project has: {unknown}"


def _role(tmp_path: Path, readme: str) -> Path:
    d = tmp_path / "roles" / "r"
    (d / "defaults").mkdir(parents=True)
    (d / "meta").mkdir()
    (d / "tasks").mkdir()
    (d / "defaults" / "main.yml").write_text("r_port: 1\nr_port_max: 2\n")
    (d / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      r_port: {type: int}\n      r_port_max: {type: int}\n"
        "      r_host: {type: str}\n"
    )
    (d / "tasks" / "main.yml").write_text("- ansible.builtin.set_fact: {r_fact: 1}\n  tags: [r_run]\n")
    (d / "README.md").write_text(readme)
    return d


def test_the_checks_find_a_variable_left_out_and_one_renamed_away(tmp_path):
    d = _role(tmp_path, "`r_port_max` and `r_host`; tag `r_run` sets `r_fact`; `r_old_name` is gone.\n")
    # `r_port_max` does not name `r_port`: a name counts only whole
    assert missing_from_readme(d) == ["r_port"]
    assert unknown_in_readme(tmp_path, "r") == ["r_old_name"]
