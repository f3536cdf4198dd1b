"""Call the collection's own content by its fully qualified name everywhere (sglang_tune.serving).

The roles, plays, molecule scenarios and test playbooks once used short names that only resolved
through `library`/`filter_plugins`/`roles_path` in ansible.cfg. In a collection the names are
`sglang_tune.serving.<name>`, and they resolve the same from the repo (`make setup` links it into
the collections path) and from an installed collection. This rewrites:
  - modules and action plugins (`plugins/<modules or action>/`): keys of task mappings only, found
    through the YAML node tree, so a data key with the same name (set_stats' `sglang_ready`) stays;
  - roles: `import_role`/`include_role` names and `roles:` entries;
  - filters (plugins/filter): `| name(...)` and `map('name')`-style uses in any template text.

    python scripts/fqcn_convert.py [--check]

--check changes nothing and exits 1 when something would change (tests/ci/test_fqcn.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
NS = "sglang_tune.serving"
GLOBS = (
    "deploy.yml",
    "playbooks/**/*.yml",
    "roles/*/tasks/*.yml",
    "roles/*/handlers/*.yml",
    "roles/*/vars/*.yml",
    "roles/*/defaults/*.yml",
    "roles/*/templates/**/*.j2",
    "roles/*/molecule/**/*.yml",
    "inventory/*.yml",
    "tests/**/*.yml",
    "bench/**/*.yml",
)
TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")
ROLE_ACTIONS = {"import_role", "include_role", "ansible.builtin.import_role", "ansible.builtin.include_role"}


def collection_names(root: Path) -> tuple[set[str], set[str], set[str]]:
    """(modules and actions, filters, roles) of the collection."""
    actions = {p.stem for d in ("modules", "action") for p in (root / "plugins" / d).glob("*.py")}
    actions.discard("__init__")
    filters: set[str] = set()
    for f in (root / "plugins" / "filter").glob("*.py"):
        m = re.search(r"def filters\(self\)[^{]*return\s*(\{.*?\n\s*\})", f.read_text(encoding="utf-8"), re.S)
        if m:
            filters |= set(re.findall(r'"([a-z_0-9]+)"\s*:', m.group(1)))
    roles = {p.name for p in (root / "roles").iterdir() if p.is_dir()}
    return actions, filters, roles


def _node_edits(text: str, actions: set[str], roles: set[str]) -> list[tuple[int, int, str]]:
    """(start, end, name) of every short module/action key and role name in a play or task file."""
    found: list[yaml.ScalarNode] = []
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return []

    def task_list(node: yaml.Node) -> None:
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                task(item)

    def task(node: yaml.Node) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        keys = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
        nested = [keys[k] for k in TASK_LISTS if k in keys]
        roles_node = keys.get("roles")
        if isinstance(roles_node, yaml.SequenceNode):
            for r in roles_node.value:
                if isinstance(r, yaml.ScalarNode) and r.value in roles:
                    found.append(r)
                elif isinstance(r, yaml.MappingNode):
                    found.extend(
                        v
                        for k, v in r.value
                        if k.value in ("role", "name") and isinstance(v, yaml.ScalarNode) and v.value in roles
                    )
        if nested:
            for n in nested:
                task_list(n)
            return
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value in actions:
                found.append(k)
            if isinstance(k, yaml.ScalarNode) and k.value in ROLE_ACTIONS and isinstance(v, yaml.MappingNode):
                found.extend(
                    vv
                    for kk, vv in v.value
                    if kk.value == "name" and isinstance(vv, yaml.ScalarNode) and vv.value in roles
                )

    for doc in docs:
        task_list(doc)
    return [(n.start_mark.index, n.end_mark.index, n.value) for n in found]


def convert(text: str, yaml_file: bool, names: tuple[set[str], set[str], set[str]]) -> str:
    actions, filters, roles = names
    out = text
    if yaml_file:
        for start, end, name in sorted(_node_edits(out, actions, roles), reverse=True):
            if out[start:end] == name:
                out = f"{out[:start]}{NS}.{name}{out[end:]}"
    for name in sorted(filters, key=len, reverse=True):
        out = re.sub(rf"(\|\s*){name}\b(?![.\w])", rf"\g<1>{NS}.{name}", out)
        out = re.sub(rf"((?:map|select|reject)\(\s*['\"]){name}(['\"])", rf"\g<1>{NS}.{name}\2", out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="report files that would change; change nothing")
    args = ap.parse_args(argv)
    names = collection_names(ROOT)
    changed = []
    seen: set[Path] = set()
    for pattern in GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path in seen or ".molecule" in path.parts or not path.is_file():
                continue
            seen.add(path)
            text = path.read_text(encoding="utf-8")
            new = convert(text, path.suffix == ".yml", names)
            if new != text:
                changed.append(path)
                if not args.check:
                    path.write_text(new, encoding="utf-8")
    for path in changed:
        print(f"{'would rewrite' if args.check else 'rewrote'} {path.relative_to(ROOT)}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
