"""The one mapping from sglang_server role variables to `launch_server` flags.

Everything the unit template needs to decide lives here as pure functions, so that the mapping
is unit-tested without Ansible (tests/roles/test_sglang_flags_filter.py) and the template stays a
layout. The role calls these through the thin filter plugin plugins/filter/sglang_flags.py:

- node_settings (``sglang_node``): multi-node tensor parallelism (``--nnodes``/``--node-rank``/
  ``--dist-init-addr``) derived from an inventory group.
- server_errors (``sglang_server_errors``): every other input check of the server's flags and
  secrets, with messages that name the variable.
- server_flags (``sglang_flags``): the ordered flag list, one ``[flag, value...]`` entry per line
  of ExecStart.
- secret_config (``sglang_secret_config``): the lines of SGLang's ``--config`` YAML file that
  carries the API keys.
- systemd_exec_quote / systemd_env_assign: quoting for ExecStart and EnvironmentFile.

The spec_* rules are plugins/module_utils/sglang_spec.py, the path/name/version checks and the
strict parsers plugins/module_utils/sglang_checks.py. Standard library only; Ansible is not
imported.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from . import emulator_faults as _faults
from . import sglang_releases as _releases
from . import sglang_secrets as _secrets
from .sglang_checks import (
    api_key_error,
    check_number,
    emulator_version_errors,
    fmt,
    is_unset,
    parse_bool,
    parse_number,
    parse_whole_number,
)

# docs/architecture.md "Emulator": the faults the emulator understands. The table lives in
# plugins/module_utils/emulator_faults.py, which the emulator reads too; checking here fails a bad
# entry before the host is touched.
EMULATOR_FAULTS = _faults.FAULT_NAMES

# The ExecStart module per engine: the only line of the unit that differs between engines.
ENGINE_MODULES = {"sglang": "sglang.launch_server", "emulator": "tuner.emulator"}

# Role settings that map 1:1 onto a launch_server flag, in ExecStart order.
# kind: "str" (omitted when empty), "int"/"float" (omitted when None or ""), "bool" (bare flag).
FLAG_TABLE: tuple[tuple[str, str, str], ...] = (
    ("model_path", "--model-path", "str"),
    ("served_model_name", "--served-model-name", "str"),
    ("host", "--host", "str"),
    ("port", "--port", "int"),
    ("tp_size", "--tp-size", "int"),
    ("mem_fraction_static", "--mem-fraction-static", "float"),
    ("max_running_requests", "--max-running-requests", "int"),
    ("context_length", "--context-length", "int"),
    ("chunked_prefill_size", "--chunked-prefill-size", "int"),
    ("trust_remote_code", "--trust-remote-code", "bool"),
    ("enable_metrics", "--enable-metrics", "bool"),
    ("decode_log_interval", "--decode-log-interval", "int"),
    ("log_level", "--log-level", "str"),
    ("watchdog_timeout", "--watchdog-timeout", "float"),
    ("skip_server_warmup", "--skip-server-warmup", "bool"),
)

# Numeric settings: (kind, minimum, maximum, exclusive-minimum). None = unbounded.
NUMERIC_LIMITS: dict[str, tuple[str, float | None, float | None, bool]] = {
    "port": ("int", 1, 65535, False),
    "tp_size": ("int", 1, 4096, False),
    "mem_fraction_static": ("float", 0.0, 1.0, True),
    "max_running_requests": ("int", 1, None, False),
    "context_length": ("int", 1, None, False),
    # -1 turns chunked prefill off in SGLang (server_args.py --chunked-prefill-size help).
    "chunked_prefill_size": ("int", -1, None, False),
    "decode_log_interval": ("int", 1, None, False),
    "watchdog_timeout": ("float", 0.0, None, True),
    "emulator_startup_s": ("float", 0.0, None, False),
    "dist_init_port": ("int", 1, 65535, False),
    # seconds the ranks wait for each other (SGLang's --dist-timeout, type=int); 0 or less can
    # never form a group
    "dist_timeout": ("int", 0, None, True),
    # the gate (sglang_ready), which refuses them itself only once the unit is written
    "gate_timeout": ("float", 0.0, None, True),
    "gate_interval": ("float", 0.0, None, True),
    # the unit's timers and start limits: systemd ignores a negative value with one log line and
    # keeps its default (0 is its own "off" or "no wait")
    "restart_sec": ("int", 0, None, False),
    "start_limit_burst": ("int", 0, None, False),
    "start_limit_interval_sec": ("int", 0, None, False),
    "timeout_start_sec": ("int", 0, None, False),
    "timeout_stop_sec": ("int", 0, None, False),
    "worker_timeout_stop_sec": ("int", 0, None, False),
}

# The API keys reach the server in SGLang's own `--config FILE.yaml` (its keys become flags,
# sglang/srt/server_args_config_parser.py ConfigArgumentMerger, 0.5.9; sglang/srt/utils/ in 0.5.23),
# never on the command line, which every local user reads in /proc/PID/cmdline. Role variable ->
# the file's key (= the flag without dashes).
SECRET_SETTINGS: dict[str, str] = {"api_key": "api-key", "admin_api_key": "admin-api-key"}
# Flags a user may not pass through sglang_server_extra_flags, with the variable that owns them.
MANAGED_FLAGS: dict[str, str] = {row[1]: f"sglang_server_{row[0]}" for row in FLAG_TABLE}
MANAGED_FLAGS.update(
    {
        "--api-key": "sglang_server_api_key",
        "--admin-api-key": "sglang_server_admin_api_key",
        "--config": "sglang_server_api_key (the role passes its own --config file, and SGLang takes only one)",
        "--speculative-algorithm": "spec_algorithm",
        "--speculative-algo": "spec_algorithm",
        "--speculative-num-steps": "spec_steps",
        "--speculative-eagle-topk": "spec_topk",
        "--speculative-num-draft-tokens": "spec_draft_tokens",
        "--speculative-draft-model-path": "sglang_server_spec_draft_model_path",
        "--speculative-draft-model": "sglang_server_spec_draft_model_path",
        "--speculative-adaptive": "spec_schedule",
        "--speculative-adaptive-config": "spec_schedule",
        "--nnodes": "sglang_server_multinode_group",
        "--node-rank": "sglang_server_multinode_group",
        "--dist-init-addr": "sglang_server_multinode_group",
        # the same argparse destination as --dist-init-addr (0.5.9-0.5.12 declare both spellings on
        # one add_argument, 0.5.23 as an alias): the later one on the line would win
        "--nccl-init-addr": "sglang_server_multinode_group",
        "--emulator-profile": "sglang_server_emulator_profile",
        "--emulator-startup-s": "sglang_server_emulator_startup_s",
        "--emulator-fault": "sglang_server_emulator_faults",
        "--emulator-sglang-version": "sglang_server_sglang_version",
        "--tensor-parallel-size": "sglang_server_tp_size",
        "--tp": "sglang_server_tp_size",
    }
)

# SGLang flags whose value is a secret but that the role has no variable for (0.5.23's
# --ssl-keyfile-password; --watermark-config may hold the watermark keys inline): passed as extra
# flags they would sit in the process's command line for every local user to read.
SECRET_FLAGS_UNSUPPORTED = tuple(flag for flag in _secrets.SECRET_FLAGS if flag not in MANAGED_FLAGS)
# SGLang's parser takes a unique prefix of a flag (argparse's allow_abbrev; facts: --speculative-algo
# works), so "--api" sets --api-key and "--speculative-num-step" --speculative-num-steps. A whole
# flag of its own that happens to begin a guarded one is not an abbreviation (argparse takes an
# exact match first): of 0.5.9-0.5.23's flags, only --ssl-keyfile (of --ssl-keyfile-password).
_WHOLE_FLAGS_BEGINNING_GUARDED = frozenset(["--ssl-keyfile"])


# Which GPUs a process sees: cuda_env's to set (roles/cuda_env, cuda_env_cuda_env), where the GPU
# preflight and the NCCL check read them.
_GPU_SELECTION_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")


def extra_flag_errors(extra: Any) -> list[str]:
    """What is wrong with `sglang_server_extra_flags` (the role's preflight and the tuner's -e check
    both ask): names, a managed flag or a secret one, or an abbreviation of either, values."""
    errors: list[str] = []
    if not isinstance(extra, dict):
        return [f"sglang_server_extra_flags must be a mapping of flag name to value; got {type(extra).__name__}"]
    for name, value in extra.items():
        if not isinstance(name, str) or not _FLAG_RE.fullmatch(name.strip()):
            errors.append(f"sglang_server_extra_flags: {fmt(name)} is not a flag name like 'attention-backend'")
            continue
        flag = normalise_flag(name)
        whole = abbreviates(flag)
        if whole is not None:
            errors.append(
                f"sglang_server_extra_flags must not set {flag}: SGLang reads it as {whole} (a flag may be "
                "shortened to any unique prefix), "
                + (f"use {MANAGED_FLAGS[whole]}" if whole in MANAGED_FLAGS else "whose value is a secret")
            )
        elif flag in MANAGED_FLAGS:
            errors.append(f"sglang_server_extra_flags must not set {flag}: use {MANAGED_FLAGS[flag]}")
        elif flag in SECRET_FLAGS_UNSUPPORTED:
            errors.append(
                f"sglang_server_extra_flags must not set {flag}: its value is a secret, and extra flags are "
                "on the server's command line, which every local user can read in /proc"
            )
        if isinstance(value, dict):
            errors.append(
                f"sglang_server_extra_flags: the value of {flag} must be a string, number, true/false or a list"
            )
        elif any(
            isinstance(v, str) and ("\r" in v or "\0" in v) for v in (value if isinstance(value, list) else [value])
        ):
            # systemd reads a carriage return as the end of the line (the unit would not load)
            errors.append(f"sglang_server_extra_flags: the value of {flag} must not hold a carriage return or NUL")
        else:
            # each value is a word of its own on the command line: one that starts with a dash is a
            # flag to SGLang's parser, which would let a list smuggle in a managed or secret flag
            # (`cuda-graph-bs: [1, 2, --api-key, KEY]` puts the key on the command line)
            dashed = [v for v in (value if isinstance(value, list) else [value]) if _looks_like_option(v)]
            if dashed:
                errors.append(
                    f"sglang_server_extra_flags: the value of {flag} must not hold {fmt(str(dashed[0]).split('=', 1)[0])}: SGLang's "
                    "parser reads a word starting with '-' as a flag of its own (a negative number is fine)"
                )
    return errors


# argparse's own test of a negative number (Lib/argparse.py `_negative_number_matcher`, 3.8-3.12; 3.13 takes more):
# anything else starting with '-' is read as an option ('-1e-3' and '-1.' are)
_NUMBER_RE = re.compile(r"-\d+|-\d*\.\d+")


def _looks_like_option(value: Any) -> bool:
    """A value word that argparse would take for an option: a string starting with '-' that is not
    a negative number."""
    return isinstance(value, str) and value.strip().startswith("-") and not _NUMBER_RE.fullmatch(value.strip())


def abbreviates(flag: str) -> str | None:
    """The managed or secret flag that `flag` would be read as by SGLang's parser, if any."""
    if flag in MANAGED_FLAGS or flag in SECRET_FLAGS_UNSUPPORTED or flag in _WHOLE_FLAGS_BEGINNING_GUARDED:
        return None
    return next((g for g in sorted([*MANAGED_FLAGS, *SECRET_FLAGS_UNSUPPORTED]) if g.startswith(flag)), None)


