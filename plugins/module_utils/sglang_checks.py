"""The sglang_server role's input checks that are not about one flag: strict parsing of numbers
and booleans (`-e spec_steps=3` arrives as a string), API keys, and every path-forming, name and
version variable, so that nothing is written to a host before all of them are known to be safe.

Standard library only; Ansible is not imported. The role reaches these through the filters of
plugins/filter/sglang_flags.py; the tuner imports them as `sglang_utils.sglang_checks`.
"""

from __future__ import annotations

import math
import posixpath
import re
from typing import Any

from . import sglang_releases as _releases

# A key travels as `Authorization: Bearer <key>` (SGLang 0.5.23 compares it with
# secrets.compare_digest, which refuses non-ASCII text) and reaches argparse as the value of
# --api-key, where a leading '-' would read as a flag; the launcher masks it wherever it appears in
# the log, which a very short key would turn into noise.
# the first release whose wheel's base requirements carry the engine (torch, the kernels): before,
# they are its `srt` extra (sglang 0.4.10 and 0.5.2 METADATA; 0.5.3's base pins torch==2.8.0)
SRT_IN_BASE_SINCE = "0.5.3"
API_KEY_MIN = 8
API_KEY_MAX = 4096


_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def is_unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def parse_whole_number(value: Any) -> int | None:
    """Strict integer parsing: ints and decimal-integer strings only.

    Why strict: `-e spec_steps=1.5` must not become 1, and YAML/JSON booleans are not numbers.
    Returns None when the value is not a whole number.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        return int(value.strip())
    return None


def parse_number(value: Any) -> float | None:
    """Strict real-number parsing for fractions and seconds (no booleans, no nan/inf)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str) and _FLOAT_RE.match(value.strip()):
        out = float(value.strip())
    else:
        return None
    return out if math.isfinite(out) else None


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


