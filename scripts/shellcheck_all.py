"""shellcheck over every piece of shell the project runs (the lint stage of scripts/test.sh).

Three kinds of shell, each checked as the shell that runs it:
  1. shell scripts in the repo: tracked files named *.sh or with a sh/bash shebang (scripts/*.sh,
     .ci/run, ...);
  2. inline scripts in plays, roles and test playbooks: `shell`/`raw` tasks and `command` tasks
     whose argv is `[/bin/sh, -c, SCRIPT, ...]`. Jinja in them is replaced before the check:
     `{{ ... }}` by a plain word, `{% ... %}` tags dropped (both branches are kept);
  3. templates that render shell: each one listed in tests/ci/shell_templates.yml is rendered by
     Ansible itself (ansible.builtin.template on localhost, with the role's defaults and vars and
     the listed test variables), then checked. A template named *.sh.j2 that is not listed fails.

    python scripts/shellcheck_all.py [--list]
Exit 0 clean, 1 findings (shellcheck's own report), 2 harness errors (a listed template missing).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES_LIST = ROOT / "tests" / "ci" / "shell_templates.yml"
YAML_GLOBS = (
    "playbooks/**/*.yml",
    "roles/*/tasks/*.yml",
    "roles/*/handlers/*.yml",
    "roles/*/molecule/**/*.yml",
    "tests/*/fixtures/*.yml",
    "tests/*/playbooks/*.yml",
    "tests/device/*.yml",
)
SHELL_MODULES = {"shell", "ansible.builtin.shell", "raw", "ansible.builtin.raw"}
COMMAND_MODULES = {"command", "ansible.builtin.command"}
SHELLS = {"/bin/sh": "sh", "sh": "sh", "/bin/bash": "bash", "bash": "bash", "/usr/bin/env bash": "bash"}
SHEBANG_RE = re.compile(rb"^#!\s*(?:/usr/bin/env\s+)?(?:/bin/|/usr/bin/)?(sh|bash|dash)\b")
JINJA_EXPR_RE = re.compile(r"\{\{.*?\}\}", re.S)
JINJA_TAG_RE = re.compile(r"\{%-?.*?-?%\}", re.S)
JINJA_COMMENT_RE = re.compile(r"\{#.*?#\}", re.S)


@dataclass(frozen=True)
class Script:
    """One piece of shell: where it comes from, the dialect that runs it, its text."""

    origin: str
    dialect: str
    text: str


class _AnsibleLoader(yaml.SafeLoader):
    """Reads plays with Ansible's own tags (!vault, !unsafe) as plain strings."""


_AnsibleLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node))


def strip_jinja(text: str) -> str:
    """Shell with Jinja taken out: expressions become one word, tags and comments go."""
    text = JINJA_COMMENT_RE.sub("", text)
    text = JINJA_TAG_RE.sub("", text)
    return JINJA_EXPR_RE.sub("JINJA_VALUE", text)


TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")


def _tasks(node: Any) -> Iterator[dict[str, Any]]:
    """Every task of a play file or task file, blocks and plays opened (not module arguments)."""
    if not isinstance(node, list):
        return
    for item in node:
        if not isinstance(item, dict):
            continue
        nested = [item[k] for k in TASK_LISTS if isinstance(item.get(k), list)]
        if nested:
            for tasks in nested:
                yield from _tasks(tasks)
        else:
            yield item


def inline_scripts(doc: Any, origin: str) -> list[Script]:
    """The shell of every task in a parsed play or task file."""
    found = []
    for task in _tasks(doc):
        name = task.get("name", "?")
        raw_args = task.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        for key in SHELL_MODULES & task.keys():
            value = task[key]
            text = value.get("cmd") if isinstance(value, dict) else value
            executable = (value.get("executable") if isinstance(value, dict) else None) or args.get("executable")
            if isinstance(text, str) and not _whole_expression(text):
                dialect = SHELLS.get(str(executable or "/bin/sh"), "sh")
                found.append(Script(f"{origin}: task {name!r} ({key})", dialect, strip_jinja(text)))
        for key in COMMAND_MODULES & task.keys():
            value = task[key]
            argv = value.get("argv") if isinstance(value, dict) else None
            if isinstance(argv, list) and len(argv) >= 3 and argv[0] in SHELLS and argv[1] == "-c":
                found.append(Script(f"{origin}: task {name!r} ({key} argv)", SHELLS[argv[0]], strip_jinja(argv[2])))
    return found