_FLAG_RE = re.compile(r"^(--)?[a-z0-9][a-z0-9-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------------------------
# Multi-node tensor parallelism
# --------------------------------------------------------------------------------------------


def node_settings(
    hostname: str,
    group: Any = "",
    members: Iterable[str] | None = None,
    head_address: Any = "",
    dist_init_port: Any = 50000,
    dist_init_addr: Any = "",
) -> dict[str, Any]:
    """Derive --nnodes/--node-rank/--dist-init-addr from an inventory group.

    The group's order is the node order: its first host is rank 0 (the head, which serves HTTP);
    the others run schedulers only and answer /health from SGLang's dummy health server
    (sglang 0.5.9 entrypoints/engine.py:1040-1054). `head_address` is the address the other nodes
    reach the head at (the play passes the head's sglang_server_dist_init_host or ansible_host).
    """
    errors: list[str] = []
    out: dict[str, Any] = {
        "errors": errors,
        "nnodes": 1,
        "node_rank": 0,
        "dist_init_addr": None,
        "is_head": True,
        # rank 0's dist-init address when it is an IP: what its cross-node message queue binds
        # (the unit's SGLANG_HOST_IP, templates/sglang.env.j2)
        "host_ip": None,
    }
    if is_unset(group):
        return out
    members = list(members or [])
    if not members:
        errors.append(f"sglang_server_multinode_group={fmt(group)} is not an inventory group with hosts")
        return out
    if hostname not in members:
        errors.append(f"sglang_server_multinode_group={fmt(group)} does not contain this host ({hostname})")
        return out
    if len(members) == 1:
        return out
    addr = None if is_unset(dist_init_addr) else str(dist_init_addr).strip()
    if addr is None:
        port, err = check_number("sglang_server_dist_init_port", dist_init_port, "int", 1, 65535)
        if err:
            errors.append(err)
        if is_unset(head_address):
            errors.append(
                "the head of sglang_server_multinode_group has no address: set "
                "sglang_server_dist_init_host (or ansible_host) on it, or sglang_server_dist_init_addr"
            )
        elif port is not None:
            host = str(head_address).strip()
            addr = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    else:
        m = re.match(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$", addr)
        if not m or not 1 <= int(m.group(2)) <= 65535:
            # a port past 65535 got as far as the rendezvous, after every host had changed
            errors.append(f"sglang_server_dist_init_addr must be HOST:PORT, a port 1-65535; got {fmt(dist_init_addr)}")
    if addr is not None and _loopback(addr.rsplit(":", 1)[0]):
        # each node is a machine of its own (sglang_multinode.address_errors): the others would
        # connect to their own loopback and the rendezvous wait out its timeout, every host changed
        errors.append(
            f"rank 0's dist-init address {addr} is a loopback or unspecified address, which the other nodes of "
            f"sglang_server_multinode_group={fmt(group)} cannot reach: set sglang_server_dist_init_host on the head "
            "(an address of it the others reach), or sglang_server_dist_init_addr"
        )
    rank = members.index(hostname)
    out.update(nnodes=len(members), node_rank=rank, dist_init_addr=addr, is_head=rank == 0)
    if rank == 0 and addr:
        out["host_ip"] = _ip_literal(addr.rsplit(":", 1)[0])
    return out


_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def is_loopback(host: str) -> bool:
    """`host` (IPv6 in brackets or not) is a loopback address or name: only the machine itself
    reaches it (the tuner's check of a server's bind address uses this rule too)."""
    return _local_only(host, unspecified=False)


def _loopback(host: str) -> bool:
    """A loopback address or name, or the unspecified address (0.0.0.0, ::), which a node
    connecting to it takes as its own machine: no dist-init address for a group."""
    return _local_only(host, unspecified=True)


def _local_only(host: str, unspecified: bool) -> bool:
    text = host.strip().strip("[]").lower()
    if text in _LOOPBACK_NAMES or text.endswith(".localhost"):
        return True
    ip = _ip_literal(text)
    if ip is None:
        return False
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)
    return any(a.is_loopback or (unspecified and a.is_unspecified) for a in (addr, mapped) if a is not None)


def _ip_literal(host: str) -> str | None:
    """`host` as an IP address (IPv6 without its brackets), or None for a host name."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# The gate's URL: where the host itself reaches a server of given settings
# --------------------------------------------------------------------------------------------


def certfile_flag(extra: Any) -> str | None:
    """The flag of `extra` (sglang_server_extra_flags) that gives the server a certificate, or
    None: `--ssl-certfile` or a prefix argparse reads as it, with a value the unit passes (a false
    or empty one is left off the command line, server_flags). With it SGLang serves HTTPS only."""
    if not isinstance(extra, dict):
        return None
    for name, value in extra.items():
        flag = normalise_flag(name) if isinstance(name, str) else ""
        if _is_certfile(flag) and value is not False and not is_unset(value):
            return flag
    return None


def _is_certfile(flag: str) -> bool:
    # the shortest prefix that is no other flag's (`--ssl-c` is also --ssl-ca-certs')
    return flag.startswith("--ssl-ce") and "--ssl-certfile".startswith(flag)


def gate_address(host: Any) -> str:
    """The address, as a URL writes it, at which the host itself reaches a server bound to `host`.

    SGLang's own rule for its internal requests (`ServerArgs.url`, sgl-project/sglang
    python/sglang/srt/server_args.py, 0.5.23): every interface (0.0.0.0, empty) is reached at
    127.0.0.1 and `::` at ::1, since a server on `::` listens on IPv6 only (uvicorn under uvloop
    sets IPV6_V6ONLY: uvloop loop.pyx create_server); an IPv6 address is bracketed (RFC 3986)."""
    text = str(host if host is not None else "").strip()
    if text in ("", "0.0.0.0"):
        return "127.0.0.1"
    if text == "::":
        return "[::1]"
    return f"[{text}]" if ":" in text and not text.startswith("[") else text


def gate_url(host: Any, port: Any, tls: Any = False) -> str:
    """The gate's URL of a server bound to `host`:`port`, https when it has a certificate (the
    scheme of SGLang's `ServerArgs.url`): the default of sglang_server_gate_url, and what a rollback
    gates the restored unit at (restored_gate)."""
    return f"{'https' if tls else 'http'}://{gate_address(host)}:{str(port).strip()}"


def _exec_start_words(unit_text: str) -> list[str]:
    """The words of a unit file's ExecStart= (its continuation lines joined) as systemd splits them
    for the quoting systemd_exec_quote writes (double quotes, backslash escapes, `%%`)."""
    lines = unit_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("ExecStart=")), None)
    if start is None:
        return []
    text = lines[start][len("ExecStart=") :]
    i = start
    while text.endswith("\\") and i + 1 < len(lines):
        i += 1
        text = text[:-1] + " " + lines[i]
    words = re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', text)
    out = []
    for quoted, plain in words:
        word = (
            re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), quoted) if quoted else plain
        )
        out.append(word.replace("%%", "%").replace("$$", "$"))
    return out


def unit_listen(unit_text: Any) -> dict[str, Any] | None:
    """Where the server of a unit file the role wrote listens, read back from its ExecStart: its
    `--host` and `--port` (None for one it does not name: SGLang's default then) and whether it
    serves TLS (certfile_flag). None when the text has no ExecStart (nothing was read)."""
    words = _exec_start_words(str(unit_text or ""))
    if not words:
        return None
    if "--" in words:  # the launcher's own arguments end at `--` (files/sglang_launcher.py)
        words = words[words.index("--") + 1 :]
    found: dict[str, Any] = {"host": None, "port": None, "tls": False}
    for i, word in enumerate(words):
        flag, eq, inline = word.partition("=")
        value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
        if flag in ("--host", "--port"):
            found[flag[2:]] = value  # argparse: the last one wins
        elif _is_certfile(flag):
            found["tls"] = bool(value)
    return found


_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(\[[^\]]*\]|[^/:?#\[]*)(?::([0-9]+))?(.*)$", re.S)


def restored_gate(url: Any, host: Any, port: Any, extra_flags: Any, unit_text: Any) -> dict[str, Any]:
    """The gate of the unit a rollback restored (`unit_text`), from this run's gate `url` and the
    settings it was for (`host`, `port`, `extra_flags`): {url, validate_certs}.

    The restored unit is the configuration that last passed the gate, which may listen elsewhere
    or otherwise than this run's. A URL at this run's port names this run's server: each of its
    parts that is this run's is moved to the restored one's, by gate_url's rule (so the default URL
    becomes exactly gate_url of the restored unit): the scheme when the run turned TLS on or off,
    the address when it moved `--host`, the port when it moved `--port`; an address that is a name
    other than the run's `--host` (the certificate's) is kept. A URL at another port or none (a
    proxy in front) is the user's and kept whole. A URL this turns to https at a loopback address,
    or an https one whose address this moves to a loopback one or to an IP address (a run that
    bound the certificate's name, restoring a unit on every interface or on one IP), names no
    certificate's name and is probed without checking the certificate, as SGLang's own health
    checks of a TLS server without --ssl-ca-certs are (`ssl_verify_of`,
    python/sglang/srt/arg_groups/serving_hook.py, 0.5.23): the address is the restored unit's own
    bind address on the host that probes it, so the probe stays on that host, and what it asks is
    whether the server came back (its certificate passed that configuration's own gate). An
    address moved to a name (the restored unit bound one) is still checked."""
    text = str(url if url is not None else "").strip()
    listen = unit_listen(unit_text)
    m = _URL_RE.match(text)
    if listen is None or m is None:
        return {"url": text, "validate_certs": True}
    scheme, addr, url_port, rest = m.groups()
    if url_port is None or parse_whole_number(url_port) != parse_whole_number(port):
        return {"url": text, "validate_certs": True}
    run_tls = certfile_flag(extra_flags) is not None
    to_https = False
    if scheme.lower() == ("https" if run_tls else "http") and listen["tls"] != run_tls:
        scheme, to_https = ("https", True) if listen["tls"] else ("http", False)
    moved = False
    if listen["host"] is not None and addr.lower() == gate_address(host).lower():
        moved = addr.lower() != gate_address(listen["host"]).lower()
        addr = gate_address(listen["host"])
    new_port = parse_whole_number(listen["port"])
    url_port = str(new_port) if new_port is not None else url_port
    rewritten = ((to_https or moved) and is_loopback(addr)) or (moved and _ip_literal(addr) is not None)
    unchecked = scheme.lower() == "https" and rewritten
    return {"url": f"{scheme}://{addr}:{url_port}{rest}", "validate_certs": not unchecked}


def config_api_key(text: Any) -> str:
    """The API key (`api-key`) of a secrets file the role wrote (SGLang's --config file,
    templates/sglang.secrets.yaml.j2), read as the launcher reads it (sglang_secrets.
    parse_secret_config); '' for none or a file it cannot read, whose server then cannot start."""
    try:
        return _secrets.parse_secret_config(str(text or "")).get(SECRET_SETTINGS["api_key"], "")
    except ValueError:
        return ""


# --------------------------------------------------------------------------------------------
# Everything else
# --------------------------------------------------------------------------------------------


def normalise_flag(name: str) -> str:
    name = name.strip()
    return name if name.startswith("--") else f"--{name}"


def extra_switch_on(extra: Any, name: str) -> bool:
    """Whether sglang_server_extra_flags turns on the switch `name` (any spelling): `server_flags`
    writes a bare switch for the value true only (false or unset leave it out, any other value
    follows it as an argument, which a switch does not take)."""
    flag = normalise_flag(name)
    return isinstance(extra, dict) and any(
        isinstance(k, str) and normalise_flag(k) == flag and v is True for k, v in extra.items()
    )


def extra_value(extra: Any, names: Sequence[str]) -> Any:
    """The value `sglang_server_extra_flags` gives one of `names` (any spelling), None without."""
    if not isinstance(extra, dict):
        return None
    return next((value for key, value in extra.items() if normalise_flag(str(key)) in names), None)


def decode_graph_bs(extra: Any) -> list[int] | None:
    """The CUDA-graph batch sizes SGLang pads a running decode batch to before it routes it to an
    adaptive config's bucket: `--cuda-graph-bs-decode` as sglang_server_extra_flags gives it (0.5.14+
    pads only to a list given on the command line: speculative/eagle_worker_v2.py `init_states`,
    adaptive_spec_params.py `_pad_to_cuda_graph_bs`), or `--cuda-graph-bs`, its deprecated alias
    (0.5.16 server_args.py: `dest="cuda_graph_bs_decode"`; an ambiguous prefix from 0.5.20); None
    without one or with decode graphs off (`--disable-cuda-graph`, or 0.5.16+'s
    `--disable-decode-cuda-graph` and `--cuda-graph-backend-decode disabled`). Not modelled: 0.5.14
    and 0.5.15 have those two switches but still pad (their eagle_worker_v2.py reads
    `disable_cuda_graph` only), and 0.5.16+ also turn it off through `--cuda-graph-config`'s JSON."""
    if not isinstance(extra, dict) or any(
        extra_switch_on(extra, off) for off in ("--disable-cuda-graph", "--disable-decode-cuda-graph")
    ):
        return None
    backend = extra_value(extra, ("--cuda-graph-backend-decode",))
    if backend is not None and str(backend).strip().lower() == "disabled":
        return None
    value = extra_value(extra, ("--cuda-graph-bs-decode", "--cuda-graph-bs"))
    words = value if isinstance(value, list) else str(value).replace(",", " ").split() if value is not None else []
    sizes = [int(w) for w in words if not isinstance(w, bool) and str(w).strip().isdigit()]
    return sorted(set(sizes)) or None


_PATH_SPLIT = re.compile(r"[\s:=,]+")


def referenced_paths(extra_flags: Any, environment: Any = None) -> list[str]:
    """The absolute paths the server is handed outside the role's path variables: in the values of
    sglang_server_extra_flags and sglang_server_environment (a value, each item of a list, each
    part of a `name=path`, `a:b` or `a,b` value), e.g. `--tokenizer-path`, `--chat-template`,
    `--lora-paths name=/path`, HF_HOME. ProtectHome=auto and PrivateTmp= weigh them with the role's
    own paths (vars/main.yml): a tokenizer under /home was hidden inside the unit and its start
    failed."""
    out: list[str] = []

    def scan(value: Any) -> None:
        if isinstance(value, (list, tuple)):
            for item in value:
                scan(item)
        elif isinstance(value, str):
            out.extend(part for part in _PATH_SPLIT.split(value) if part.startswith("/"))

    for layer in (extra_flags, environment):
        if isinstance(layer, dict):
            for value in layer.values():
                scan(value)
    return out


def engine_module(engine: Any) -> str:
    """The Python module ExecStart runs for `engine` ('' for an unknown engine, which server_errors reports)."""
    return ENGINE_MODULES.get(str(engine), "")


def secret_config(settings: dict[str, Any]) -> list[str]:
    """The lines of SGLang's `--config` YAML file that carries the keys, one `flag: "value"` each.

    Values are JSON strings, which YAML reads as double-quoted scalars, so SGLang's
    yaml.safe_load and the launcher's sglang_secrets.parse_secret_config read the same text; a
    key like `true` or `0x1F` stays a string (a plain YAML scalar would turn it into a bool or an
    int, and SGLang would pass `--api-key true` / `31`). Empty when no key is set.
    """
    lines = []
    for key, flag in SECRET_SETTINGS.items():
        value = settings.get(key)
        if value:
            lines.append(f"{flag}: {json.dumps(str(value))}")
    return lines


def algorithm_release_errors(spec: Any, version: Any) -> list[str]:
    """An algorithm the release's --speculative-algorithm does not have (0.5.9/0.5.10 argparse
    choices; later releases look the name up at start): refused before any host changes, as
    SGLang would refuse it at start. Releases older than the table are not judged."""
    algo = spec.get("algorithm") if isinstance(spec, dict) and spec.get("enabled") else None
    key = _releases.release_key(version)
    if not algo or not key or key < _releases.release_key(_releases.SPEC_ALGORITHMS_SINCE[0][1]):
        return []
    known = _releases.spec_algorithms(version)
    if str(algo).upper() in known:
        return []
    since = dict(_releases.SPEC_ALGORITHMS_SINCE).get(str(algo).upper())
    return [
        f"spec_algorithm={algo} is not an algorithm of SGLang {str(version).strip()} (sglang_server_sglang_version)"
        + (f": it arrived in {since}" if since else "")
        + f"; that release has {', '.join(known)}"
    ]


def adaptive_overlap_errors(schedule: Any, extra_flags: Any, version: Any) -> list[str]:
    """Adaptive speculation on a release that falls back to static while the overlap scheduler is
    on (0.5.11, `sglang_releases.adaptive_needs_overlap_off`): refused unless the flags turn it off,
    as the role refuses every other fallback before any host changes (the algorithm and topk:
    sglang_spec.schedule_settings; the switches: `adaptive_fallback_errors`)."""
    if not (isinstance(schedule, dict) and schedule.get("enabled")) or not _releases.adaptive_needs_overlap_off(
        version
    ):
        return []
    if extra_switch_on(extra_flags, "disable-overlap-schedule"):
        return []
    return [
        f"spec_schedule on SGLang {str(version).strip()} needs the overlap scheduler off: that release runs "
        "adaptive speculation only on the v1 worker and otherwise falls back to static ('the overlap scheduler "
        "(spec v2) is enabled'); set sglang_server_extra_flags {disable-overlap-schedule: true} or use 0.5.12+"
    ]


def given_value(extra: Any, *names: str) -> Any:
    """The value sglang_server_extra_flags gives one of `names` (a flag and its aliases), the last
    item of a list (the role writes `dp-size: [2]` as `--dp-size 2`); None when it gives none. By the
    whole name only: which abbreviation SGLang's parser takes depends on the release's every flag
    (`enable-dp` is ambiguous, `attn` is `--attn-cp-size` before 0.5.23), so an abbreviated one is
    left for SGLang to judge at start rather than read as another flag here."""
    value = extra_value(extra, tuple(normalise_flag(n) for n in names))
    if isinstance(value, list):
        return value[-1] if value else None
    return value


def _above_1(value: Any) -> bool:
    n = parse_whole_number(str(value).strip()) if value is not None and not isinstance(value, bool) else None
    return n is not None and n > 1


def _attention_dp(extra: Any) -> bool:
    """DP attention in effect: the switch with a data-parallel size above 1 (SGLang turns the switch
    off at dp size 1: 0.5.12 server_args.py, 0.5.16/0.5.20 overrides.py, 0.5.23 parallel_hook.py), or
    an attention-DP size above 1, the spelling 0.5.22 added and 0.5.23 asks for instead of the switch
    (arg_groups/fields/parallel.py `attn_dp_size`; runtime_context.py `attn_dp_enabled_of` reads it)."""
    switch = given_value(extra, "--enable-dp-attention") is True and _above_1(
        given_value(extra, "--dp-size", "--data-parallel-size")
    )
    return switch or _above_1(given_value(extra, "--attn-dp-size", "--attention-data-parallel-size"))


# What makes SGLang run a per-batch-size schedule as a static server, with only a warning
# (speculative/adaptive_spec_params.py `adaptive_unsupported_reason`, 0.5.12 to 0.5.23), beside the
# algorithm and topk the spec rules refuse: switch -> what adaptive speculation lacks there.
_ADAPTIVE_FALLBACKS = (
    ("--enable-multi-layer-eagle", "the multi-layer EAGLE worker does not implement adaptive speculation"),
    ("--enable-two-batch-overlap", "its state swap would discard the two-batch-overlap attention backend"),
    ("--enable-pdmux", "its state swap does not update PD multiplexing's decode attention backends"),
)


def adaptive_fallback_errors(schedule: Any, extra_flags: Any) -> list[str]:
    """A schedule beside a setting SGLang's adaptive mode does not run with: SGLang would start a
    static server with only a warning, so the role refuses it before any host changes."""
    if not (isinstance(schedule, dict) and schedule.get("enabled")):
        return []
    found = [(flag, why) for flag, why in _ADAPTIVE_FALLBACKS if given_value(extra_flags, flag) is True]
    if _attention_dp(extra_flags):
        found.append(("DP attention", "its step decisions are not synchronized across the DP ranks"))
    return [
        f"spec_schedule with sglang_server_extra_flags' {flag.lstrip('-')}: SGLang runs the server static instead "
        f"({why}; speculative/adaptive_spec_params.py adaptive_unsupported_reason): drop one of the two"
        for flag, why in found
    ]


def uno_errors(settings: dict[str, Any]) -> list[str]:
    """What SGLang's UNO refuses at start beyond the spec rules (0.5.20-0.5.23
    arg_groups/speculative_hook.py `_handle_uno`), on the sglang engine: it needs its LoRA adapter,
    runs at tensor and pipeline parallel size 1, without DP attention or context parallelism, and
    without deterministic inference. (The emulator takes no --uno-lora-path: not held to these.)"""
    spec = settings.get("spec")
    algo = spec.get("algorithm") if isinstance(spec, dict) and spec.get("enabled") else None
    if str(algo or "").strip().upper() != "UNO" or settings.get("engine") != "sglang":
        return []
    extra = settings.get("extra_flags") or {}
    errors = []
    # any spelling from `uno` on reads as --uno-lora-path, the only flag so named (0.5.20, 0.5.23)
    lora = (
        next(
            (
                v
                for k, v in extra.items()
                if "--uno-lora-path".startswith(normalise_flag(str(k))) and normalise_flag(str(k)).startswith("--uno")
            ),
            None,
        )
        if isinstance(extra, dict)
        else None
    )
    if lora in (None, "", True, False, []):
        errors.append(
            "spec_algorithm=UNO needs its LoRA adapter (SGLang: 'UNO requires --uno-lora-path.'): set "
            "sglang_server_extra_flags {uno-lora-path: /path/to/adapter}"
        )
    pp = given_value(extra, "--pp-size", "--pipeline-parallel-size")
    if _above_1(settings.get("tp_size")) or _above_1(pp):
        errors.append(
            "spec_algorithm=UNO runs at tensor and pipeline parallel size 1 (SGLang: 'UNO requires TP=PP=1.'); got "
            f"sglang_server_tp_size={fmt(settings.get('tp_size'))}" + (f", pp-size {fmt(pp)}" if _above_1(pp) else "")
        )
    if _attention_dp(extra) or _above_1(given_value(extra, "--attn-cp-size", "--attention-context-parallel-size")):
        errors.append(
            "spec_algorithm=UNO does not run with DP attention or context parallelism "
            "(SGLang: 'UNO does not support DP attention or context parallelism.')"
        )
    if given_value(extra, "--enable-deterministic-inference") is True:
        errors.append(
            "spec_algorithm=UNO does not run with enable-deterministic-inference (SGLang: 'UNO does not support "
            "--enable-deterministic-inference because its sampling path does not use per-request seeds.')"
        )
    return errors


# LoRA beside speculation (SGLang's start-up check, by release): up to 0.5.18 NGRAM only
# ("Currently LoRA is only compatible with NGRAM speculative decoding.": 0.5.9 and 0.5.18
# server_args.py check_lora_server_args); from 0.5.19 also the EAGLE family, DFLASH and DSPARK, never
# adaptive (arg_groups/lora_hook.py check_lora_speculative_compatibility, 0.5.19-0.5.23; NEXTN is
# EAGLE there).
LORA_SPEC_WIDE_SINCE = "0.5.19"
_LORA_SPEC_ALGORITHMS = ("NGRAM", "EAGLE", "EAGLE3", "NEXTN", "DFLASH", "DSPARK")


def lora_spec_errors(settings: dict[str, Any]) -> list[str]:
    """A LoRA adapter (sglang_server_extra_flags' lora-paths, which turns LoRA on, or enable-lora)
    beside speculation SGLang refuses at start, on the sglang engine (the emulator takes no LoRA
    flags): refused before any host changes. Releases before 0.5.9 are not judged."""
    extra = settings.get("extra_flags") or {}
    paths = given_value(extra, "--lora-paths")
    lora = given_value(extra, "--enable-lora") is True or paths not in (None, "", [], False)
    key = _releases.release_key(settings.get("sglang_version"))
    if settings.get("engine") != "sglang" or not lora or not key or key < _releases.release_key("0.5.9"):
        return []
    schedule, spec = settings.get("schedule") or {}, settings.get("spec") or {}
    on = schedule if isinstance(schedule, dict) and schedule.get("enabled") else spec
    algo = str(on.get("algorithm") or "").upper() if isinstance(on, dict) and on.get("enabled") else ""
    if not algo or algo == "NGRAM":
        return []
    where = f"sglang_server_extra_flags' LoRA adapter with spec_algorithm={algo}"
    if on is schedule:  # every release refuses it (adaptive speculation came before the EAGLE family's LoRA)
        return [
            f"{where} and spec_schedule: SGLang refuses LoRA with --speculative-adaptive at start ('LoRA with "
            "EAGLE/NEXTN/EAGLE3 speculative decoding does not support --speculative-adaptive'; before "
            f"{LORA_SPEC_WIDE_SINCE} LoRA runs with NGRAM only): drop spec_schedule or the adapter"
        ]
    if key < _releases.release_key(LORA_SPEC_WIDE_SINCE):
        return [
            f"{where}: SGLang {str(settings.get('sglang_version')).strip()} refuses it at start ('Currently LoRA is "
            f"only compatible with NGRAM speculative decoding.'; {LORA_SPEC_WIDE_SINCE} adds the EAGLE family): "
            "use spec_steps=0, spec_algorithm=NGRAM or a later release"
        ]
    if algo not in _LORA_SPEC_ALGORITHMS:
        return [f"{where}: SGLang runs LoRA with NGRAM, EAGLE, NEXTN, EAGLE3, DFLASH or DSPARK only"]
    return []


def tls_errors(settings: dict[str, Any]) -> list[str]:
    """A server given a certificate (`--ssl-certfile`, or a prefix argparse reads as it) answers
    HTTPS only, so a gate or client URL left at its http:// default would be refused until the
    gate's timeout: both must name the server by https:// and the name its certificate is for."""
    flag = certfile_flag(settings.get("extra_flags"))
    if flag is None:
        return []
    return [
        f"sglang_server_{key} must be an https:// URL when sglang_server_extra_flags sets {flag} (the server then "
        f"answers TLS only), at a name its certificate is for; got {fmt(settings[key])}"
        for key in ("gate_url", "client_url")
        if isinstance(settings.get(key), str) and not settings[key].strip().lower().startswith("https://")
    ]


def spec_host_errors(settings: dict[str, Any]) -> list[str]:
    """What the role refuses of the speculative config (`spec`, `schedule`) for the host's other
    settings (`engine`, `sglang_version`, `extra_flags`, `tp_size`): an algorithm the release lacks,
    an adaptive schedule SGLang would run static there, UNO's and LoRA's start-up checks. One list,
    so that the tuner's plan (tuner/spec/refusals.py) sets aside what every host's play would refuse
    with the play's own words."""
    return (
        algorithm_release_errors(settings.get("spec") or {}, settings.get("sglang_version"))
        + adaptive_overlap_errors(settings.get("schedule"), settings.get("extra_flags"), settings.get("sglang_version"))
        + adaptive_fallback_errors(settings.get("schedule"), settings.get("extra_flags"))
        + uno_errors(settings)
        + lora_spec_errors(settings)
    )


def server_errors(settings: dict[str, Any]) -> list[str]:
    """Check the role's settings (keys are the variable names without `sglang_server_`).

    Every message starts with the variable's full name and says what is allowed, because the
    play stops on them before touching a host.
    """
    errors: list[str] = []
    engine = settings.get("engine")
    if engine not in ENGINE_MODULES:
        errors.append(f"sglang_server_engine must be one of {', '.join(ENGINE_MODULES)}; got {fmt(engine)}")

    for key, (kind, lo, hi, excl) in NUMERIC_LIMITS.items():
        if key not in settings or is_unset(settings[key]):
            continue
        err = check_number(f"sglang_server_{key}", settings[key], kind, lo, hi, excl)[1]
        if err:
            errors.append(err)
    if is_unset(settings.get("port")):
        errors.append("sglang_server_port must be a whole number from 1 to 65535; got nothing")
    if is_unset(settings.get("tp_size")):
        errors.append("sglang_server_tp_size must be a whole number of at least 1; got nothing")

    model = settings.get("model_path")
    if is_unset(model):
        errors.append("sglang_server_model_path must be set: the directory holding the model weights")
    elif not str(model).startswith("/"):
        errors.append(f"sglang_server_model_path must be an absolute path on the host; got {fmt(model)}")
    if is_unset(settings.get("host")):
        errors.append("sglang_server_host must be the address to listen on (0.0.0.0 for every interface)")

    for key in ("trust_remote_code", "enable_metrics", "skip_server_warmup"):
        if key in settings and parse_bool(settings[key]) is None:
            errors.append(f"sglang_server_{key} must be true or false; got {fmt(settings[key])}")

    for key in SECRET_SETTINGS:
        err = api_key_error(f"sglang_server_{key}", settings.get(key))
        if err:
            errors.append(err)

    errors += extra_flag_errors(settings.get("extra_flags") or {})
    errors += tls_errors(settings)
    errors += spec_host_errors(settings)
    node = settings.get("node") or {}
    if isinstance(node, dict) and int(node.get("nnodes") or 1) > 1:
        for name in settings.get("extra_flags") or {}:
            flag = normalise_flag(name) if isinstance(name, str) else ""
            if flag.startswith("--dist-t") and "--dist-timeout".startswith(flag):
                # the role passes the group's own --dist-timeout; a later one would win on the line
                # while the group's agreement check looked at the variable
                errors.append(f"sglang_server_extra_flags must not set {flag}: use sglang_server_dist_timeout")

    env = settings.get("environment") or {}
    if not isinstance(env, dict):
        errors.append("sglang_server_environment must be a mapping of variable name to value")
        env = {}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            errors.append(f"sglang_server_environment: {fmt(name)} is not an environment variable name")
        if isinstance(value, (dict, list)) or (isinstance(value, str) and any(c in value for c in "\n\r\0")):
            errors.append(f"sglang_server_environment: the value of {name} must be one line of text")
        if name in _GPU_SELECTION_ENV:
            # the unit reads cuda_env's file first and the server's second, and systemd's later
            # setting wins: chosen here, the GPUs would not be the ones cuda_env's preflight counted
            # and its NCCL check ran on
            errors.append(
                f"sglang_server_environment must not set {name}: set it in cuda_env_cuda_env, which the "
                "GPU preflight and the NCCL check read and the unit loads"
            )

    faults = settings.get("emulator_faults") or []
    profile = settings.get("emulator_profile")
    if engine == "emulator" and not is_unset(profile):
        # A controller-side file (copied to the host); the only check here that reads the disk.
        path = os.path.abspath(os.path.expanduser(str(profile)))
        if not os.path.isfile(path):
            errors.append(f"sglang_server_emulator_profile must name a file on the controller; {path} does not exist")
    startup = settings.get("emulator_startup_s")
    if engine != "emulator":
        if faults:
            errors.append("sglang_server_emulator_faults only applies to sglang_server_engine=emulator")
        if not is_unset(profile):
            errors.append("sglang_server_emulator_profile only applies to sglang_server_engine=emulator")
        if not is_unset(startup):
            errors.append("sglang_server_emulator_startup_s only applies to sglang_server_engine=emulator")
    if not isinstance(faults, list):
        errors.append("sglang_server_emulator_faults must be a list like ['kv-oom', 'slow-startup=10']")
        faults = []
    names = []
    for fault in faults:
        try:
            names.append(_faults.parse_fault(fault)[0])
        except _faults.FaultSpecError as e:
            errors.append(f"sglang_server_emulator_faults: {e}")
    for name in _faults.repeated_faults(names):
        errors.append(f"sglang_server_emulator_faults: {name} given more than once: give each fault once")
    errors.extend(emulator_version_errors(settings))
    return errors


def _num_text(value: Any, kind: str) -> str:
    if kind == "int":
        parsed = parse_whole_number(value)
        if parsed is None:
            raise ValueError(f"not a whole number: {value!r}")
        return str(parsed)
    parsed_f = parse_number(value)
    if parsed_f is None:
        raise ValueError(f"not a number: {value!r}")
    # repr: the shortest text that reads back as the same number (`:g` kept six significant
    # digits: 0.8765432 reached the server as 0.876543, 1234567.5 as 1.23457e+06)
    return repr(parsed_f) if parsed_f != int(parsed_f) else str(int(parsed_f))


def server_flags(settings: dict[str, Any]) -> list[list[str]]:
    """The launch_server arguments, one [flag, value...] entry per ExecStart line.

    `settings` holds the role variables without the `sglang_server_` prefix plus `spec`
    (from spec_settings) and `node` (from node_settings); it must pass server_errors first.
    """
    lines: list[list[str]] = []
    for key, flag, kind in FLAG_TABLE:
        value = settings.get(key)
        if kind == "bool":
            if parse_bool(value):
                lines.append([flag])
        elif not is_unset(value):
            lines.append([flag, str(value).strip() if kind == "str" else _num_text(value, kind)])

    spec = settings.get("spec") or {}
    schedule = settings.get("schedule") or {}
    if schedule.get("enabled"):
        # Adaptive speculation (spec_schedule): topk 1 and draft tokens = steps + 1 are what SGLang
        # sets under it (_init_adaptive_speculative_params); with `default` and no spec_steps all
        # three are left to SGLang, which asserts they come together.
        lines.append(["--speculative-algorithm", schedule["algorithm"]])
        # the schedule's own (spec is off when the launch depth is the schedule's and the steps'
        # default is 0)
        draft = schedule.get("draft_model_path") or spec.get("draft_model_path")
        if draft:
            lines.append(["--speculative-draft-model-path", draft])
        if schedule.get("num_steps") is not None:
            lines.append(["--speculative-num-steps", str(schedule["num_steps"])])
            lines.append(["--speculative-eagle-topk", "1"])
            lines.append(["--speculative-num-draft-tokens", str(int(schedule["num_steps"]) + 1)])
        lines.append(["--speculative-adaptive"])
        if schedule.get("config") is not None:
            lines.append(["--speculative-adaptive-config", str(settings["adaptive_config_path"])])
    elif spec.get("enabled"):
        lines.append(["--speculative-algorithm", spec["algorithm"]])
        if spec.get("draft_model_path"):
            lines.append(["--speculative-draft-model-path", spec["draft_model_path"]])
        lines.append(["--speculative-num-steps", str(spec["num_steps"])])
        lines.append(["--speculative-eagle-topk", str(spec["eagle_topk"])])
        if spec.get("num_draft_tokens") is not None:  # DFLASH unset: the draft model's block size
            lines.append(["--speculative-num-draft-tokens", str(spec["num_draft_tokens"])])

    node = settings.get("node") or {}
    if int(node.get("nnodes") or 1) > 1:
        lines.append(["--nnodes", str(node["nnodes"])])
        lines.append(["--node-rank", str(node["node_rank"])])
        lines.append(["--dist-init-addr", str(node["dist_init_addr"])])
        if node.get("dist_timeout"):
            lines.append(["--dist-timeout", str(node["dist_timeout"])])

    extra = settings.get("extra_flags") or {}
    for name in sorted(extra):
        value = extra[name]
        flag = normalise_flag(name)
        if isinstance(value, list):
            # SGLang's list flags (--cuda-graph-bs, ...) are argparse nargs="+" with the default
            # store action: one flag with every value; a repeated flag keeps only its last
            items = [str(v) for v in value if not is_unset(v)]
            if items:
                lines.append([flag, *items])
        elif value is True:
            lines.append([flag])
        elif value is False or is_unset(value):
            continue
        else:
            lines.append([flag, str(value)])

    if settings.get("engine") == "emulator":
        if not is_unset(settings.get("sglang_version")):
            # the emulator plays the release the role would install (tuner/emulator/versions.py)
            lines.append(["--emulator-sglang-version", str(settings["sglang_version"]).strip()])
        if not is_unset(settings.get("emulator_profile_path")):
            lines.append(["--emulator-profile", str(settings["emulator_profile_path"])])
        if not is_unset(settings.get("emulator_startup_s")):
            lines.append(["--emulator-startup-s", _num_text(settings["emulator_startup_s"], "float")])
        for fault in settings.get("emulator_faults") or []:
            lines.append(["--emulator-fault", str(fault).strip()])
    return lines


# --------------------------------------------------------------------------------------------
# systemd quoting
# --------------------------------------------------------------------------------------------

_EXEC_SAFE = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def systemd_exec_quote(word: Any) -> str:
    """Quote one ExecStart argument so systemd passes it through unchanged.

    systemd.service(5) "Command lines": `%` starts a specifier (write `%%`), `$` starts a
    variable (write `$$`), quotes and backslashes are escapes, blanks split words.
    """
    text = str(word)
    if text and _EXEC_SAFE.fullmatch(text):
        return text
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("%", "%%")
        .replace("$", "$$")
        .replace("\n", "\\n")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def systemd_env_assign(name: str, value: Any) -> str:
    """One `NAME="value"` line for an EnvironmentFile (no specifier or variable expansion there).

    Inside double quotes systemd's env-file parser treats backslash as an escape for `"`, `\\`,
    `$` and the backtick, as a shell does, so those four are escaped and everything else is literal.
    """
    if not _ENV_NAME_RE.fullmatch(str(name)):
        raise ValueError(f"not an environment variable name: {name!r}")
    text = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"environment value of {name} must be one line")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    return f'{name}="{escaped}"'
