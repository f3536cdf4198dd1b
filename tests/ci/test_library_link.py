"""library/ (docs/architecture.md "Tree"): the gate module by its short name from the checkout,
through ansible.cfg's `library` path, as a link to the collection's one file, never a copy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"


def test_library_holds_links_to_the_collections_modules_only() -> None:
    entries = sorted((ROOT / "library").iterdir())
    assert [p.name for p in entries] == ["sglang_ready.py"]
    for p in entries:
        assert p.is_symlink(), f"{p} must be a link, not a copy"
        assert p.resolve() == (ROOT / "plugins" / "modules" / p.name).resolve()


def test_ansible_finds_the_module_by_its_short_name_from_the_checkout() -> None:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    r = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "module", "sglang_ready", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert '"sglang_ready"' in r.stdout and "library/sglang_ready.py" in r.stdout
