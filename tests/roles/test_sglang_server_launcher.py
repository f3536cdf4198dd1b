"""roles/sglang_server/files/sglang_launcher.py: the key never reaches the journal, signals and
exit statuses pass through.

The launcher and sglang_secrets.py are copied into one directory, as the role installs them on a
host, and run as real processes: against the project's emulator (which prints the key in its
`server_args=` line and merges `--config FILE.yaml` as SGLang does) and against small scripted
servers for the edge cases (long lines, bytes that are not UTF-8, signals, children that outlive
the server).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from roles_testlib import ROOT

LAUNCHER = ROOT / "roles" / "sglang_server" / "files" / "sglang_launcher.py"
SECRETS = ROOT / "plugins" / "module_utils" / "sglang_secrets.py"
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))
from sglang_secrets import secret_forms  # noqa: E402

KEY = "k'ey\"-with-$dollar-%pct-\\back-7f3a"


@pytest.fixture
def installed(tmp_path) -> Path:
    """The launcher as the role installs it: a directory with the launcher and sglang_secrets.py."""
    d = tmp_path / "launcher"
    d.mkdir()
    shutil.copy(LAUNCHER, d / "sglang_launcher.py")
    shutil.copy(SECRETS, d / "sglang_secrets.py")
    return d / "sglang_launcher.py"


def secrets_file(tmp_path: Path, key: str = KEY) -> Path:
    """What templates/sglang.secrets.yaml.j2 writes: `api-key: <JSON string>`."""
    path = tmp_path / "server-secrets.yaml"
    path.write_text(f"# managed\napi-key: {json.dumps(key)}\n")
    path.chmod(0o600)
    return path


def leaks(text: str, key: str = KEY) -> list[str]:
    return [form for form in secret_forms(key) if form in text]


def scripted(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def launch(installed: Path, secrets: Path | None, command: list[str], **kw) -> subprocess.Popen:
    args = [sys.executable, str(installed)]
    if secrets is not None:
        args += ["--secrets", str(secrets)]
    return subprocess.Popen(args + ["--", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_every_form_of_the_key_is_masked_line_by_line(installed, tmp_path):
    server = scripted(
        tmp_path,
        f"""
        import json, sys, dataclasses
        key = {KEY!r}
        @dataclasses.dataclass
        class ServerArgs:
            model_path: str
            api_key: str
        print(f"server_args={{ServerArgs('/m', key)!r}}", flush=True)
        sys.stderr.write("json " + json.dumps({{"api_key": key}}) + "\\n")
        sys.stderr.write("nested " + repr([repr(key)]) + "\\n")
        sys.stdout.write("partial " + key[:5]); sys.stdout.flush()
        sys.stdout.write(key[5:] + " end\\n"); sys.stdout.flush()
        sys.stdout.buffer.write(b"bytes \\xff\\xfe " + key.encode() + b"\\n"); sys.stdout.flush()
        sys.stdout.write("long " + "x" * 200000 + key + "y" * 10 + "\\n")
        sys.stdout.write("no newline at the end " + key)
        """,
    )
    proc = launch(installed, secrets_file(tmp_path), server)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    text = out.decode("utf-8", "replace")
    assert leaks(text) == []
    assert "server_args=ServerArgs(model_path='/m', api_key='<redacted>')" in text
    assert "partial <redacted> end" in text
    assert b"bytes \xff\xfe <redacted>\n" in out
    assert text.count("x") >= 200000 and "<redacted>yyyyyyyyyy" in text
    assert text.endswith("no newline at the end <redacted>")
    assert err == b""


def test_exit_status_and_signals_pass_through(installed, tmp_path):
    exit3 = scripted(tmp_path, "import sys; print('bye'); sys.exit(3)")
    proc = launch(installed, secrets_file(tmp_path), exit3)
    proc.communicate(timeout=30)
    assert proc.returncode == 3

    killed = scripted(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    proc = launch(installed, secrets_file(tmp_path), killed)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    missing = launch(installed, None, [str(tmp_path / "no-such-server")])
    missing.communicate(timeout=30)
    assert missing.returncode == 127


def test_sigterm_is_forwarded_and_the_server_drains(installed, tmp_path):
    """systemd (KillMode=mixed) signals only the launcher; the server must get SIGTERM and finish."""
    server = scripted(
        tmp_path,
        """
        import signal, sys, time
        def term(signum, frame):
            print("draining", flush=True)
            time.sleep(0.3)
            print("drained", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, term)
        signal.signal(signal.SIGHUP, lambda s, f: print("reload", flush=True))
        print("ready", flush=True)
        while True:
            time.sleep(0.1)
        """,
    )
    proc = launch(installed, secrets_file(tmp_path), server)
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signal.SIGHUP)
    assert proc.stdout.readline() == b"reload\n"
    proc.send_signal(signal.SIGTERM)
    out, _err = proc.communicate(timeout=30)
    assert out == b"draining\ndrained\n" and proc.returncode == 0


def test_the_server_dying_of_a_signal_kills_the_launcher_the_same_way(installed, tmp_path):
    server = scripted(tmp_path, "import time; print('up', flush=True); time.sleep(60)")
    proc = launch(installed, secrets_file(tmp_path), server)
    assert proc.stdout.readline() == b"up\n"
    proc.send_signal(signal.SIGINT)  # forwarded; an uncaught KeyboardInterrupt ends Python by SIGINT
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGINT
    server = scripted(
        tmp_path,
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_DFL); print('up', flush=True); time.sleep(60)",
    )
    proc = launch(installed, secrets_file(tmp_path), server)
    assert proc.stdout.readline() == b"up\n"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM


def test_a_child_that_keeps_the_pipe_open_does_not_hold_the_launcher(installed, tmp_path):
    server = scripted(
        tmp_path,
        """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        print("main exits", flush=True)
        """,
    )
    t0 = time.monotonic()
    proc = launch(installed, secrets_file(tmp_path), server)
    out, _err = proc.communicate(timeout=30)
    assert out == b"main exits\n" and proc.returncode == 0
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize(
    "content,why",
    [
        ("api-key: plain-unquoted\n", b'line 1 is not `name: "value"` as the sglang_server role writes it'),
        ("api-key: 'single'\n", b'line 1 is not `name: "value"`'),
        (b'api-key: "\xffhunter2"\n', b"not UTF-8 text (at byte 10)"),
        (None, b"No such file or directory"),
    ],
    ids=["unquoted", "single", "not-utf8", "missing"],
)
def test_an_unusable_secrets_file_stops_before_the_server_starts(installed, tmp_path, content, why):
    """The journal says what is wrong with the file (its line, the form it must take: the message
    was cut at its first colon), never a byte of its content."""
    path = tmp_path / "server-secrets.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    marker = tmp_path / "started"
    proc = launch(installed, path, [sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 78
    assert f"cannot read the secrets in {path}".encode() in err and why in err, err
    assert b"plain-unquoted" not in err and b"single" not in err and b"hunter2" not in err
    assert not marker.exists()


def request(url: str, key: str | None) -> int:
    req = urllib.request.Request(
        url + "/generate",
        data=json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 2}}).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.slow
@pytest.mark.parametrize("key", [KEY, "A" * 4096], ids=["quotes-dollar-backslash", "4KiB"])
def test_emulator_through_the_launcher_with_config_file(installed, tmp_path, key):
    """The real mechanism end to end, without systemd: `--config FILE.yaml` carries the key, the
    key works over HTTP, and nothing the server printed carries it (the emulator prints it in
    `server_args=` as SGLang does)."""
    # the one port and command helpers (tests/helpers/emulator_proc.py): a port from bind(0) can be
    # taken by another worker's outgoing connection before the server binds it
    from emulator_proc import emulator_cmd, free_port, wait_for_health

    port = free_port()
    cfg = secrets_file(tmp_path, key)
    server = emulator_cmd("--config", str(cfg), "--emulator-startup-s", "0", port=port, model="/m", served=None)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = launch(installed, cfg, server, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc, timeout=60)
        assert request(url, key) == 200
        assert request(url, None) == 401
        assert request(url, key + "x") == 401
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            assert key.encode() not in fh.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    text = (out + err).decode("utf-8", "replace")
    assert "server_args=ServerArgs(" in text and "api_key='<redacted>'" in text, text[-3000:]
    assert leaks(text, key) == []
    assert proc.returncode == 0, text[-3000:]
