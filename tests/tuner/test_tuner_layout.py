"""The tuner's layout (docs/architecture.md "The tuner's stages"): stage packages whose imports only
go down the stage order, no import cycle between modules, and no module a newcomer cannot read in
one sitting. The emulator (tuner/emulator/, `python -m tuner.emulator`) is a program of its own
beside the stages and is held to the line cap only.
"""

from __future__ import annotations

import ast
from pathlib import Path

TUNER = Path(__file__).resolve().parents[2] / "tuner"
# Lowest first: a stage imports only from stages at or before its own. `run` is last because it is
# the conductor that calls every other stage (the data's path is spec -> run -> measure -> data ->
# decide -> present; the imports go the other way round from run's point of view).
# `verify` (the correctness gate, issue 20) comes after run: it uses run's client, and run's sweep
# calls it through a protocol that cli.py fills.
STAGES = ("measure", "spec", "data", "decide", "present", "run", "verify")
MAX_LINES = 650


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(TUNER.rglob("*.py")):
        rel = p.relative_to(TUNER.parent).with_suffix("")
        if "emulator" in rel.parts:
            continue
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = p
    return out


def imports_of(name: str, path: Path) -> set[str]:
    """Every tuner module `name` imports, at module level or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "tuner"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "tuner":
                continue
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}  # `from pkg import module`
    known = modules()
    return {t for t in found if t in known and t != name}


def stage(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_every_module_is_in_a_stage_or_the_entry_points():
    loose = [n for n in modules() if stage(n) is None and n not in ("tuner", "tuner.cli", "tuner.__main__")]
    assert loose == []


def test_imports_only_go_down_the_stage_order():
    wrong = []
    for name, path in modules().items():
        own = stage(name)
        if own is None:
            continue  # tuner/cli.py and __main__.py sit on top and may call any stage
        for target in imports_of(name, path):
            other = stage(target)
            if other is None or STAGES.index(other) > STAGES.index(own):
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_no_import_cycle():
    graph = {name: imports_of(name, path) for name, path in modules().items()}
    graph = {n: {t for t in ts if not n.startswith(t + ".")} for n, ts in graph.items()}  # a module's own package
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(n: str, trail: list[str]) -> None:
        state[n] = 1
        for t in sorted(graph.get(n, ())):
            if state.get(t) == 1:
                cycles.append(trail[trail.index(t) :] + [t] if t in trail else [n, t])
            elif t not in state:
                visit(t, trail + [t])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert cycles == []


def test_no_module_over_the_line_cap():
    """Every module of tuner/, the emulator's included (a program of its own, but read as often)."""
    big = {str(p): n for p in TUNER.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_the_rules_see_imports():
    """The checks above can fail: the parser finds a relative import inside a function."""
    found = imports_of("tuner.cli", TUNER / "cli.py")
    assert "tuner.run.sweep" in found and "tuner.present.outputs" in found


def _raw_imports(path: Path, package: str) -> set[str]:
    """Every `tuner...` module path `path` names in an import (relative ones resolved from `package`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "tuner"}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            if target.split(".")[0] == "tuner":
                found |= {target} | {f"{target}.{a.name}" for a in node.names}
    return found


def test_the_emulator_and_the_stages_never_import_each_other():
    """The tuner reads only what a real SGLang server exposes (HTTP, /metrics, /server_info, the
    gate's report): no stage, nor the CLI, imports the emulator (its profile, its state); and the
    emulator, a program of its own, imports no stage. `modules()` leaves the emulator out, so the
    stage-order test above could not see either direction."""
    crossing = []
    for p in sorted(TUNER.rglob("*.py")):
        rel = p.relative_to(TUNER.parent).with_suffix("")
        package = ".".join(rel.parts[:-1] if rel.name != "__init__" else rel.parts)
        inside = "emulator" in rel.parts
        for target in _raw_imports(p, package):
            parts = target.split(".")
            if len(parts) < 2 or parts[1] in ("__version__",):
                continue
            if inside != (parts[1] == "emulator") and not (inside and parts[1] == "__init__"):
                crossing.append(f"{rel}: {target}")
    assert crossing == []
    # the walk sees such an import: the emulator's entry point imports its own package only
    assert any(
        t.startswith("tuner.emulator") for t in _raw_imports(TUNER / "emulator" / "__main__.py", "tuner.emulator")
    )
