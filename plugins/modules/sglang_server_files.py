#!/usr/bin/python
# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Role-local module of sglang_server: write files whose content must not travel in a command line
(the root-only environment file holds the API key), atomically, only when they differ, and report
the unit's state and whether the last good copy is current.

tasks/configure.yml writes the unit itself with one `raw` script (one `podman exec` on emulator
hosts instead of a module's five) and calls this module only when the environment file changed.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_files
short_description: Write the SGLang unit's files atomically and report the unit's state
description:
  - Writes each of O(files) (content, mode, owner, group) when it differs from what is on the host,
    atomically (a temporary file in the same directory, then rename). Missing parent directories
    are created (root, 0755).
  - Reports the unit's C(ActiveState), C(UnitFileState) and C(NeedDaemonReload) as they were before
    anything was written, and whether the copies in O(last_good_dir) equal the files.
  - Never restarts anything; the role's handler does.
author:
  - sglang-tune contributors (@sglang-tune)
options:
  files:
    description: The files to write.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path on the host.
        type: path
        required: true
      content:
        description: The whole content (text). Never logged.
        type: str
        required: true
      mode:
        description: Octal mode as a string.
        type: str
        default: "0644"
      owner:
        description: Owner (name or uid).
        type: str
        default: root
      group:
        description: Group (name or gid).
        type: str
        default: root
      last_good_name:
        description: The file's name in O(last_good_dir); omit for files not kept there.
        type: str
  unit:
    description: The systemd unit whose state is reported; empty reports none.
    type: str
    default: ""
  last_good_dir:
    description: Where the role keeps the last configuration that passed the gate; empty skips the comparison.
    type: path
    default: ""
attributes:
  check_mode:
    description: Reports what it would change and changes nothing.
    support: full
  diff_mode:
    description: No diff is shown (the contents may be secret).
    support: none
notes:
  - Contents are never returned, so a secret (the API key in the environment file) stays out of the output.
"""

EXAMPLES = r"""
- name: Write the unit and its environment file
  sglang_server_files:
    files:
      - {path: /etc/systemd/system/sglang-qwen.service, content: "{{ unit_text }}", last_good_name: unit}
      - {path: /etc/sglang/sglang-qwen.env, content: "{{ env_text }}", mode: "0600", last_good_name: env}
    unit: sglang-qwen.service
    last_good_dir: /etc/sglang/last-good/sglang-qwen
  register: files
  no_log: true
"""

RETURN = r"""
changed_files:
  description: Paths that were (or in check mode would be) written.
  returned: always
  type: list
  elements: str
unit_state:
  description: C(ActiveState), C(SubState), C(UnitFileState), C(NeedDaemonReload), C(LoadState) before any write (empty without O(unit)).
  returned: always
  type: dict
last_good_current:
  description: Whether every file with a C(last_good_name) equals its copy in O(last_good_dir) after this run.
  returned: always
  type: bool
"""

import grp
import os
import pwd
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

UNIT_PROPERTIES = ("ActiveState", "SubState", "UnitFileState", "NeedDaemonReload", "LoadState")


def resolve_id(value, db, what):
    """A user or group name (or number) to its numeric id."""
    text = str(value)
    if text.isdigit():
        return int(text)
    try:
        return db(text)
    except KeyError:
        raise ValueError(f"no such {what}: {text}") from None


def parse_mode(text):
    if not isinstance(text, str) or not text or any(c not in "01234567" for c in text) or len(text) > 4:
        raise ValueError(f"mode must be an octal string such as '0644', got {text!r}")
    return int(text, 8)


def file_differs(path, data, mode, uid, gid):
    """True when `path` is missing or differs in content, permission bits or ownership."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != mode or st.st_uid != uid or st.st_gid != gid:
        return True
    with open(path, "rb") as fh:
        return fh.read() != data


def write_atomically(path, data, mode, uid, gid):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        os.fchmod(fd, mode)
        os.fchown(fd, uid, gid)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def equals(path, data):
    """Whether the file at `path` holds exactly `data` (False when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read() == data
    except OSError:
        return False


def unit_state(module, unit):
    if not unit:
        return {}
    systemctl = module.get_bin_path("systemctl", required=True)
    args = [systemctl, "show", unit] + [f"--property={p}" for p in UNIT_PROPERTIES]
    rc, out, err = module.run_command(args)
    if rc != 0:
        module.fail_json(msg=f"systemctl show {unit} failed: {err.strip()}")
    state = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            state[key] = value
    return state


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(
                    path=dict(type="path", required=True),
                    content=dict(type="str", required=True, no_log=True),
                    mode=dict(type="str", default="0644"),
                    owner=dict(type="str", default="root"),
                    group=dict(type="str", default="root"),
                    last_good_name=dict(type="str"),
                ),
            ),
            unit=dict(type="str", default=""),
            last_good_dir=dict(type="path", default=""),
        ),
        supports_check_mode=True,
    )
    state = unit_state(module, module.params["unit"])
    changed_files = []
    kept = []
    for item in module.params["files"]:
        path = item["path"]
        if not os.path.isabs(path):
            module.fail_json(msg=f"files: path must be absolute, got {path!r}")
        try:
            mode = parse_mode(item["mode"])
            uid = resolve_id(item["owner"], lambda n: pwd.getpwnam(n).pw_uid, "user")
            gid = resolve_id(item["group"], lambda n: grp.getgrnam(n).gr_gid, "group")
        except ValueError as err:
            module.fail_json(msg=f"files: {path}: {err}")
        data = item["content"].encode("utf-8")
        if file_differs(path, data, mode, uid, gid):
            changed_files.append(path)
            if not module.check_mode:
                write_atomically(path, data, mode, uid, gid)
        if item.get("last_good_name"):
            kept.append((path, item["last_good_name"], data))

    last_good = module.params["last_good_dir"]
    current = bool(last_good) and all(equals(os.path.join(last_good, name), data) for _path, name, data in kept)
    module.exit_json(
        changed=bool(changed_files), changed_files=changed_files, unit_state=state, last_good_current=current
    )


if __name__ == "__main__":
    main()