def _whole_expression(text: str) -> bool:
    """A task whose shell is one Jinja expression (a rendered template): checked as a template."""
    return JINJA_EXPR_RE.fullmatch(text.strip()) is not None


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def script_files(files: list[Path]) -> list[Script]:
    found = []
    for path in files:
        if not path.is_file() or path.suffix in (".py", ".yml", ".yaml", ".md", ".j2", ".json", ".txt"):
            continue
        head = path.read_bytes()[:80]
        m = SHEBANG_RE.match(head)
        if m or path.suffix == ".sh":
            dialect = "bash" if (m and m.group(1) == b"bash") else "sh"
            found.append(Script(str(path.relative_to(ROOT)), dialect, path.read_text(encoding="utf-8")))
    return found


def yaml_scripts() -> list[Script]:
    found = []
    seen: set[Path] = set()
    for pattern in YAML_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path in seen or ".molecule" in path.parts:
                continue
            seen.add(path)
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_AnsibleLoader)  # noqa: S506 (safe loader subclass)
            found += inline_scripts(doc, str(path.relative_to(ROOT)))
    return found


def listed_templates() -> list[dict[str, Any]]:
    data = yaml.safe_load(TEMPLATES_LIST.read_text(encoding="utf-8")) or []
    if not isinstance(data, list):
        raise ValueError(f"{TEMPLATES_LIST}: a list of {{template, shell, vars}}")
    return data


def unlisted_shell_templates(listed: list[dict[str, Any]]) -> list[str]:
    names = {str(e.get("template")) for e in listed}
    return [
        str(p.relative_to(ROOT))
        for p in sorted(ROOT.glob("roles/*/templates/**/*.sh.j2"))
        if str(p.relative_to(ROOT)) not in names
    ]


def render_templates(listed: list[dict[str, Any]], work: Path) -> list[Script]:
    """Render each listed template with ansible.builtin.template on localhost (one play for all)."""
    if not listed:
        return []
    tasks: list[dict[str, Any]] = []
    outputs = []
    for i, entry in enumerate(listed):
        src = ROOT / str(entry["template"])
        if not src.is_file():
            raise ValueError(f"{TEMPLATES_LIST}: {entry['template']} does not exist")
        role_dir = src.parents[1] if src.parent.name == "templates" else None
        role_vars: dict[str, Any] = {}
        if role_dir is not None:
            for part in ("defaults", "vars"):
                f = role_dir / part / "main.yml"
                if f.is_file():
                    role_vars.update(yaml.safe_load(f.read_text(encoding="utf-8")) or {})
        dest = work / f"{i}.sh"
        outputs.append((entry, dest))
        tasks.append(
            {
                "name": f"Render {entry['template']}",
                "ansible.builtin.template": {"src": str(src), "dest": str(dest), "mode": "0600"},
                "vars": {**role_vars, **(entry.get("vars") or {}), "role_path": str(role_dir or src.parent)},
            }
        )
    play: list[dict[str, Any]] = [
        {
            "name": "Render shell templates",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        }
    ]
    play[0]["tasks"] = tasks
    playbook = work / "render.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run(
        [str(bin_dir / "ansible-playbook"), "-i", "localhost,", str(playbook)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ValueError(f"rendering the shell templates failed:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}")
    return [
        Script(f"{e['template']} (rendered)", str(e.get("shell", "sh")), dest.read_text(encoding="utf-8"))
        for e, dest in outputs
    ]


def shellcheck(scripts: list[Script], work: Path) -> int:
    """Run shellcheck on every script; returns how many had findings."""
    bad = 0
    for i, s in enumerate(scripts):
        f = work / f"script-{i}.{s.dialect}"
        f.write_text(s.text)
        proc = subprocess.run(
            ["shellcheck", "--shell", s.dialect, "--format", "gcc", "--external-sources", str(f)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            bad += 1
            print(f"== {s.origin} ({s.dialect})")
            print(proc.stdout.replace(str(f), s.origin).rstrip())
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--list", action="store_true", help="list what would be checked, check nothing")
    args = ap.parse_args(argv)
    if shutil.which("shellcheck") is None:
        print("shellcheck_all: shellcheck is not installed (make setup)", file=sys.stderr)
        return 2
    try:
        listed = listed_templates()
        unlisted = unlisted_shell_templates(listed)
        if unlisted:
            raise ValueError(f"templates that render shell and are not in {TEMPLATES_LIST.name}: {unlisted}")
        with tempfile.TemporaryDirectory(prefix="sgt-shellcheck-") as tmp:
            work = Path(tmp)
            scripts = script_files(tracked_files()) + yaml_scripts() + render_templates(listed, work)
            if args.list:
                for s in scripts:
                    print(f"{s.dialect:4} {s.origin}")
                return 0
            bad = shellcheck(scripts, work)
    except (OSError, ValueError, yaml.YAMLError, subprocess.CalledProcessError) as exc:
        print(f"shellcheck_all: {exc}", file=sys.stderr)
        return 2
    print(f"shellcheck_all: {len(scripts)} scripts, {bad} with findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
