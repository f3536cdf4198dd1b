# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Run the SGLang server (or the emulator) with its API key kept out of the journal.

SGLang logs its whole argument record, the key included, at start-up (sglang/srt/entrypoints/engine.py:
``logger.info(f"{server_args=}")`` in 0.5.9, ``server_args={_server_args_for_logging(...)}`` in 0.5.23;
sgl-project/sglang#37457, open), and journals are shipped to
log aggregators where a key outlives the server. systemd 253's ``LogFilterPatterns=`` is not in
Debian 12's systemd 252, so the sglang_server role runs the server through this launcher:

    python sglang_launcher.py --secrets /run/credentials/UNIT/server-secrets.yaml -- COMMAND [ARG...]

- It reads the secret values from the server config the role writes (SGLang's ``--config`` YAML
  file, delivered by systemd's ``LoadCredential=``; ``sglang_secrets.parse_secret_config``).
- It starts COMMAND with stdout and stderr on one pipe and copies every line to its own stdout
  (the journal), with each secret masked in every form it can take there (raw, in a Python repr
  with either quote, JSON-escaped, URL-encoded) and any value a secret field or flag holds
  (``sglang_secrets.redact_text``). Bytes that are not UTF-8 pass through unchanged.
- It forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the server (with
  ``KillMode=mixed`` systemd signals only the main process, this one; SGLang drains in-flight
  requests on SIGTERM), and ends the way the server ended: the same exit status, or killed by the
  same signal, so that systemd's ``Result=``/``ExecMainStatus=`` and ``Restart=on-failure`` see
  the server's own outcome.

Standard library only; ``sglang_secrets.py`` (plugins/module_utils in the project) sits next to
this file on the host. Exit status 78 (EX_CONFIG) when the secrets file cannot be used: the
server is not started unfiltered.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time

from sglang_secrets import parse_secret_config, redact_text, secret_forms

FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
EX_CONFIG = 78
# A line longer than this is passed on in pieces (journald splits at 48 KiB, LineMax= default);
# the last (longest secret form - 1) bytes are held back so a key is never cut in two.
MAX_PENDING = 64 * 1024
# After the server exited, how long to keep reading output that its children still write.
DRAIN_S = 2.0


class LineFilter:
    """Bytes in, redacted bytes out, line by line."""

    def __init__(self, secrets):
        self.secrets = [s for s in secrets if s]
        longest = max((len(f.encode("utf-8")) for s in self.secrets for f in secret_forms(s)), default=1)
        self.hold = max(longest - 1, 0)
        self.pending = b""

    def _redact(self, data):
        text = data.decode("utf-8", "surrogateescape")
        return redact_text(text, self.secrets).encode("utf-8", "surrogateescape")

    def feed(self, data):
        """The redacted complete lines in ``pending + data``; keeps the unterminated rest."""
        self.pending += data
        cut = self.pending.rfind(b"\n")
        out = b""
        if cut >= 0:
            out = b"".join(self._redact(line) + b"\n" for line in self.pending[: cut + 1].split(b"\n")[:-1])
            self.pending = self.pending[cut + 1 :]
        if len(self.pending) > MAX_PENDING:
            # Redact what is there, pass it on except the tail that may start a secret.
            redacted = self._redact(self.pending)
            split = len(redacted) - self.hold
            out += redacted[:split]
            self.pending = redacted[split:]
        return out

    def flush(self):
        out, self.pending = (self._redact(self.pending) if self.pending else b""), b""
        return out


def write_all(fd, data, state):
    """Write to stdout; once the journal's end of the pipe is gone, drop output but keep serving."""
    if state["broken"] or not data:
        return
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError:
        state["broken"] = True


def read_secrets(paths):
    secrets = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                values = parse_secret_config(fh.read())
        except (OSError, ValueError, UnicodeDecodeError) as err:
            # The message names the file and the line, never its content: parse_secret_config's
            # words carry the line number only; a decode error's text would show a byte of it.
            if isinstance(err, OSError):
                reason = err.strerror
            elif isinstance(err, UnicodeDecodeError):
                reason = f"not UTF-8 text (at byte {err.start})"
            else:
                reason = str(err)
            hint = ""
            if isinstance(err, (PermissionError, FileNotFoundError)) and path.startswith("/run/credentials/"):
                hint = (
                    " (systemd did not hand the unit its LoadCredential= credential: inside a container, "
                    "systemd needs / to be a shared mount, `mount --make-rshared /`, as it makes it on a real host)"
                )
            sys.stderr.write(f"sglang_launcher: cannot read the secrets in {path}: {reason}{hint}\n")
            sys.exit(EX_CONFIG)
        secrets.extend(values.values())
    return secrets


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="sglang_launcher.py",
        description="Run COMMAND with the secrets in FILE masked in its output.",
        usage="%(prog)s [--secrets FILE]... -- COMMAND [ARG...]",
    )
    parser.add_argument("--secrets", action="append", default=[], metavar="FILE")
    if "--" not in argv:
        parser.error("give the command after --")
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    args.command = argv[cut + 1 :]
    if not args.command:
        parser.error("give the command after --")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    lines = LineFilter(read_secrets(args.secrets))
    out_fd = sys.stdout.fileno()
    state = {"broken": False, "child": None, "pending_signals": []}

    def forward(signum, _frame):
        child = state["child"]
        if child is None:
            state["pending_signals"].append(signum)
        elif child.poll() is None:
            child.send_signal(signum)

    for name in FORWARDED:
        signal.signal(getattr(signal, name), forward)

    try:
        child = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True)
    except OSError as err:
        sys.stderr.write(f"sglang_launcher: cannot start {args.command[0]}: {err.strerror}\n")
        return 127 if isinstance(err, FileNotFoundError) else 126
    state["child"] = child
    for signum in state.pop("pending_signals"):
        child.send_signal(signum)

    pipe = child.stdout.fileno()
    deadline = None  # set when the server has exited: read what its children still write, briefly
    while True:
        if deadline is None and child.poll() is not None:
            deadline = time.monotonic() + DRAIN_S
        timeout = 0.5 if deadline is None else deadline - time.monotonic()
        if timeout <= 0:
            break
        ready, _w, _x = select.select([pipe], [], [], timeout)
        if not ready:
            continue
        data = os.read(pipe, 65536)
        if not data:
            break
        write_all(out_fd, lines.feed(data), state)
    write_all(out_fd, lines.flush(), state)
    child.stdout.close()
    return exit_like(child.wait())


def exit_like(status):
    """Die of the server's signal (so that systemd records the server's own end), else its status."""
    if status >= 0:
        return status
    signum = -status
    try:
        signal.signal(signum, signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # SIGKILL and SIGSTOP cannot be caught anyway
    os.kill(os.getpid(), signum)
    return 128 + signum  # a signal whose default action is not to end the process


if __name__ == "__main__":
    sys.exit(main())
