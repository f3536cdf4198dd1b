"""scripts/setup.sh's image step: the image gets its name (and with it the label every later set-up
trusts) only once it holds a system. The step runs for real with stand-ins for mmdebstrap and
podman on PATH that record what they are asked; nothing is built or imported."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PODMAN = """#!/bin/bash
echo "podman $*" >> "$LOG"
case "$1 $2" in
  "image inspect")
    case "$*" in
      *-partial*) echo "$SIZE" ;;
      *) exit 125 ;;  # the image is not there yet
    esac ;;
  "import "*) cat >/dev/null ;;
esac
exit 0
"""

MMDEBSTRAP = """#!/bin/bash
echo "mmdebstrap $*" >> "$LOG"
[ "$MM_RC" = 0 ] && head -c 1000 /dev/zero
exit "$MM_RC"
"""


def image_step(tmp_path: Path, mm_rc: int, size: int) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("podman", PODMAN), ("mmdebstrap", MMDEBSTRAP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LOG": str(log),
        "MM_RC": str(mm_rc),
        "SIZE": str(size),
        "SGLANG_EMU_IMAGE": "localhost/sgt-test-image:x",
    }
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/setup.sh"), "image"], env=env, capture_output=True, text=True, timeout=60
    )
    return proc, log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(os.geteuid() != 0, reason="the image step needs root")
def test_a_failed_build_never_gets_the_images_name(tmp_path: Path) -> None:
    """mmdebstrap failed (a mirror that does not answer) and `podman import` still made an image,
    empty, under the image's name and label: every later set-up took it as built."""
    proc, calls = image_step(tmp_path, mm_rc=25, size=1141)
    assert proc.returncode != 0
    assert any(c.startswith("podman import") and "localhost/sgt-test-image:x-partial" in c for c in calls), calls
    assert not any(c.startswith("podman tag") for c in calls), calls

    proc, calls = image_step(tmp_path, mm_rc=0, size=1141)  # "succeeded" but made no system
    assert proc.returncode != 0 and "mmdebstrap made no system" in proc.stderr
    assert not any(c.startswith("podman tag") for c in calls), calls

    proc, calls = image_step(tmp_path, mm_rc=0, size=203088517)
    assert proc.returncode == 0, proc.stderr
    assert "podman tag localhost/sgt-test-image:x-partial localhost/sgt-test-image:x" in calls