def parse_bool(value: Any) -> bool | None:
    """Booleans as YAML and `-e name=false` (a string) spell them; None when it is neither."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return None


def fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _range_text(lo: float | None, hi: float | None, exclusive_lo: bool, kind: str) -> str:
    noun = "a whole number" if kind == "int" else "a number"
    if lo is not None and hi is not None:
        if exclusive_lo:
            return f"{noun} above {lo:g} and at most {hi:g}"
        return f"{noun} from {lo:g} to {hi:g}"
    if lo is not None:
        return f"{noun} above {lo:g}" if exclusive_lo else f"{noun} of at least {lo:g}"
    return noun


def check_number(
    name: str, value: Any, kind: str, lo: float | None, hi: float | None, exclusive_lo: bool = False, hint: str = ""
) -> tuple[float | int | None, str | None]:
    """Parse one numeric setting; return (value, None) or (None, message naming the variable)."""
    parsed: float | int | None = parse_whole_number(value) if kind == "int" else parse_number(value)
    ok = parsed is not None
    if parsed is not None and lo is not None:
        ok = parsed > lo if exclusive_lo else parsed >= lo
    if parsed is not None and hi is not None:
        ok = ok and parsed <= hi
    if ok:
        return parsed, None
    msg = f"{name} must be {_range_text(lo, hi, exclusive_lo, kind)}{hint}; got {fmt(value)}"
    return None, msg


def api_key_error(name: str, key: Any) -> str | None:
    """Why `key` cannot be an API key (a message naming `name`, never quoting the key), or None.

    Empty means no key. A key is one word of printable ASCII (see API_KEY_MIN above for why), so
    that it works over HTTP, survives SGLang's `--config` merge as one argparse value, and is
    masked in the log without masking ordinary text.
    """
    if key is None or key == "":
        return None
    if not isinstance(key, str):
        return f"{name} must be a string (from Ansible Vault or SGLANG_API_KEY)"
    if any(c in key for c in "\n\r"):
        return f"{name} must be one line: it has a line break (keys are sent as `Authorization: Bearer <key>`)"
    if any(not (0x21 <= ord(c) <= 0x7E) for c in key):
        return (
            f"{name} must be printable ASCII without blanks or control characters "
            "(keys are sent as `Authorization: Bearer <key>`)"
        )
    if key.startswith("-"):
        return (
            f"{name} must not start with '-': SGLang turns its --config file into command-line arguments, "
            "where argparse would read the key as a flag"
        )
    if not API_KEY_MIN <= len(key) <= API_KEY_MAX:
        return f"{name} must have {API_KEY_MIN} to {API_KEY_MAX} characters; it has {len(key)}"
    return None


# --------------------------------------------------------------------------------------------
# Paths, names and versions (before any host is touched)
# --------------------------------------------------------------------------------------------

# systemd.unit(5) "unit names": letters, digits, ':', '_', '.', '-' and one '@' before an instance;
# '\' escapes are refused too (the stem also names files and the journal identifier).
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.-]+(@[A-Za-z0-9:_.-]+)?\.service$")
# useradd(8)'s portable names (Debian's default NAME_REGEX without the trailing '$').
_NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# Host paths that go into unit-file directives (WorkingDirectory=, ReadWritePaths=, EnvironmentFile=,
# LoadCredential=) and into `install`/`mkdir`: no blanks (ReadWritePaths= splits on them), no '%'
# (systemd specifiers), no quotes, backslashes or control characters.
_HOST_PATH_RE = re.compile(r"^(/[A-Za-z0-9._@+,:=~-]+)+$")
# PEP 440 public versions as pip takes them for `sglang==X` (0.5.9, 0.5.10rc0, 0.5.5.post3, 1.0.dev2).
_VERSION_RE = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")
_DEVICE_RE = re.compile(r"^[A-Za-z0-9/_.:*-]+( [rwm]{1,3})?$")
_DIRECTIVE_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# systemd's resource limits (LimitNOFILE=, LimitMEMLOCK=): a number (a size may carry K, M, G, ...;
# base 1024) or the word infinity, optionally soft:hard; any other word ("unlimited", "max") is
# ignored with a log line and the unit runs with the default limit (systemd's rlimit_parse).
# LimitNOFILE= is a count (no size suffix).
_LIMIT_RES = {
    key: re.compile(rf"^({one}(:{one})?)?$")
    for key, one in (("limit_nofile", r"(infinity|[0-9]+)"), ("limit_memlock", r"(infinity|[0-9]+[KMGTPE]?)"))
}
# Directories the role creates and chowns must not be a system directory (state_dir=/var/lib
# would hand /var/lib to the service user).
_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt"}
    | {"/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"}
    | {f"/usr/{d}" for d in ("bin", "etc", "games", "include", "lib", "lib32", "lib64", "libexec", "local", "sbin")}
    | {f"/usr/{d}" for d in ("share", "src")}
    | {f"/usr/local/{d}" for d in ("bin", "etc", "include", "lib", "sbin", "share", "src")}
    | {f"/var/{d}" for d in ("backups", "cache", "lib", "local", "lock", "log", "mail", "opt", "run", "spool", "tmp")}
    | {"/etc/systemd", "/etc/systemd/system", "/etc/default", "/etc/ssh", "/etc/sudoers.d", "/run/user"}
)
# Variables that name a path on the host, and whether the role creates/owns it (system dirs refused).
HOST_DIRS = ("install_dir", "venv_dir", "state_dir", "config_dir")
HOST_FILES = ("cuda_env_file", "python")
# Controller-side paths: absolute and normalised too (relative ones resolve against wherever
# ansible-playbook runs); the emulator profile is checked in server_errors (it may be relative).
CONTROLLER_DIRS = ("wheelhouse_dir", "emulator_wheelhouse_dir")


def _one_line(value: Any) -> bool:
    return isinstance(value, str) and not any(c in value for c in "\n\r\0")


def _under(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or inside it (both normalised)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def path_error(name: str, value: Any, strict: bool = True) -> str | None:
    """Why `value` is not an absolute, normalised path (with only `_HOST_PATH_RE` characters when strict)."""
    if not isinstance(value, str) or value.strip() == "":
        return f"{name} must be an absolute path; got {fmt(value)}"
    if not _one_line(value):
        return f"{name} must be one line (an absolute path); got {fmt(value)}"
    if not value.startswith("/"):
        return f"{name} must be an absolute path; got {fmt(value)}"
    if posixpath.normpath(value) != value or value.startswith("//"):
        return (
            f"{name} must be a normalised absolute path (no '..', '.', '//' or trailing '/'); "
            f"got {fmt(value)}, did you mean {posixpath.normpath('/' + value.lstrip('/'))!r}?"
        )
    if strict and not _HOST_PATH_RE.fullmatch(value):
        return (
            f"{name} may hold only letters, digits and . _ @ + , : = ~ - between its slashes "
            f"(it goes into the unit file); got {fmt(value)}"
        )
    return None


def host_errors(settings: dict[str, Any]) -> list[str]:
    """Check every path-forming, name and version variable (keys without `sglang_server_`).

    These name files the role writes as root (`<config_dir>/<unit stem>.env`, the unit under
    /etc/systemd/system, `last-good/<stem>/`) and lines of the unit file, so they are checked
    before any host is contacted: `-e sglang_server_unit_name=../../etc/passwd` must never reach a
    `mkdir`.
    """
    errors: list[str] = []
    unit = settings.get("unit_name")
    if (
        not isinstance(unit, str)
        or not _UNIT_RE.fullmatch(unit)
        or ".." in unit
        or len(unit) > 255
        or "@.service" in unit
    ):
        errors.append(
            "sglang_server_unit_name must be a systemd service name such as sglang-qwen.service (letters, digits "
            f"and : _ . -, optionally one @instance, ending in .service; no '/' or '..'); got {fmt(unit)}"
        )

    for key in ("user", "group"):
        value = settings.get(key)
        if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
            errors.append(
                f"sglang_server_{key} must be a user/group name (lower-case letters, digits, _ and -, "
                f"at most 32); got {fmt(value)}"
            )
        elif value == "root":
            errors.append(f"sglang_server_{key} must not be root: the server runs as a dedicated system account")
    groups = settings.get("user_groups")
    if not isinstance(groups, list):
        errors.append(f"sglang_server_user_groups must be a list of group names; got {fmt(groups)}")
    else:
        for value in groups:
            if not isinstance(value, str) or not _NAME_RE.fullmatch(value) or value == "root":
                errors.append(f"sglang_server_user_groups: {fmt(value)} is not a group name (or is root)")

    paths: dict[str, str] = {}
    for key in HOST_DIRS + HOST_FILES:
        err = path_error(f"sglang_server_{key}", settings.get(key))
        if err:
            errors.append(err)
        else:
            paths[key] = settings[key]
    for key in HOST_DIRS:
        if key in paths and paths[key] in _SYSTEM_DIRS:
            errors.append(
                f"sglang_server_{key} must be a directory of its own (the role creates it and sets its owner "
                f"and mode), not the system directory {paths[key]}"
            )
    state = paths.get("state_dir")
    if state:
        for key in ("install_dir", "venv_dir", "config_dir"):
            if key in paths and _under(paths[key], state):
                errors.append(
                    f"sglang_server_{key} must not be inside sglang_server_state_dir ({state}), which the service "
                    "user owns: root installs and reads what is there"
                )
    rw = settings.get("read_write_paths")
    if not isinstance(rw, list):
        errors.append(f"sglang_server_read_write_paths must be a list of absolute paths; got {fmt(rw)}")
    else:
        for i, value in enumerate(rw):
            err = path_error(f"sglang_server_read_write_paths[{i}]", value)
            if err:
                errors.append(err)

    for key in ("model_path", "spec_draft_model_path"):
        value = settings.get(key)
        if key == "spec_draft_model_path" and is_unset(value):
            continue
        if is_unset(value):
            continue  # server_errors says the model path is required
        err = path_error(f"sglang_server_{key}", value, strict=False)
        if err:
            errors.append(err)

    for key in CONTROLLER_DIRS:
        value = settings.get(key)
        if is_unset(value):
            continue
        err = path_error(f"sglang_server_{key}", value, strict=False)
        if err:
            errors.append(err + " (a directory on the controller)")

    version = settings.get("sglang_version")
    if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
        errors.append(
            "sglang_server_sglang_version must be a release version such as 0.5.9 (PEP 440: N.N[.N...] with "
            f"optional aN/bN/rcN, .postN, .devN); got {fmt(version)}"
        )
    packages = settings.get("pip_packages")
    if not isinstance(packages, list) or not packages:
        errors.append(f"sglang_server_pip_packages must be a non-empty list of requirements; got {fmt(packages)}")
    elif (
        settings.get("engine") == "sglang"
        and isinstance(version, str)
        and _releases.release_key(version)
        and _releases.release_key(version) < _releases.release_key(SRT_IN_BASE_SINCE)
        and f"sglang=={version}" in [str(p).strip() for p in packages]
    ):
        # before 0.5.3 the engine's runtime (torch, the kernels, fastapi) is the `srt` extra
        # (0.4.10 and 0.5.2 wheels' METADATA): a plain pin installs a client that cannot serve
        errors.append(
            f"sglang_server_pip_packages installs sglang=={version}, which before {SRT_IN_BASE_SINCE} holds no "
            f'engine (its runtime is the srt extra); allowed: ["sglang[srt]=={version}"] or a release from '
            f"{SRT_IN_BASE_SINCE}"
        )
    else:
        for value in packages:
            if not _one_line(value) or not value.strip():
                errors.append(f"sglang_server_pip_packages: {fmt(value)} is not a one-line requirement")
            elif value.strip().startswith("-"):
                errors.append(
                    f"sglang_server_pip_packages: {fmt(value)} is a pip option, not a requirement: "
                    "put options in sglang_server_pip_extra_args"
                )

    served = settings.get("served_model_name")
    if served is not None and not _one_line(str(served)):
        errors.append("sglang_server_served_model_name must be one line (it is in the unit's Description=)")
    devices = settings.get("device_allow")
    if not isinstance(devices, list):
        errors.append(f"sglang_server_device_allow must be a list like ['char-nvidia rw']; got {fmt(devices)}")
    else:
        for value in devices:
            if not isinstance(value, str) or not _DEVICE_RE.fullmatch(value):
                errors.append(
                    f"sglang_server_device_allow: {fmt(value)} is not a DeviceAllow= value like 'char-nvidia rw'"
                )
    extra = settings.get("unit_extra")
    if not isinstance(extra, dict):
        errors.append(f"sglang_server_unit_extra must be a mapping of directive to value; got {fmt(extra)}")
    else:
        for name, value in extra.items():
            values = value if isinstance(value, list) else [value]
            if not isinstance(name, str) or not _DIRECTIVE_RE.fullmatch(name):
                errors.append(f"sglang_server_unit_extra: {fmt(name)} is not a directive name like CPUAffinity")
            elif any(isinstance(v, (dict, list)) or not _one_line(str(v)) for v in values):
                errors.append(f"sglang_server_unit_extra: the value of {name} must be one line (or a list of lines)")
    for key in ("limit_nofile", "limit_memlock"):
        value = settings.get(key)
        if value is not None and not _LIMIT_RES[key].fullmatch(str(value)):
            errors.append(
                f"sglang_server_{key} must be a number"
                + (" (K, M, G, ... for a size)" if key == "limit_memlock" else "")
                + f", 'infinity' or empty, optionally soft:hard; got {fmt(value)}"
            )
    return errors


def emulator_version_errors(settings: dict[str, Any]) -> list[str]:
    """The emulator plays the SGLang release the role installs (sglang_server_sglang_version,
    passed as --emulator-sglang-version); a release it does not model fails here, before the host."""
    version = settings.get("sglang_version")
    if settings.get("engine") != "emulator" or is_unset(version):
        return []
    text = str(version).strip()
    base = ".".join(str(n) for n in _releases.release_key(text)[:3])
    if text in _releases.EMULATED_RELEASES or (base in _releases.EMULATED_RELEASES and text.startswith(base + ".post")):
        return []
    return [
        f"sglang_server_sglang_version={fmt(version)} is not emulated: with sglang_server_engine=emulator "
        f"use one of {', '.join(_releases.EMULATED_RELEASES)}"
    ]
