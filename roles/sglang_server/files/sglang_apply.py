# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""The host side of the sglang_server role's one way of changing files on a host.

The collection's action ``sglang_server_apply`` (plugins/action/sglang_server_apply.py) appends a
payload to this program and runs it with the host's Python in one exec: on the program's stdin
where the connection can pipeline, else as a root-only file (in the role's last-good directory, or
Ansible's remote temporary directory before install) that the program deletes before it does
anything else. File contents (the API key's file among them) therefore never appear in a command
line, and nothing here prints them.

The payload: ``state`` (``configured``, ``kept`` or ``restored``), ``check_mode``, ``unit``,
``last_good_dir``, ``files`` (the role's file layout, vars/main.yml ``_sglang_server_files``:
``name``, ``path``, ``mode``, ``present``, ``keep``, ``managed``, and for ``configured`` the
``content``) and ``cleanup`` (paths to remove first). A file with ``managed`` false is another
role's (cuda_env's environment file, which the unit loads): never written or removed here, but
kept and restored with the rest, so a rollback puts back the environment the last good
configuration ran with (a copy that a last good configuration from before it was kept does not
have leaves the file as it is). The result is one JSON line on stdout:

- ``configured``: every file that should be present is written when its content, mode or
  ownership (root:root) differs; every file that should not is removed. ``changed_files``,
  ``unit_state`` (the unit's state before anything was written) and ``last_good_current``
  (whether the last good copy equals the new configuration) come back.
- ``kept``: the files marked ``keep`` are copied to ``last_good_dir`` (a missing one removes its
  copy): the configuration that just passed the gate becomes the one to roll back to.
- ``restored``: the copies in ``last_good_dir`` are put back (a missing copy removes the file);
  ``found`` says whether there was a last good configuration at all (without one nothing changes).

Every write is atomic (a temporary file in the same directory, fsync, rename), and all temporary
files are written before the first rename, so a full disk leaves the old files in place.
Standard library only, Python 3.8 syntax.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

UNIT_PROPERTIES = ("ActiveState", "SubState", "UnitFileState", "NeedDaemonReload", "LoadState")


class ApplyError(Exception):
    """A failure whose message names paths only, never contents."""


def unit_state(unit):
    """The unit's properties, or {} when systemd cannot say (then tasks/run.yml (re)starts the unit
    rather than trusting a state it does not know)."""
    systemctl = shutil.which("systemctl")
    if not unit or systemctl is None:
        return {}
    args = [systemctl, "show", unit] + ["--property=" + p for p in UNIT_PROPERTIES]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {}
    state = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            state[key] = value
    return state


def read(path):
    """The bytes of a regular file, or None when there is none."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise ApplyError(f"{path} exists and is not a regular file")
    with open(path, "rb") as fh:
        return fh.read()


def current(path, data, mode):
    """Whether ``path`` holds ``data`` with ``mode``, owned by root:root."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != mode or (st.st_uid, st.st_gid) != (0, 0):
        return False
    return read(path) == data


def ensure_dir(path, mode):
    """Create a missing directory (and parents, 0755) owned by root; an existing one is left alone."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        ensure_dir(parent, 0o755)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        return
    os.chmod(path, mode)
    os.chown(path, 0, 0)


class Batch:
    """Writes and removals that happen together: every temporary file first, then the renames."""

    def __init__(self):
        self.writes = []  # (temporary path, final path)
        self.removals = []

    def write(self, path, data, mode, dir_mode=0o755):
        directory = os.path.dirname(path)
        ensure_dir(directory, dir_mode)
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
        self.writes.append((tmp, path))
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            os.fchown(fh.fileno(), 0, 0)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def remove(self, path):
        self.removals.append(path)

    def commit(self):
        for tmp, path in self.writes:
            os.replace(tmp, path)
        self.writes = []
        for path in self.removals:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def abort(self):
        for tmp, _path in self.writes:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def apply(payload):
    state = payload["state"]
    check = bool(payload.get("check_mode"))
    good = payload.get("last_good_dir") or ""
    files = payload["files"]
    result = {"changed_files": []}
    batch = Batch()
    try:
        if state == "configured":
            result["unit_state"] = unit_state(payload.get("unit"))
            lg_current = bool(good) and os.path.isdir(good)
            for f in files:
                mode = int(f["mode"], 8)
                if not f.get("managed", True):
                    copy = read(os.path.join(good, f["name"])) if f.get("keep") and good else None
                    lg_current = lg_current and (copy is None or copy == read(f["path"]))
                    continue
                data = f["content"].encode("utf-8") if f["present"] else None
                if data is None:
                    if read(f["path"]) is not None:
                        result["changed_files"].append(f["path"])
                        batch.remove(f["path"])
                elif not current(f["path"], data, mode):
                    result["changed_files"].append(f["path"])
                    if not check:
                        batch.write(f["path"], data, mode)
                if f.get("keep") and good:
                    lg_current = lg_current and read(os.path.join(good, f["name"])) == data
            result["last_good_current"] = lg_current
        elif state == "kept":
            for f in files:
                if not f.get("keep"):
                    continue
                copy = os.path.join(good, f["name"])
                data = read(f["path"])
                if data is None:
                    if read(copy) is not None:
                        result["changed_files"].append(copy)
                        batch.remove(copy)
                elif not current(copy, data, int(f["mode"], 8)):
                    result["changed_files"].append(copy)
                    if not check:
                        batch.write(copy, data, int(f["mode"], 8), dir_mode=0o700)
        elif state == "restored":
            kept = [f for f in files if f.get("keep")]
            # No copy at all: no configuration ever passed the gate here, so nothing to restore
            # (and the files of the failed one stay for inspection).
            result["found"] = any(read(os.path.join(good, f["name"])) is not None for f in kept)
            for f in kept if result["found"] else ():
                data = read(os.path.join(good, f["name"]))
                if data is None and not f.get("managed", True):
                    continue  # kept before it was: the file stays as it is
                if data is None:
                    if read(f["path"]) is not None:
                        result["changed_files"].append(f["path"])
                        batch.remove(f["path"])
                elif not current(f["path"], data, int(f["mode"], 8)):
                    result["changed_files"].append(f["path"])
                    if not check:
                        batch.write(f["path"], data, int(f["mode"], 8))
        else:
            raise ApplyError(f"unknown state {state!r}")
        if not check:
            batch.commit()
    except BaseException:
        batch.abort()
        raise
    result["changed"] = bool(result["changed_files"])
    return result


def main(payload):
    for path in payload.get("cleanup") or ():
        # The payload file itself (it holds the contents): gone before anything else happens.
        try:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass
    try:
        result = apply(payload)
    except (ApplyError, OSError, ValueError, KeyError) as err:
        if isinstance(err, OSError):
            text = f"{err.strerror}: {err.filename}" if err.filename else str(err.strerror)
        else:
            text = str(err)
        result = {"failed": True, "msg": f"sglang_server_apply ({payload.get('state')}): {text}"}
    sys.stdout.write(json.dumps(result) + "\n")
    return 1 if result.get("failed") else 0
