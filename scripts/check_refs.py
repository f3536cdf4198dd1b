"""Check that every pointer in the repository resolves, and that none leaves it.

What it checks, over every tracked text file:
  - no pointer to notes outside the repository: `../shared/reference/...`, `shared/reference/...`,
    `../shared/design.md`, or the old note names (the notes the docs/reference/ pages replaced);
  - every `docs/reference/<page>.md §N.M` names a section of that page (a heading numbered N.M, or
    item M of section N's numbered list); a bare `§N.M` refers to the page cited last before it in
    the same file (a page of docs/reference/ refers to itself);
  - every `docs/<page>.md "Heading"` names a heading of that page;
  - every repository path it mentions (`roles/...`, `plugins/...`, `tests/...`, `docs/...`, ...)
    exists, unless it is a pattern (`<...>`, `*`, `{...}`) or another project's path
    (`owner/repo:path`);
  - every test named by `tests/...py::test_x` or as a bare `test_x` in the docs exists.

    python scripts/check_refs.py        exit 0 clean, 1 with a line per broken pointer
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_NOTES = ("sglang-facts", "emulator-model", "seed-measurements", "ansible-conventions", "design")
NEW_NAMES_OF_OLD = ("peer-tools", "test-substrate")  # same file name now, allowed only under docs/reference/
# Files that name the old notes on purpose (this checker and its test).
SKIP = {"scripts/check_refs.py", "tests/ci/test_references.py"}
TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".j2", ".sh", ".cfg", ".toml", ".txt", ".log", ".ini", ""}
REPO_DIRS = ("docs", "roles", "plugins", "playbooks", "tuner", "tests", "scripts", "bench", "inventory", "meta")

_OUTSIDE_RE = re.compile(
    r"(?<![\w/.-])(?:(?:\.\./)+shared/(?:reference/|design\.md)|shared/reference/)"
    r"|(?<![\w/.-])(?:reference/)?(?:" + "|".join(re.escape(n) for n in OLD_NOTES) + r")\.md(?![\w-])"
    r"|(?<![\w.-])(?<!docs/reference/)(?:" + "|".join(re.escape(n) for n in NEW_NAMES_OF_OLD) + r")\.md(?![\w-])"
)
_TOKEN_RE = re.compile(
    r"(?P<page>(?<![\w/.:-])docs/[\w/-]+\.md)"
    r"|(?P<foreign>(?<![\w/])[\w.-]+\.md\b)"
    r"|§\s?(?P<sec>\d+[a-z]?(?:\.\d+[a-z]?)*)"
)
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HEADING_NUM_RE = re.compile(r"^(\d+[a-z]?(?:\.\d+[a-z]?)*)(?:/(\d+[a-z]?))?[.\s]")
_QUOTED_RE = re.compile(r'(?P<page>(?<![\w/.:-])docs/[\w/-]+\.md)[,:]?\s+(?:section\s+)?"(?P<title>[^"\n]+)"')
_PATH_RE = re.compile(r"(?<![\w/.:@-])(?P<path>(?:" + "|".join(REPO_DIRS) + r")/[\w./-]*[\w/])")
_TEST_ID_RE = re.compile(r"(?P<file>tests/[\w/]+\.py)::(?P<name>[\w:]+)")
_BARE_TEST_RE = re.compile(r"(?<![\w./-])(?P<name>test_[a-z0-9_]+)\b(?!\.py|/)")


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def tracked_text_files(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = []
    for rel in out.decode().split("\0"):
        p = root / rel
        if rel and rel not in SKIP and p.suffix in TEXT_SUFFIXES and p.is_file() and not p.is_symlink():
            files.append(rel)
    return files


def sections(markdown: str) -> tuple[set[str], set[str]]:
    """(section numbers, heading titles) of a page; `## 0. Summary` with items 1..8 gives 0.1..0.8."""
    numbers: set[str] = set()
    titles: set[str] = set()
    current: str | None = None
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        m = _HEADING_RE.match(line)
        if m:
            title = m.group(2).replace("`", "")
            titles.add(title.lower())
            n = _HEADING_NUM_RE.match(title + " ")
            current = None
            if n:
                current = n.group(1)
                numbers.add(current)
                if n.group(2):
                    numbers.add(n.group(2))
                titles.add(title[n.end() :].strip().lower())
            continue
        item = re.match(r"^(\d+)\. ", line)
        if item and current is not None and "." not in current:
            numbers.add(f"{current}.{item.group(1)}")
    return numbers, titles


_CHAIN_GAP_RE = re.compile(r"^[\s,/;()]*(?:(?:and|or)[\s,/;(]*)?$")
IGNORE_MARK = "refs: ignore"  # a line that shows example paths, not pointers


def _exists(root: Path, rel: str, path: str) -> bool:
    """A path as written: from the repository root, from the citing file's directory or one above
    it (role-relative paths such as `meta/argument_specs.yml`), or inside any role."""
    if (root / path).exists():
        return True
    here = (root / rel).parent
    while True:
        if (here / path).exists():
            return True
        if here == root:
            break
        here = here.parent
    return any(d.is_dir() and (d / path).exists() for d in (root / "roles").glob("*"))


def _foreign(line: str, start: int, end: int) -> bool:
    """A pattern, or another project's path (`owner/repo:path`, a github.com reference)."""
    left = line[:start]
    word_start = max(left.rfind(" "), left.rfind("`"), left.rfind("("), left.rfind('"')) + 1
    rest = line[start:]
    word_end = start + min(
        [i for i in (rest.find(" "), rest.find("`"), rest.find(")"), rest.find('"')) if i >= 0] or [len(rest)]
    )
    word = line[word_start:word_end]
    return any(c in word for c in "<*{$[") or "github.com/" in left


