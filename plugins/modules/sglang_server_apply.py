#!/usr/bin/python
# Copyright: (c) 2026, sglang-tune contributors
# Apache License 2.0 (the collection's licence, galaxy.yml): https://www.apache.org/licenses/LICENSE-2.0
"""Documentation of the ``sglang_server_apply`` action (plugins/action/sglang_server_apply.py).

The action runs the whole step itself (its host program is roles/sglang_server/files/sglang_apply.py);
Ansible reads an action's documentation from the module of the same name, which is this file.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_apply
short_description: Write, keep or restore the files of the sglang_server role on a host in one exec
version_added: "0.1.0"
description:
  - The sglang_server role's one way of changing files on a host. It is an action plugin that sends
    the role's host program (C(files/sglang_apply.py)) and a payload in one exec, on the exec's stdin
    where the connection pipelines, else as one root-only file that the program deletes before it
    does anything else. File contents (the API key's file among them) never appear in a command
    line, and the result never carries a content or a digest of one.
  - O(state=configured) writes every file of O(files) that is present and differs in content, mode
    or owner (root:root), atomically (all temporary files are written before the first rename), and
    removes those that are not present. It reports the unit's state before anything was written and
    whether the copies in O(last_good_dir) equal the new configuration.
  - O(state=kept) copies the files marked C(keep) to O(last_good_dir) under their C(name) (a missing
    file removes its copy), so the configuration that passed the gate becomes the one to roll back to.
  - O(state=restored) puts the copies in O(last_good_dir) back (a missing copy removes the file); with
    no copy at all nothing changes and RV(found) is false.
  - Must be called from a task of the C(sglang_tune.serving.sglang_server) role, which holds the host
    program in its C(files/).
author:
  - sglang-tune contributors (@sglang-tune)
options:
  state:
    description: What to do.
    type: str
    choices: [configured, kept, restored]
    default: configured
  files:
    description:
      - The file layout (the role's C(_sglang_server_files)), one entry per file.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The file's name in O(last_good_dir) and in O(contents).
        type: str
        required: true
      path:
        description: Absolute, normalised path on the host.
        type: str
        required: true
      mode:
        description: Octal mode as a string, for example C("0600").
        type: str
        required: true
      present:
        description: Whether the file belongs to this configuration (otherwise it is removed).
        type: bool
        required: true
      keep:
        description: Whether the last-good copy keeps it.
        type: bool
        required: true
      managed:
        description:
          - False for another role's file (cuda_env's environment file) - never written or removed by
            C(configured), kept and restored with the rest (a missing copy leaves it as it is).
        type: bool
        default: true
  contents:
    description:
      - For O(state=configured), the text of every present file, by C(name). Never logged or returned.
    type: dict
  unit:
    description: The systemd unit whose state O(state=configured) reports; empty reports none.
    type: str
    default: ""
  last_good_dir:
    description: Where the last configuration that passed the gate is kept (root-only). Required unless O(state=configured).
    type: str
  payload_dir:
    description:
      - A root-only directory for the payload file when the connection cannot pipeline (the role passes the
        last-good directory, which its install step made). Missing or not writable, a new remote temporary
        directory is used instead (one exec more).
    type: str
extends_documentation_fragment:
  - action_common_attributes
  - action_common_attributes.flow
attributes:
  action:
    support: full
    details: The work is done by the action plugin plugins/action/sglang_server_apply.py; this file holds its documentation.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Reports what it would write or remove and writes nothing.
  diff_mode:
    support: none
    details: A diff would show the contents, which may be secrets.
  platform:
    platforms: posix
    details: Needs Python 3.8 or newer on the host, found as Ansible finds it for modules.
notes:
  - Files are written as root:root; run it with privileges (the role does).
"""

EXAMPLES = r"""
# A unit and its environment file (the sglang_server role passes its whole layout,
# _sglang_server_files, and a text for every file of it that is present and managed:
# roles/sglang_server/tasks/configure.yml)
- name: Write the unit and its environment file when they changed
  sglang_tune.serving.sglang_server_apply:
    state: configured
    files:
      - {name: unit, path: /etc/systemd/system/sglang-qwen.service, mode: "0644", present: true, keep: true}
      - {name: env, path: /etc/sglang/sglang-qwen.env, mode: "0600", present: true, keep: true}
    contents:
      unit: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
      env: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
    unit: sglang-qwen.service
    last_good_dir: /etc/sglang/last-good/sglang-qwen
    payload_dir: /etc/sglang/last-good/sglang-qwen
  register: applied
"""

RETURN = r"""
changed_files:
  description: Paths written or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/sglang-qwen.service]
unit_state:
  description: C(ActiveState), C(SubState), C(UnitFileState), C(NeedDaemonReload), C(LoadState) before any write; empty when systemd cannot say.
  returned: when O(state=configured)
  type: dict
last_good_current:
  description: Whether every kept file equals its copy in O(last_good_dir) after this run.
  returned: when O(state=configured)
  type: bool
found:
  description: Whether O(last_good_dir) held a configuration to restore.
  returned: when O(state=restored)
  type: bool
"""
