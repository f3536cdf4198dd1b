"""scripts/shellcheck_all.py: which shell it finds in plays, and that shellcheck's findings fail it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import shellcheck_all as sc  # noqa: E402

PLAY = """
- name: A play
  hosts: all
  tasks:
    - name: Make the user
      ansible.builtin.user:
        name: svc
        shell: /usr/sbin/nologin
    - name: Inline shell
      ansible.builtin.shell:
        cmd: |
          set -eu
          cd {{ dir | quote }} || exit 1
          {% if x %}echo yes{% endif %}
    - block:
        - name: Raw in a block
          ansible.builtin.raw: echo $HOME
          args:
            executable: /bin/bash
    - name: Argv script
      ansible.builtin.command:
        argv: [/bin/sh, -c, 'echo "$1"', sh, "{{ arg }}"]
    - name: A rendered template is checked as a template
      ansible.builtin.raw: "{{ lookup('ansible.builtin.template', 'x.sh.j2') }}"
"""


def test_finds_task_shell_only_and_strips_jinja() -> None:
    found = sc.inline_scripts(yaml.safe_load(PLAY), "play.yml")
    by_task = {s.origin.split("'")[1]: s for s in found}
    assert set(by_task) == {"Inline shell", "Raw in a block", "Argv script"}
    assert "cd JINJA_VALUE || exit 1" in by_task["Inline shell"].text
    assert "{%" not in by_task["Inline shell"].text and "echo yes" in by_task["Inline shell"].text
    assert by_task["Raw in a block"].dialect == "bash" and by_task["Argv script"].dialect == "sh"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (make setup)")
def test_shellcheck_findings_count(tmp_path, capsys) -> None:
    good = sc.Script("good", "sh", 'set -eu\necho "$1"\n')
    bad = sc.Script("bad.yml: task 'x'", "sh", "for f in $(ls *.txt); do cat $f; done\n")
    assert sc.shellcheck([good, bad], tmp_path) == 1
    out = capsys.readouterr().out
    assert "bad.yml: task 'x'" in out and "SC2045" in out and "good" not in out.split("==")[0]


def test_every_shell_template_must_be_listed() -> None:
    listed = sc.listed_templates()
    assert sc.unlisted_shell_templates(listed) == []
    assert sc.unlisted_shell_templates([]) == [
        str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("roles/*/templates/**/*.sh.j2"))
    ]
