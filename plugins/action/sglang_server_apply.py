# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Action plugin ``sglang_server_apply``: the sglang_server role's one way of changing files on a host.

Why an action plugin and not a module: it runs once per configuration the tuner tries, and over
a connection without pipelining (podman's, as molecule's scenarios use) a module costs a temporary
directory, a chmod and an exec, each a ``podman exec``. This plugin sends the host-side program
(``files/sglang_apply.py``) and its payload in one exec: on stdin where the connection pipelines
(ssh, local), else as one file that the program deletes first thing, put into ``payload_dir`` (a
root-only directory the role made at install, the last-good one; over podman the copy is a plain
file copy into the container's mounted root, so the whole step is one ``podman exec``) or, where
that directory is not there yet, into Ansible's remote temporary directory (one exec more). The payload holds the files'
contents, the API key's file among them; it is never in a command line, and neither the
contents nor a digest of them is ever in the result.

Options (the role's tasks/configure.yml, run.yml and rollback.yml are the callers):
  state: configured | kept | restored (see files/sglang_apply.py)
  files: the file layout, vars/main.yml ``_sglang_server_files`` (name, path, mode, present, keep)
  contents: for ``configured``, ``{name: text}`` for every file that is present
  unit: the unit whose state ``configured`` reports
  last_good_dir: where the last configuration that passed the gate is kept
  payload_dir: a root-only directory for the payload file when the connection cannot pipeline
Returns ``changed``, ``changed_files``, and for ``configured`` ``unit_state`` and
``last_good_current``. Supports check mode (reports what it would change).
"""

from __future__ import annotations

import json
import posixpath
import shlex
import uuid

from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.executor.interpreter_discovery import discover_interpreter
from ansible.plugins.action import ActionBase

STATES = ("configured", "kept", "restored")
_FILE_KEYS = {"name", "path", "mode", "present", "keep"}


def _as_bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "on", "1")


class ActionModule(ActionBase):
    # False: ActionBase would otherwise make the remote temporary directory before run(), an exec
    # that the pipelined path does not need; the other path makes it itself.
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("state", "files", "contents", "unit", "last_good_dir", "payload_dir"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        payload = self._payload()
        python, discovered = self._python(task_vars)
        program = self._loader.get_text_file_contents(self._find_needle("files", "sglang_apply.py"))

        if self._is_pipelining_enabled("new"):
            script = self._script(program, payload)
            res = self._low_level_execute_command(
                f"{shlex.quote(python)} -", in_data=script.encode("utf-8"), sudoable=True
            )
        else:
            remote = self._put_payload(program, payload)
            res = self._low_level_execute_command(f"{shlex.quote(python)} {shlex.quote(remote)}", sudoable=True)
            if res.get("rc") == 0:
                self._connection._shell.tmpdir = None  # the program removed it: no extra exec to do so
            elif self._connection._shell.tmpdir is None:
                # The program did not run (no Python?): do not leave the payload in payload_dir.
                self._low_level_execute_command(f"rm -f {shlex.quote(remote)}", sudoable=True)
        out = self._parse(res)
        result.update(out)
        if discovered:
            result["ansible_facts"] = {"discovered_interpreter_python": python}
        return result

    # -- arguments ---------------------------------------------------------------------------

    def _payload(self):
        args = self._task.args
        state = args.get("state", "configured")
        if state not in STATES:
            raise AnsibleActionFail(f"state must be one of {', '.join(STATES)}; got {state!r}")
        files = args.get("files")
        if not isinstance(files, list) or not files:
            raise AnsibleActionFail("files must be a non-empty list (the role's _sglang_server_files)")
        contents = args.get("contents") or {}
        if not isinstance(contents, dict):
            raise AnsibleActionFail("contents must be a mapping of file name to text")
        good = args.get("last_good_dir") or ""
        if state != "configured" and not good:
            raise AnsibleActionFail(f"state={state} needs last_good_dir")
        out = []
        for f in files:
            if not isinstance(f, dict) or not _FILE_KEYS <= set(f):
                raise AnsibleActionFail(f"every file needs {', '.join(sorted(_FILE_KEYS))}")
            path = str(f["path"])
            if not path.startswith("/") or posixpath.normpath(path) != path:
                raise AnsibleActionFail(f"{f['name']}: path must be absolute and normalised; got {path!r}")
            item = {
                "name": str(f["name"]),
                "path": path,
                "mode": str(f["mode"]),
                "present": _as_bool(f["present"]),
                "keep": _as_bool(f["keep"]),
                # another role's file (cuda_env's): kept and restored, never written (files/sglang_apply.py)
                "managed": _as_bool(f.get("managed", True)),
            }
            if state == "configured" and item["present"] and item["managed"]:
                if not isinstance(contents.get(item["name"]), str):
                    raise AnsibleActionFail(f"contents has no text for {item['name']} ({path})")
                item["content"] = contents[item["name"]]
            out.append(item)
        return {
            "state": state,
            "check_mode": bool(self._play_context.check_mode),
            "unit": str(args.get("unit") or ""),
            "last_good_dir": str(good),
            "files": out,
        }

    def _put_payload(self, program, payload):
        """The payload as a file on the host: in payload_dir when it exists, else in a new temporary directory."""
        payload_dir = self._task.args.get("payload_dir")
        if payload_dir:
            remote = posixpath.join(str(payload_dir), f".sglang-apply-{uuid.uuid4().hex}.py")
            try:
                self._transfer_data(remote, self._script(program, dict(payload, cleanup=[remote])))
                return remote
            except (AnsibleError, OSError):
                pass  # not made yet (configure before install), or not writable by this user
        tmpdir = self._make_tmp_path()
        remote = posixpath.join(tmpdir, "sglang_apply.py")
        self._transfer_data(remote, self._script(program, dict(payload, cleanup=[tmpdir])))
        self._fixup_perms2((tmpdir, remote), execute=False)
        return remote

    @staticmethod
    def _script(program, payload):
        return (
            program
            + "\n\nif __name__ == '__main__':\n"
            + f"    sys.exit(main(json.loads({json.dumps(json.dumps(payload))})))\n"
        )

    def _python(self, task_vars):
        """The host's Python as modules find it: the variable, a discovered fact, the setting, else discovery."""
        explicit = task_vars.get("ansible_python_interpreter")
        if explicit:
            return self._templar.template(explicit), False
        facts = task_vars.get("ansible_facts") or {}
        if facts.get("discovered_interpreter_python"):
            return facts["discovered_interpreter_python"], False
        setting = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
        if setting and not str(setting).startswith("auto"):
            return str(setting), False
        found = discover_interpreter(
            action=self, interpreter_name="python", discovery_mode=setting or "auto", task_vars=task_vars
        )
        return found, True

    # -- result ------------------------------------------------------------------------------

    def _parse(self, res):
        stdout = res.get("stdout") or ""
        line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("{")), None)
        data = None
        if line is not None:
            try:
                data = json.loads(line)
            except ValueError:
                data = None
        if not isinstance(data, dict):
            # stderr is the interpreter's own (a missing python3, a syntax error): no content in it.
            raise AnsibleActionFail(
                "sglang_server_apply: the host program did not report (rc {}): {}".format(
                    res.get("rc"), (res.get("stderr") or stdout).strip()[-2000:]
                )
            )
        return data
