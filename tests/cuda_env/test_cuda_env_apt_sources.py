"""Which apt sources already carry the CUDA repository (plugins/filter/gpu_facts.py
`apt_sources_carrying`, roles/cuda_env/tasks/repo.yml), read from what this machine's own apt
(Debian 12's apt 2.6) prints for scratch source directories: the same command the role runs, never
the machine's own sources."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import gpu_facts as gf

URL = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
OWN = "cuda-sglang-tune.sources"
OWN_STANZA = f"Types: deb\nURIs: {URL}\nSuites: /\nSigned-By: /etc/apt/keyrings/cuda-archive-keyring.asc\n"


def indextargets(parts: Path) -> subprocess.CompletedProcess:
    """The role's command, reading only `parts` (no sources.list, no sources.list.d)."""
    return subprocess.run(
        [
            "apt-get",
            "-o",
            "Dir::Etc::sourcelist=/dev/null",
            "-o",
            f"Dir::Etc::sourceparts={parts}",
            "indextargets",
            "--no-release-info",
            "--format",
            "$(REPO_URI) $(SOURCESENTRY)",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
        timeout=60,
    )


def carrying(tmp_path: Path, files: dict[str, str], url: str = URL) -> list[str]:
    parts = tmp_path / f"parts{len(list(tmp_path.glob('parts*')))}"
    parts.mkdir()
    for name, text in files.items():
        (parts / name).write_text(text)
    proc = indextargets(parts)
    assert proc.returncode == 0, proc.stderr
    found = gf.apt_sources_carrying(proc.stdout, proc.stderr, url, str(parts / OWN))
    return [Path(f).name for f in found]


def test_a_live_entry_counts_in_either_form(tmp_path) -> None:
    """A one-line entry with an option list and no trailing slash, and a deb822 stanza."""
    assert carrying(tmp_path, {"a.list": f"deb [signed-by=/k.gpg arch=amd64] {URL.rstrip('/')} /\n"}) == ["a.list"]
    assert carrying(tmp_path, {"b.sources": OWN_STANZA}) == ["b.sources"]


def test_a_disabled_stanza_or_a_commented_line_carries_nothing(tmp_path) -> None:
    files = {
        "a.sources": f"Types: deb\nURIs: {URL}\nSuites: /\nEnabled: no\n",
        "b.list": f"# deb {URL} /\n",
        OWN: OWN_STANZA,
    }
    assert carrying(tmp_path, files) == []


def test_a_file_mirror_is_matched_as_apt_prints_it(tmp_path) -> None:
    """apt prints file:///srv/mirror/cuda/ as file:/srv/mirror/cuda/."""
    files = {"mirror.list": "deb [signed-by=/etc/apt/keyrings/mirror.gpg] file:///srv/mirror/cuda/ /\n"}
    assert carrying(tmp_path, files, "file:///srv/mirror/cuda") == ["mirror.list"]
    assert carrying(tmp_path, files, "http://mirror/cuda/") == []


def test_a_file_repeating_the_roles_own_source_is_found_from_apts_warning(tmp_path) -> None:
    """apt lists a repository configured twice (with one Signed-By, so no conflict) once, under the
    file it read first: the role's own. The other file is named only in apt's warning."""
    key = "/etc/apt/keyrings/cuda-archive-keyring.asc"
    files = {OWN: OWN_STANZA, "cuda-z-repeat.list": f"deb [signed-by={key}] {URL.rstrip('/')} /\n"}
    assert carrying(tmp_path, files) == ["cuda-z-repeat.list"]


def test_unrelated_repositories_and_the_roles_own_file_alone_carry_nothing(tmp_path) -> None:
    files = {"debian.sources": "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"}
    assert carrying(tmp_path, {**files, OWN: OWN_STANZA}) == []