def check_file(rel: str, text: str, root: Path, tests: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    pages: dict[str, tuple[set[str], set[str]] | None] = {}

    def page(p: str) -> tuple[set[str], set[str]] | None:
        if p not in pages:
            f = root / p
            pages[p] = sections(f.read_text(encoding="utf-8")) if f.is_file() else None
        return pages[p]

    own_page = rel if rel.startswith("docs/reference/") else None
    last_page = own_page
    is_doc = rel.endswith(".md")
    in_code = False
    for no, line in enumerate(text.splitlines(), 1):
        if is_doc and line.startswith("```"):
            in_code = not in_code
        if IGNORE_MARK in line:
            continue
        for m in _OUTSIDE_RE.finditer(line):
            problems.append(Problem(rel, no, f"points outside the repository: {m.group(0)!r}"))
        chain_page: str | None = None
        prev_end = 0
        for m in _TOKEN_RE.finditer(line):
            if m.group("page") and _foreign(line, m.start(), m.end()):
                chain_page = "-"
            elif m.group("page"):
                chain_page = m.group("page")
                if page(chain_page) is None:
                    problems.append(Problem(rel, no, f"{chain_page} does not exist"))
                    chain_page = None
                elif chain_page.startswith("docs/reference/") and own_page is None:
                    last_page = chain_page
            elif m.group("foreign"):
                chain_page = "-"  # a section of some other document may follow
            elif m.group("sec"):
                follows = chain_page is not None and _CHAIN_GAP_RE.match(line[prev_end : m.start()])
                target = chain_page if follows else last_page
                chain_page = target if follows else None
                if target and target != "-" and target.startswith("docs/reference/"):
                    info = page(target)
                    if info is not None and m.group("sec") not in info[0]:
                        problems.append(Problem(rel, no, f"{target} has no section §{m.group('sec')}"))
                if follows:
                    chain_page = target
            prev_end = m.end()
        for m in _QUOTED_RE.finditer(line):
            info = page(m.group("page"))
            title = m.group("title").lower()
            if info is not None and not any(t == title or t.startswith(title) for t in info[1]):
                problems.append(Problem(rel, no, f'{m.group("page")} has no heading "{m.group("title")}"'))
        for m in _PATH_RE.finditer(line):
            path = m.group("path").rstrip("./")
            if in_code or _foreign(line, m.start(), m.end()):
                continue
            if not _exists(root, rel, path):
                problems.append(Problem(rel, no, f"{path} does not exist"))
        for m in _TEST_ID_RE.finditer(line):
            if _foreign(line, m.start(), m.end()):
                continue
            f = root / m.group("file")
            name = m.group("name").split("::")[-1].split("[")[0]
            if not f.is_file() or not re.search(rf"def {re.escape(name)}\(", f.read_text(encoding="utf-8")):
                problems.append(Problem(rel, no, f"test {m.group(0)} does not exist"))
        if is_doc:
            for m in _BARE_TEST_RE.finditer(line):
                if m.group("name") not in tests:
                    problems.append(Problem(rel, no, f"test {m.group('name')} does not exist"))
    return problems


def test_names(root: Path) -> set[str]:
    names: set[str] = set()
    for f in (root / "tests").rglob("*.py"):
        names.add(f.stem)
        names.update(re.findall(r"^\s*def (test_\w+)\(", f.read_text(encoding="utf-8"), re.M))
    return names


def check(root: Path = ROOT) -> list[Problem]:
    tests = test_names(root)
    problems: list[Problem] = []
    for rel in tracked_text_files(root):
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems += check_file(rel, text, root, tests)
    return problems


def main() -> int:
    problems = check()
    for p in problems:
        print(p)
    print(f"check_refs: {len(problems)} broken pointers", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
