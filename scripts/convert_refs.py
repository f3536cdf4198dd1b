"""Rewrite pointers to the team's old notes into pointers to the project's own docs.

The project once cited notes kept outside the repository (`../shared/reference/<note>.md`,
`reference/<note>.md`, the bare note names, "facts §x.y" for the SGLang note, `design.md`). Their
content lives in docs/reference/ now, under the same section numbers, so each pointer maps one to
one:

    sglang-facts.md        -> docs/reference/sglang.md
    emulator-model.md      -> docs/reference/performance-model.md
    seed-measurements.md   -> docs/reference/seed-campaign.md
    peer-tools.md          -> docs/reference/peer-tools.md
    ansible-conventions.md -> docs/reference/ansible.md
    test-substrate.md      -> docs/reference/test-substrate.md
    design.md              -> docs/architecture.md (its contract sections keep their names)

    python scripts/convert_refs.py [--check] [PATH...]     (default: every tracked text file)

--check changes nothing and exits 1 when a file would change. scripts/check_refs.py then checks
that every pointer resolves (tests/ci/test_references.py).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NOTES = {
    "sglang-facts": "docs/reference/sglang.md",
    "emulator-model": "docs/reference/performance-model.md",
    "seed-measurements": "docs/reference/seed-campaign.md",
    "peer-tools": "docs/reference/peer-tools.md",
    "ansible-conventions": "docs/reference/ansible.md",
    "test-substrate": "docs/reference/test-substrate.md",
    "design": "docs/architecture.md",
}
# Files that define the mapping or hold the old names on purpose (this script, the checker, their test).
SKIP = {"scripts/convert_refs.py", "scripts/check_refs.py", "tests/ci/test_references.py"}
TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".j2", ".sh", ".cfg", ".toml", ".txt", ".log", ".ini", ""}

# A note named with any old prefix: ../shared/reference/x.md, shared/reference/x.md, reference/x.md,
# ../shared/x.md, or bare x.md; never a path that is already docs/reference/x.md or another file
# that merely ends in the same name.
_NOTE_RE = re.compile(
    r"(?<![\w/.-])(?:(?:\.\./)*shared/(?:reference/)?|reference/)?"
    r"(?P<note>" + "|".join(re.escape(n) for n in NOTES) + r")\.md(?![\w-])"
)
_FACTS_RE = re.compile(r"\b[Ff]acts (§)")
# Whole phrases that only made sense for notes outside the repository (applied first).
PHRASES = (
    (
        'Facts cited as "facts §x.y" are in ``reference/sglang-facts.md`` of the project\'s shared notes.',
        "Facts are cited as ``docs/reference/sglang.md §x.y``.",
    ),
    ("`../shared/design.md` (copied in spirit below) names", 'The section "Contracts" below names'),
    (" of the project's shared notes", ""),
    ("(design.md / the brief)", '(docs/architecture.md "The emulator")'),
)


def convert(text: str) -> str:
    """The text with every old pointer replaced by its docs/ path."""

    def note(m: re.Match[str]) -> str:
        return NOTES[m.group("note")]

    out = text
    for old, new in PHRASES:
        out = out.replace(old, new)
    out = _NOTE_RE.sub(note, out)
    return _FACTS_RE.sub(lambda m: f"{NOTES['sglang-facts']} {m.group(1)}", out)


def tracked_text_files(root: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = []
    for rel in out.decode().split("\0"):
        if not rel or rel in SKIP or rel.startswith("docs/reference/"):
            continue
        path = root / rel
        if path.suffix in TEXT_SUFFIXES and path.is_file() and not path.is_symlink():
            files.append(path)
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="report files that would change; change nothing")
    ap.add_argument("paths", nargs="*", type=Path)
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or tracked_text_files(ROOT)
    changed = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = convert(text)
        if new != text:
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(f"{'would rewrite' if args.check else 'rewrote'} {path.relative_to(ROOT)}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
