# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Where SGLang's secrets show up, and the one way they are masked.

SGLang prints its whole resolved argument record, ``api_key`` included, in its start-up line
(``sglang/srt/entrypoints/engine.py``: ``logger.info(f"{server_args=}")``, a ``ServerArgs(...)`` repr,
in 0.5.9; ``logger.info(f"server_args={_server_args_for_logging(server_args)}")``, a dict repr with
only the watermark keys masked, in 0.5.23; sgl-project/sglang#37457, open) and serves it from
``/server_info``; 0.5.23 also serves
``launch_command``, the argument list after ``--config FILE.yaml`` was merged into it
(``prepare_server_args`` in ``sglang/srt/server_args.py``), so a key delivered in that file is
there too. This file is the one definition of which fields and flags carry secrets, of the
forms a secret takes in text (raw, in a Python repr with either quote, in JSON) and of the mask.

Three users, one copy:
- the launcher the sglang_server role installs on the host, which filters the server's
  stdout/stderr before it reaches the journal (``roles/sglang_server/files/sglang_launcher.py``;
  the role copies this file next to it);
- the ``sglang_ready`` module's log tail and messages (through ``sglang_log.redact``);
- the ``/server_info`` parser, shared by the module and the tuner (``sglang_server_info``).

Standard library only, Python 3.8 syntax (it runs on managed hosts), no imports from this package.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable
from urllib.parse import quote as _url_quote

__all__ = [
    "MASK",
    "SECRET_FIELDS",
    "SECRET_FLAGS",
    "is_secret_field",
    "secret_forms",
    "redact_text",
    "redact_argv",
    "redact_command_line",
    "redact_fields",
    "parse_secret_config",
]

# SGLang's own mask (sglang/srt/sampling/watermarking/core.py, 0.5.23) and the tuner's.
MASK = "<redacted>"

# Server-argument fields that hold secrets:
# - api_key, admin_api_key: ServerArgs in sglang/srt/server_args.py (0.5.9) and
#   sglang/srt/arg_groups/fields/serving.py (0.5.23); printed in server_args= and /server_info.
# - ssl_keyfile_password: serving.py (0.5.23).
# - watermark_key, watermark_key_b, watermark_config: WATERMARK_SECRET_FIELD_NAMES in
#   sglang/srt/sampling/watermarking/core.py (0.5.23), which SGLang masks itself; listed so a build
#   that does not is covered too.
SECRET_FIELDS = frozenset(
    {"api_key", "admin_api_key", "ssl_keyfile_password", "watermark_key", "watermark_key_b", "watermark_config"}
)
# Names that look secret in any build (a field added later, a nested config): matched on the
# last words of a snake_case name. "token" alone is not one of them: SGLang has many *_token
# fields that are counts (bucket_time_to_first_token, kt_max_deferred_experts_per_token).
_SECRET_NAME_RE = re.compile(
    r"(?:^|_)(?:api_key|password|passwd|secret|secret_key|access_key|private_key|auth_token|hf_token|credentials?)$"
)
# The command-line flags of the secret fields (argparse spells dest a_b as --a-b).
SECRET_FLAGS = tuple(sorted("--" + name.replace("_", "-") for name in SECRET_FIELDS))


def is_secret_field(name: Any) -> bool:
    """Whether a server-argument (or JSON) field of this name holds a secret."""
    if not isinstance(name, str):
        return False
    norm = name.strip().lower().replace("-", "_")
    return norm in SECRET_FIELDS or bool(_SECRET_NAME_RE.search(norm))


def _py_escape(text: str, quote: str) -> str:
    """The body of ``repr(text)`` when Python chose ``quote`` as the delimiter.

    repr picks the quote itself (double only when the text has a single quote and no double
    one), but a string repr'd inside a larger one takes the outer string's choice, so both
    bodies are needed.
    """
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == quote:
            out.append("\\" + quote)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif not ch.isprintable():
            out.append(repr(ch)[1:-1])
        else:
            out.append(ch)
    return "".join(out)


def secret_forms(secret: str) -> list[str]:
    """Every spelling of ``secret`` a log line can carry, longest first.

    Raw; the body of a Python repr with single or double quotes (``server_args=ServerArgs(...,
    api_key='...')``); the body of a JSON string, ASCII-escaped or not; URL-encoded. Longest first,
    so that a form that contains another is masked whole.
    """
    if not secret:
        return []
    forms = {
        secret,
        _py_escape(secret, "'"),
        _py_escape(secret, '"'),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        _url_quote(secret, safe=""),
    }
    return sorted((f for f in forms if f), key=lambda f: (-len(f), f))


# name='value' / name="value" / "name": "value" / 'name': 'value' (repr, dict repr, JSON)
_KV_RE = re.compile(
    r"(?P<k>(?P<kq>['\"]?)(?P<name>\b\w+)(?P=kq)\s*[=:]\s*)(?P<q>['\"])(?P<v>(?:\\.|(?!(?P=q)).)*)(?P=q)"
)
_FLAG_RE = re.compile(r"(?P<k>(?P<flag>--[a-z0-9-]+)(?:=|\s+))(?P<v>[^\s'\",)\]}]+)")
_BEARER_RE = re.compile(r"(?P<k>\bBearer\s+)(?P<v>[^\s'\",]+)")
# '--api-key', 'X' (the repr of an argument list)
_ARGV_RE = re.compile(
    r"(?P<k>(?P<fq>['\"])(?P<flag>--[a-z0-9-]+)(?P=fq),\s*)(?P<q>['\"])(?P<v>(?:\\.|(?!(?P=q)).)*)(?P=q)"
)


def _kv_sub(m: Any) -> str:
    if not is_secret_field(m.group("name")):
        return str(m.group(0))
    return str(m.group("k") + m.group("q") + MASK + m.group("q"))


def _flag_sub(m: Any) -> str:
    if m.group("flag") not in SECRET_FLAGS:
        return str(m.group(0))
    return str(m.group("k") + MASK)


def _argv_sub(m: Any) -> str:
    if m.group("flag") not in SECRET_FLAGS:
        return str(m.group(0))
    return str(m.group("k") + m.group("q") + MASK + m.group("q"))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask ``secrets`` in every form they take, and any value that a secret field or flag holds.

    The second part catches keys the caller does not know (``api_key='...'`` in a ``server_args=``
    line, ``--api-key X``, ``"api_key": "..."``, ``Bearer X``).
    """
    if not text:
        return text
    forms: list[str] = []
    for secret in secrets:
        if secret:
            forms.extend(secret_forms(secret))
    for form in sorted(set(forms), key=lambda f: (-len(f), f)):
        if form in text:
            text = text.replace(form, MASK)
    text = _KV_RE.sub(_kv_sub, text)
    text = _ARGV_RE.sub(_argv_sub, text)
    text = _FLAG_RE.sub(_flag_sub, text)
    return _BEARER_RE.sub(lambda m: m.group("k") + MASK, text)


def redact_argv(argv: Iterable[Any]) -> list[Any]:
    """An argument list with the value of every secret flag masked (``--api-key X``, ``--api-key=X``)."""
    out: list[Any] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        text = arg if isinstance(arg, str) else ""
        name, eq, _value = text.partition("=")
        if name in SECRET_FLAGS:
            if eq:
                out.append(name + "=" + MASK)
            else:
                out.append(arg)
                mask_next = True
            continue
        out.append(arg)
    return out


def redact_command_line(text: str) -> str:
    """0.5.23's ``launch_command`` (the argument list joined with blanks) with secret flag values masked."""
    return " ".join(str(a) for a in redact_argv(text.split(" ")))


def redact_fields(value: Any) -> Any:
    """A copy of a decoded JSON body (``/server_info``) with every secret field's value masked.

    Nested dicts and lists are walked; ``launch_command`` (a string or an argument list) has its
    secret flag values masked; ``None`` stays ``None``, so a reader can still tell whether a key
    is configured.
    """
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if is_secret_field(key) and item is not None:
                out[key] = MASK
            elif key == "launch_command" and isinstance(item, str):
                out[key] = redact_command_line(item)
            elif key == "launch_command" and isinstance(item, list):
                out[key] = redact_argv(item)
            else:
                out[key] = redact_fields(item)
        return out
    if isinstance(value, list):
        return [redact_fields(item) for item in value]
    return value


_CONFIG_LINE_RE = re.compile(r"^(?P<name>[a-z][a-z0-9-]*):\s*(?P<value>\".*\")\s*$")


def parse_secret_config(text: str) -> dict[str, str]:
    """The ``name: "value"`` lines of the server config the sglang_server role writes.

    The role writes SGLang's ``--config`` YAML file with one flag per line and every value a
    JSON string (``templates/sglang.secrets.yaml.j2``; JSON strings are YAML double-quoted
    scalars, so SGLang's ``yaml.safe_load`` reads the same values). Raises ValueError, naming the
    line number only, for anything else, so that a launcher cannot silently run unfiltered.
    """
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _CONFIG_LINE_RE.match(stripped)
        value = None
        if m:
            try:
                value = json.loads(m.group("value"))
            except ValueError:
                value = None
        if not isinstance(value, str):
            raise ValueError(f'line {number} is not `name: "value"` as the sglang_server role writes it')
        values[m.group("name")] = value  # type: ignore[union-attr]
    return values
