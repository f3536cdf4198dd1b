"""The roles and plays call the collection's modules, filters and roles by FQCN (scripts/fqcn_convert.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import fqcn_convert  # noqa: E402

NAMES = ({"sglang_ready"}, {"sglang_flags", "systemd_exec_quote"}, {"sglang_server"})

PLAY = """\
- name: Deploy
  hosts: all
  roles:
    - sglang_server
  tasks:
    - name: Gate
      sglang_ready:
        url: "{{ url }}"
    - name: Publish
      ansible.builtin.set_stats:
        data:
          sglang_ready: "{{ x | sglang_flags }}"
    - block:
        - name: Role
          ansible.builtin.include_role:
            name: sglang_server
"""


def test_module_keys_roles_and_filters_become_fqcns_data_keys_stay() -> None:
    out = fqcn_convert.convert(PLAY, True, NAMES)
    assert "    - sglang_tune.serving.sglang_server\n" in out
    assert "      sglang_tune.serving.sglang_ready:\n        url:" in out
    assert '          sglang_ready: "{{ x | sglang_tune.serving.sglang_flags }}"' in out
    assert "            name: sglang_tune.serving.sglang_server\n" in out
    assert fqcn_convert.convert(out, True, NAMES) == out


def test_templates_map_filters_by_fqcn() -> None:
    text = "{{ line | map('systemd_exec_quote') | join(' ') }} {{ a | sglang_flags(b) }}"
    assert fqcn_convert.convert(text, False, NAMES) == (
        "{{ line | map('sglang_tune.serving.systemd_exec_quote') | join(' ') }} "
        "{{ a | sglang_tune.serving.sglang_flags(b) }}"
    )


def test_the_repository_uses_fqcns_everywhere() -> None:
    assert fqcn_convert.main(["--check"]) == 0
