"""Build the wheelhouse that emulator hosts install from (they have no network).

The wheelhouse holds this project's wheel and the emulator's runtime wheels (aiohttp, PyYAML and
their dependencies) for CPython 3.11 on manylinux x86_64, the Python of the emulator host image.
The project wheel is built with a fixed SOURCE_DATE_EPOCH, so the same sources give the same bytes
and Ansible's copy task reports `changed` only when the code really changed. A content stamp makes
a rebuild with unchanged sources a no-op (the play calls this on every run).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["pyproject.toml", "tuner", "plugins/module_utils", "plugins/filter", "requirements/constraints.txt"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def source_digest() -> str:
    h = hashlib.sha256()
    for entry in SOURCES:
        p = ROOT / entry
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:20]


def build(dest: Path, quiet: bool) -> bool:
    digest = source_digest()
    stamp = dest / ".stamp"
    if stamp.is_file() and stamp.read_text().strip() == digest and any(dest.glob("sglang_tune-*.whl")):
        return False
    q = ["-q"] if quiet else []
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", PYTHONHASHSEED="0")
        # Build from a copy so setuptools' build/ and egg-info never land in the checkout.
        src = tmpd / "src"
        shutil.copytree(
            ROOT,
            src,
            ignore=shutil.ignore_patterns(
                ".git", ".venv", ".cache", "build", ".ansible", "*.egg-info", "__pycache__", "results*", "out"
            ),
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                *q,
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(tmpd / "whl"),
                str(src),
            ],
            check=True,
            env=env,
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                *q,
                "--only-binary=:all:",
                "--python-version",
                "3.11",
                "--implementation",
                "cp",
                *[a for p in PLATFORMS for a in ("--platform", p)],
                "-c",
                str(ROOT / "requirements/constraints.txt"),
                "-d",
                str(tmpd / "whl"),
                "aiohttp",
                "PyYAML",
            ],
            check=True,
            env=env,
        )
        dest.mkdir(parents=True, exist_ok=True)
        wanted = {w.name for w in (tmpd / "whl").glob("*.whl")}
        for old in dest.glob("*.whl"):
            if old.name not in wanted:
                old.unlink()
        for w in (tmpd / "whl").glob("*.whl"):
            target = dest / w.name
            if not target.exists() or target.read_bytes() != w.read_bytes():
                shutil.copy2(w, target)
    stamp.write_text(digest + "\n")
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", default=str(ROOT / "build" / "wheelhouse"))
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    changed = build(Path(args.dest), args.quiet)
    print("changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
