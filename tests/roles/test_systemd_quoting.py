"""The quoting of ExecStart arguments and EnvironmentFile values (plugins/module_utils/sglang_flags.py)
survives a real systemd unchanged: systemd 252 as PID 1 in a podman container."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import roles_testlib  # noqa: F401  (puts the collection on sys.path)
from podman_host import labelled_run
from roles_testlib import IMAGE, remove_container
from sglang_utils import sglang_flags

NAME = "sgt-roles-quoting-230"  # ad-hoc range (docs/architecture.md)


def podman(*args, stdin: str | None = None, check=True):
    return subprocess.run(["podman", *args], input=stdin, capture_output=True, text=True, check=check, timeout=60)


@pytest.mark.systemd
def test_exec_and_env_quoting_through_systemd(need_podman):
    env_values = {
        "PLAIN": "plain",
        "SPACE": "with space",
        "DQ": 'd"q',
        "SQ": "s'q",
        "BS": "back\\slash",
        "DOLLAR": "dollar $HOME ${X}",
        "TICK": "tick `id`",
        "HASH": "#hash; semi",
        "MIXED": 'k$y "x" \\ `z` %n',
    }
    args = [
        "plain",
        "with space",
        "pct%n",
        "dol$HOME",
        'q"x',
        "s'q",
        "b\\s",
        "",
        ";",
        '{"a": [1, 2]}',
        "${MIXED}",
        "%d/server-secrets.yaml",
    ]
    script = f"import json,os,sys; print('RESULT', json.dumps([sys.argv[1:], {{k: os.environ.get(k) for k in {list(env_values)!r}}}]))"
    unit = (
        "[Service]\nType=oneshot\nEnvironmentFile=/etc/quoting.env\nExecStart=/usr/bin/python3 -c "
        + sglang_flags.systemd_exec_quote(script)
        + " "
        + " ".join(sglang_flags.systemd_exec_quote(a) for a in args)
        + "\n"
    )
    env = "".join(sglang_flags.systemd_env_assign(k, v) + "\n" for k, v in env_values.items())
    remove_container(NAME)
    try:
        podman(*labelled_run(NAME, IMAGE, "/sbin/init", systemd=True))
        for _ in range(120):
            state = podman("exec", NAME, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.25)
        podman("exec", "-i", NAME, "sh", "-c", "cat > /etc/quoting.env", stdin=env)
        podman("exec", "-i", NAME, "sh", "-c", "cat > /etc/systemd/system/quoting.service", stdin=unit)
        podman("exec", NAME, "sh", "-c", "systemctl daemon-reload && systemctl start quoting.service")
        log = podman("exec", NAME, "journalctl", "-u", "quoting.service", "-o", "cat", "--no-pager").stdout
    finally:
        remove_container(NAME)
    line = next(ln for ln in log.splitlines() if ln.startswith("RESULT "))
    got_args, got_env = json.loads(line[len("RESULT ") :])
    assert got_env == env_values
    # Every word arrives as written: no variable ($) or specifier (%) is expanded by systemd.
    assert got_args == args
