"""Every pointer in the repository resolves, and none leaves it (scripts/check_refs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import check_refs  # noqa: E402


def test_every_pointer_in_the_repository_resolves() -> None:
    problems = check_refs.check(ROOT)
    assert not problems, "\n".join(str(p) for p in problems[:60])


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    return tmp_path


PAGE = "# Page\n\n## 0. Summary\n1. one\n2. two\n\n## 1. Logs\n### 1.1 Format\n### 1b/1c. Other\n## Contracts\n"


def test_checker_finds_each_kind_of_broken_pointer(tmp_path) -> None:
    root = _repo(
        tmp_path,
        {
            "docs/reference/page.md": PAGE,
            "docs/other.md": "# Other\n## Emulator hosts\n",
            "tests/x/test_real.py": "def test_exists():\n    pass\n",
            "plugins/a.py": (
                "# docs/reference/page.md §1.1 and §1b, §0.2 fine; then §1.9 is not there\n"
                "# docs/reference/page.md §7 is not there either\n"
                '# docs/other.md "Emulator hosts" fine, docs/other.md "No such" not\n'
                "# roles/none/tasks/main.yml is missing; roles/<role>/x.yml is a pattern\n"
                "# tests/x/test_real.py::test_exists fine, tests/x/test_real.py::test_gone not\n"
                "# see ../shared/reference/sglang-facts.md and seed-measurements.md\n"
                "# github.com/someone/else, docs/foreign.md is another project's\n"
            ),
            "docs/readme.md": "Run test_exists and test_missing_one.\n",
        },
    )
    found = [str(p) for p in check_refs.check(root)]
    assert "plugins/a.py:1: docs/reference/page.md has no section §1.9" in found
    assert "plugins/a.py:2: docs/reference/page.md has no section §7" in found
    assert 'plugins/a.py:3: docs/other.md has no heading "No such"' in found
    assert "plugins/a.py:4: roles/none/tasks/main.yml does not exist" in found
    assert "plugins/a.py:5: test tests/x/test_real.py::test_gone does not exist" in found
    assert sum(1 for p in found if p.startswith("plugins/a.py:6: points outside")) == 2
    assert "docs/readme.md:1: test test_missing_one does not exist" in found
    assert len(found) == 8, found
