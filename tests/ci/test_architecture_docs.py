"""docs/architecture.md, the page of the project's contracts and its tree, against the code.

- It names every option and return key of the `sglang_ready` module, as the module's own
  DOCUMENTATION and RETURN declare them: the page had kept the option list of the first design (no
  `worker`, no `use_proxy`) and left six return keys the tuner and the role read (`reason`,
  `failure_kind`, `joined`, ...) out.
- It names every file of the parts it lists file by file (the tuner's stage packages and the
  emulator, plugins, scripts, tests/helpers, inventories, plays, the roles' host-side files):
  `playbooks/emulator_host/absent.yml` was left out."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "plugins" / "modules" / "sglang_ready.py"
PAGE = ROOT / "docs" / "architecture.md"


def declared(source: str, block: str) -> set[str]:
    """The top-level keys of the module's DOCUMENTATION options or its RETURN block."""
    m = re.search(rf'^{block} = r?"""(.*?)"""', source, re.S | re.M)
    assert m, f"no {block} in the module"
    data = yaml.safe_load(m.group(1))
    return set(data["options"] if block == "DOCUMENTATION" else data)


def not_named(page: str, names: set[str]) -> list[str]:
    return sorted(n for n in names if f"`{n}`" not in page)


def test_the_contracts_page_names_every_option_and_return_key_of_sglang_ready():
    source = MODULE.read_text(encoding="utf-8")
    page = PAGE.read_text(encoding="utf-8")
    options, returns = declared(source, "DOCUMENTATION"), declared(source, "RETURN")
    assert {"url", "unit", "api_key"} <= options and {"ready_seconds", "capacity"} <= returns
    assert not not_named(page, options), f"options docs/architecture.md leaves out: {not_named(page, options)}"
    assert not not_named(page, returns), f"return keys docs/architecture.md leaves out: {not_named(page, returns)}"


def test_a_key_left_out_is_found():
    source = 'DOCUMENTATION = r"""\noptions:\n  url: {type: str}\n  worker: {type: bool}\n"""\n'
    assert not_named("`url` only", declared(source, "DOCUMENTATION")) == ["worker"]


# Where the page lists every file; data (profiles, datasets) and package markers are not listed.
LISTED = ("tuner", "plugins", "scripts", "tests/helpers", "inventory", "playbooks", "library", "roles/*/files")
NOT_LISTED = ("tuner/emulator/profiles/", "tuner/spec/datasets/")


def unnamed_files(root: Path, page: str) -> list[str]:
    tracked = subprocess.run(
        ["git", "ls-files", *LISTED], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    return sorted(
        f
        for f in tracked
        if Path(f).suffix in {".py", ".yml", ".yaml", ".sh"}
        and Path(f).name != "__init__.py"
        and not f.startswith(NOT_LISTED)
        and not re.search(rf"(?<![\w-]){re.escape(Path(f).name)}", page)
    )


def test_the_tree_names_every_file_of_the_parts_it_lists():
    missing = unnamed_files(ROOT, PAGE.read_text(encoding="utf-8"))
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_a_file_left_out_of_the_tree_is_found(tmp_path):
    for rel in ("tuner/run/sweep.py", "tuner/run/__init__.py", "tuner/run/levels.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    # `levels.py` inside another name (`my_levels.py`) does not count
    assert unnamed_files(tmp_path, "run/: sweep.py, my_levels.py") == ["tuner/run/levels.py"]
