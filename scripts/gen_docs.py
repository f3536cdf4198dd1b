#!/usr/bin/env python3
"""Rewrite the generated blocks of the docs from the code that owns their facts.

Today one block: the metric definitions in docs/tuner.md ("How the numbers are measured"), from
tuner/measure/definitions.py, which report.md also renders. `--check` exits 1 when a block is out
of date (tests/tuner/test_metric_definitions.py runs it), so the definitions cannot drift apart.

Usage: .venv/bin/python scripts/gen_docs.py [--check]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.measure import definitions  # noqa: E402

BLOCKS = {
    ROOT / "docs" / "tuner.md": {"metric-definitions": definitions.markdown},
}


def render(text: str, name: str, body: str) -> str:
    """`text` with the block `name` (between its begin and end markers) holding `body`."""
    pat = re.compile(rf"(<!-- {name}:begin[^\n]*-->\n)(.*?)(<!-- {name}:end -->)", re.S)
    if not pat.search(text):
        raise SystemExit(f"no <!-- {name}:begin --> ... <!-- {name}:end --> block")
    return pat.sub(lambda m: m.group(1) + "\n" + body + "\n" + m.group(3), text, count=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is out of date")
    args = ap.parse_args()
    stale = []
    for path, blocks in BLOCKS.items():
        old = path.read_text(encoding="utf-8")
        new = old
        for name, make in blocks.items():
            new = render(new, name, make())
        if new != old:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if stale and args.check:
        print("out of date (run scripts/gen_docs.py): " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    for p in stale:
        print(f"rewrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
