#!/usr/bin/python
# Copyright: (c) 2026, sglang-tune contributors
# Apache License 2.0 (the collection's licence, galaxy.yml): https://www.apache.org/licenses/LICENSE-2.0
"""Ansible module ``sglang_ready``: gate on a just-(re)started SGLang server and report what it came up with."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Wait for a (re)started SGLang server to be ready and report its capacity
version_added: "0.1.0"
description:
  - Polls C(GET /health) on an SGLang server until it answers HTTP 200. C(/v1/models) is not used
    because it answers before the server has finished its warm-up.
  - While waiting it watches the systemd unit (or a process id) and the log of this start only.
    It fails at once, not at the timeout, when the unit goes inactive or failed, restarts (its
    InvocationID or MainPID changes or NRestarts grows), or this start's log shows a fatal error
    (CUDA out of memory, the KV pool cannot be allocated, a Python traceback, argument errors).
    The failure message starts with the most specific reason and carries the last lines of the log.
  - On success it reads this start's log lines (the unit's current invocation in the journal, or
    the latest launch in O(log_path)) and C(/server_info) (C(/get_server_info) on older SGLang)
    and returns the capacity line, the KV and Mamba pools, the resolved speculative-decoding
    settings, the server version and served model name, and SGLang's warnings.
  - Fields that a given SGLang version does not print come back as C(null).
  - The module never changes anything; C(changed) is always C(false).
author:
  - sglang-tune contributors (@sglang-tune)
options:
  url:
    description:
      - Base URL of the SGLang server, without a path.
    type: str
    default: http://127.0.0.1:30000
  unit:
    description:
      - The systemd unit that runs the server. Its state is watched and its current invocation's
        journal is the log, unless O(log_path) is given.
      - Set to an empty string to watch no unit (for example when O(pid) is given).
      - When O(log_path) is given and the unit does not exist on the host, the unit is ignored.
    type: str
    default: sglang-qwen.service
  log_path:
    description:
      - Read the server's log from this file instead of the journal (for example a unit with
        C(StandardOutput=append:FILE)). Only the latest launch in the file is read, from its
        C(server_args=) line (and the argument warnings SGLang prints just before it) onward.
    type: path
  pid:
    description:
      - Process id of the server, watched instead of (or as well as) the unit. Its exit fails the
        gate at once. Useful for servers not run by systemd.
    type: int
  timeout:
    description:
      - Seconds to wait for C(/health) to answer 200 before failing.
    type: float
    default: 600
  interval:
    description:
      - Seconds between two checks of the health endpoint, the unit and the log.
    type: float
    default: 0.5
  request_timeout:
    description:
      - Timeout in seconds of one HTTP request.
    type: float
    default: 5
  api_key:
    description:
      - "The server's API key (C(--api-key)), sent as C(Authorization: Bearer <key>) to every endpoint."
      - Never logged; it is also masked in RV(log_tail) and in failure messages.
      - Sent to O(url) only, never on a redirect (which is followed without it).
    type: str
  log_lines:
    description:
      - How many of the last log lines to return in RV(log_tail) and in failure messages.
    type: int
    default: 40
  validate_certs:
    description:
      - Whether to validate TLS certificates when O(url) is C(https).
    type: bool
    default: true
  use_proxy:
    description:
      - Whether to use a proxy from the environment for the HTTP requests.
    type: bool
    default: false
  worker:
    description:
      - This host runs a worker node (C(--node-rank) above 0) of a multi-node server. SGLang's
        worker nodes answer C(/health), C(/health_generate) and C(/ping) with a dummy 200 whatever
        the server's state (C(launch_dummy_health_check_server), sgl-project/sglang
        C(entrypoints/engine.py)), so no HTTP endpoint is probed. The gate instead waits until this
        start's log shows that the node joined the group (C(Init torch distributed ends.), from
        SGLang 0.5.21 C(Init parallel ends.), logged only once every rank reached the dist-init
        address), watching the unit and the log for a death or a fatal line as usual. The report then carries RV(joined) and no capacity.
    type: bool
    default: false
extends_documentation_fragment:
  - action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; in check mode it waits and reports exactly as in a normal run.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs C(systemctl) and C(journalctl) on the host when a unit is watched and O(log_path) is not given.
  - With O(log_path), SGLang's timestamps (local time of the host) are compared with the process
    start to tell this launch from earlier ones appended to the same file.
  - RV(ready_seconds) is measured from the server process start (unit or O(pid)) when the module
    saw the server come up; when it was already up at the first check it comes from the log's
    own timestamps, else it is the time the module waited.
seealso:
  - name: SGLang server arguments
    description: The flags whose resolved values are reported here.
    link: https://docs.sglang.ai/advanced_features/server_arguments.html
"""

EXAMPLES = r"""
- name: Restart SGLang
  ansible.builtin.systemd_service:
    name: sglang-qwen.service
    state: restarted
    daemon_reload: true

- name: Wait until it is ready and read its capacity
  sglang_tune.serving.sglang_ready:
    unit: sglang-qwen.service
    url: http://127.0.0.1:30000
    timeout: 900
    api_key: "{{ sglang_server_api_key }}"
  register: sglang

- name: Show what it came up with
  ansible.builtin.debug:
    msg: >-
      {{ sglang.capacity.max_total_num_tokens }} KV tokens,
      {{ sglang.capacity.max_running_requests }} running requests,
      spec steps {{ sglang.speculative.num_steps }} (adjusted: {{ sglang.speculative.draft_tokens_adjusted }})

- name: A server that writes to a file and is not run by systemd
  sglang_tune.serving.sglang_ready:
    unit: ""
    pid: "{{ server_pid }}"
    log_path: /var/log/sglang/server.log
    timeout: 300
"""

RETURN = r"""
url:
  description: The base URL that was polled.
  returned: always
  type: str
  sample: http://127.0.0.1:30000
ready_seconds:
  description:
    - Seconds from the server process start to C(/health) answering 200 (see the notes for how it
      is measured when the module did not see the server come up).
    - On a worker node (O(worker)), which serves no API, the seconds this module waited for the node
      to join its group.
  returned: success
  type: float
  sample: 187.4
waited_seconds:
  description: Seconds this module waited.
  returned: always
  type: float
  sample: 185.2
joined:
  description:
    - With O(worker=true) (a worker node of a multi-node server), whether this start's log shows
      the node joined the group (C(Init torch distributed ends.), from SGLang 0.5.21
      C(Init parallel ends.)).
  returned: success, with O(worker=true)
  type: bool
  sample: true
reported_at:
  description: Wall-clock time (seconds since the epoch, host clock) at which the module reported, ready or failed.
  returned: always
  type: float
  sample: 1796034823.512
health_status:
  description: HTTP status of the last C(/health) answer (null when none came).
  returned: always
  type: int
  sample: 200
log_source:
  description: Where the log lines came from, C(journal) or C(file) (null when no log was read).
  returned: always
  type: str
  sample: journal
invocation_id:
  description: The systemd InvocationID of the unit's start that was watched (null without a unit).
  returned: always
  type: str
  sample: 5c1b0e0f7c9d4a34b1f2a6d1e8e0c2aa
capacity:
  description: The fields of SGLang's capacity line (C(max_total_num_tokens=...)), completed from C(/server_info) where the line lacks one.
  returned: success, except with O(worker=true) (a worker node reports only that it joined)
  type: dict
  contains:
    max_total_num_tokens:
      description: Token slots in the KV pool (per DP rank).
      type: int
      sample: 1763904
    max_running_requests:
      description: Effective limit of concurrently running requests (can be lower than the flag); each DP rank's where C(dp_size) is above 1.
      type: int
      sample: 48
    dp_size:
      description: Data-parallel ranks from C(/server_info) (DP attention, C(--dp-size)); absent for one rank or when it does not say.
      type: int
      returned: when /server_info has more than one
      sample: 8
    max_prefill_tokens:
      description: Prefill token budget per batch.
      type: int
      sample: 16384
    chunked_prefill_size:
      description: Chunked-prefill size (-1 when disabled).
      type: int
      sample: 8192
    context_len:
      description: Context length the server resolved.
      type: int
      sample: 262144
    available_gpu_mem_gb:
      description: Free GPU memory on rank 0 after start-up, in GB (null when the build does not print it).
      type: float
      sample: 14.86
speculative:
  description: Speculative-decoding settings as SGLang resolved them.
  returned: success, except with O(worker=true)
  type: dict
  contains:
    enabled:
      description: Whether speculative decoding is on (null when neither the log nor /server_info said).
      type: bool
    algorithm:
      description: Resolved algorithm (C(NEXTN) is reported as C(EAGLE)).
      type: str
      sample: EAGLE
    num_steps:
      description: Draft depth.
      type: int
      sample: 3
    eagle_topk:
      description: Branching per draft step.
      type: int
      sample: 1
    num_draft_tokens:
      description: Verify width.
      type: int
      sample: 4
    draft_tokens_adjusted:
      description: Whether SGLang changed the draft-token count it was given (topk 1 forces steps + 1); null when unknown.
      type: bool
      sample: false
    max_running_requests_reset:
      description: Whether SGLang reset max_running_requests to its speculative default (48) because the flag was not given.
      type: bool
      sample: true
    max_running_requests_reset_to:
      description: The value it was reset to.
      type: int
      sample: 48
    adaptive:
      description: >-
        Whether adaptive speculation (C(--speculative-adaptive)) is on as SGLang resolved it (false after SGLang's
        fallback to static speculation, and on releases without it); null when /server_info did not answer.
      type: bool
      sample: true
    schedule:
      description: >-
        The per-batch-size schedule the server runs, as SGLang's JSON (bucket lower bound -> its entry, buckets in
        increasing order), read from the server's C(speculative_adaptive_config) file on the host (SGLang's default
        config when it has none); the flat object on 0.5.11/0.5.12; null when the server runs static speculation.
      type: dict
      sample: {"1": {"candidate_steps": [4]}, "16": {"candidate_steps": [3]}}
server:
  description: What the server says about itself.
  returned: success, except with O(worker=true)
  type: dict
  contains:
    version:
      description: SGLang version from /server_info (null when the endpoint is unavailable).
      type: str
      sample: 0.5.9
    served_model_name:
      description: The served model name.
      type: str
      sample: qwen3.5-122b
    server_info_path:
      description: The endpoint that answered, C(/server_info) or C(/get_server_info).
      type: str
      sample: /server_info
    avg_spec_accept_length:
      description: Lifetime average accept length at the time of the report (the mean over the DP ranks that report one).
      type: float
kv_pools:
  description:
    - One entry per KV cache pool allocated by the primary rank, in log order (the draft model's pool follows the target's).
    - A sliding-window model's target has two pools, C(label) C(Full) and C(SWA) (SGLang's own labels from 0.5.2x;
      read from its SWAKVPool summary line before).
    - C(tokens) is null where the line has sizes only (SGLang 0.4.0 to 0.4.2).
  returned: success, except with O(worker=true)
  type: list
  elements: dict
  sample:
    - rank: TP0
      label: null
      layout: mha
      dtype: null
      tokens: 1917632
      k_size_gb: 51.21
      v_size_gb: 51.21
      kv_size_gb: null
      total_gb: 102.42
      upper_bound: false
mamba_cache:
  description: The Mamba/GDN state pool of hybrid models (Qwen3-Next, Qwen3.5); null for others.
  returned: success, except with O(worker=true)
  type: dict
  sample:
    rank: TP0
    max_mamba_cache_size: 186
    conv_state_gb: 0.1
    ssm_state_gb: 4.38
    intermediate_ssm_state_cache_gb: null
    intermediate_conv_window_cache_gb: null
sglang_warnings:
  description:
    - SGLang's warnings from this start's log, de-duplicated across ranks. They are also emitted as
      Ansible warnings (the task result's C(warnings)).
  returned: success
  type: list
  elements: str
  sample:
    - >-
      Max running requests is reset to 48 for speculative decoding. You can override this by explicitly
      setting --max-running-requests.
log_tail:
  description: The last O(log_lines) lines of this start's log, API keys masked.
  returned: always
  type: list
  elements: str
reason:
  description: On failure, the most specific reason (for example the exception line).
  returned: failed
  type: str
  sample: "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
failure_kind:
  description:
    - On failure, its class (C(kv_pool_oom), C(out_of_memory), C(cuda_graph), C(bad_arguments), C(exception),
      C(native_crash), C(port_in_use), C(bind_failed) (the address or port cannot be bound for another reason than
      a taken port, and the reason says which to change), C(scheduler_dead), C(subprocess_crashed), C(watchdog_timeout), C(unit_dead),
      C(restarted), C(process_exited),
      C(timeout), C(tls_or_proxy) (a certificate or proxy refused the probe), C(bad_url), ...).
  returned: failed
  type: str
  sample: kv_pool_oom
unit_state:
  description: The unit's properties at the end (ActiveState, SubState, Result, ExecMainStatus, NRestarts, MainPID, InvocationID).
  returned: when a unit is watched
  type: dict
"""

import http.client
import json
import os
import time
import urllib.error
import urllib.parse

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlConnectionError
from ansible.module_utils.urls import Request, get_user_agent, make_context
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_adaptive import resolved_schedule
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_gate_report import GateReport
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_log import (
    current_launch,
    find_fatal,
    is_joined_line,
    is_launch_line,
    is_ready_line,
    parse_line,
    parse_timestamp,
    redact,
    split_lines,
    summarize,
)
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_releases import adaptive_config_form
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_server_info import (
    SERVER_INFO_PATHS,
    parse_models,
    parse_server_info,
)

# How long a failure report waits for the unit to leave `active` after its fatal log line.
UNIT_SETTLE_S = 3.0

UNIT_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "ExecMainStatus",
    "ExecMainCode",
    "NRestarts",
    "MainPID",
    "InvocationID",
    "ExecMainStartTimestampMonotonic",
)
# After the first fatal line, keep reading for this long so the exception line that ends a
# traceback (written a few ms later) can be reported instead of "Traceback (...)" or
# "Scheduler hit an exception"; a specific reason that stays quiet for FATAL_QUIET_S ends it early.
FATAL_SETTLE_S = 0.6
FATAL_QUIET_S = 0.2
# A unit found dead before its log showed why: how long to keep reading for the line that does. The
# journal takes the process's last lines a moment after systemd saw it exit, longer on a loaded
# host (a make test of 2026-12-05 read none 0.2 s after an argparse error, and reported only
# "unit_dead" where the reason was `unrecognized arguments`).
DEAD_LOG_GRACE_S = 2.0


# ------------------------------------------------------------------------------------------
# Watching the unit / process
# ------------------------------------------------------------------------------------------


class UnitWatcher:
    """``systemctl show`` snapshots of one unit, compared with the first one."""

    def __init__(self, module, unit):
        self.module = module
        self.unit = unit
        self.systemctl = module.get_bin_path("systemctl")
        self.baseline: dict[str, str] | None = None
        self.last: dict[str, str] = {}

    def available(self):
        return self.systemctl is not None

    def snapshot(self):
        cmd = [self.systemctl, "show", "--no-pager", "-p", ",".join(UNIT_PROPERTIES), self.unit]
        rc, out, err = self.module.run_command(cmd)
        props = {}
        if rc == 0:
            for line in out.splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    props[key] = value
        else:
            props["_error"] = (err or out).strip()
        self.last = props
        if self.baseline is None:
            self.baseline = props
        return props

    def exists(self):
        props = self.last or self.snapshot()
        return "_error" not in props and props.get("LoadState") not in (None, "", "not-found")

    def start_epoch(self):
        """Wall-clock time of the current main process start (CLOCK_MONOTONIC based)."""
        mono = _int(self.baseline.get("ExecMainStartTimestampMonotonic") if self.baseline else None)
        if not mono:
            return None
        return time.time() - (time.monotonic() - mono / 1e6)

    def problem(self, props):
        """``(kind, text)`` when the unit has died or restarted since the baseline, else ``None``."""
        if "_error" in props:
            return None  # a transient systemctl failure is not the server's
        base = self.baseline or {}
        active, sub = props.get("ActiveState"), props.get("SubState")
        if props.get("LoadState") == "not-found":
            return "unit_missing", f"unit {self.unit} does not exist"
        if base.get("InvocationID") and props.get("InvocationID") and props["InvocationID"] != base["InvocationID"]:
            return "restarted", f"unit {self.unit} restarted while waiting (InvocationID changed)"
        if _int(props.get("NRestarts")) is not None and _int(base.get("NRestarts")) is not None:
            if _int(props["NRestarts"]) > _int(base["NRestarts"]):
                return "restarted", "unit {} restarted while waiting (NRestarts {} -> {})".format(
                    self.unit,
                    base["NRestarts"],
                    props["NRestarts"],
                )
        base_pid, pid = _int(base.get("MainPID")), _int(props.get("MainPID"))
        if base_pid and pid and pid != base_pid:
            return "restarted", f"unit {self.unit} restarted while waiting (MainPID {base_pid} -> {pid})"
        if active in ("failed", "inactive", "deactivating") or (active == "activating" and sub == "auto-restart"):
            return "unit_dead", "unit {} is {}/{} (Result={}, exit status {})".format(
                self.unit,
                active,
                sub,
                props.get("Result"),
                props.get("ExecMainStatus"),
            )
        return None

    def state(self):
        props = self.last or {}
        keep = ("ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts", "MainPID", "InvocationID")
        return dict((k, props.get(k)) for k in keep)


class PidWatcher:
    """A plain process (no systemd): alive until it exits or turns into a zombie."""

    def __init__(self, pid):
        self.pid = pid
        self._start = _proc_start_epoch(pid)

    def start_epoch(self):
        return self._start

    def problem(self):
        stat = f"/proc/{self.pid}/stat"
        try:
            with open(stat) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return "process_exited", f"process {self.pid} exited"
        if fields and fields[0] in ("Z", "X"):
            return "process_exited", f"process {self.pid} exited"
        return None


def _proc_start_epoch(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            after = fh.read().rsplit(")", 1)[1].split()
        start_ticks = int(after[19])  # field 22 of stat(5)
        with open("/proc/stat") as fh:
            btime = next(int(ln.split()[1]) for ln in fh if ln.startswith("btime "))
        return btime + start_ticks / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------------------
# Reading this start's log
# ------------------------------------------------------------------------------------------


class JournalLog:
    """Incremental reader of one unit invocation's journal (``_SYSTEMD_INVOCATION_ID``)."""

    source = "journal"

    def __init__(self, module, invocation_id):
        self.module = module
        self.invocation_id = invocation_id
        self.journalctl = module.get_bin_path("journalctl")
        self.cursor = None
        self.lines = []

    def read(self):
        """Append new lines; returns how many arrived."""
        if not self.journalctl or not self.invocation_id:
            return 0
        cmd = [
            self.journalctl,
            "--no-pager",
            "-q",
            "-o",
            "cat",
            "--show-cursor",
            f"_SYSTEMD_INVOCATION_ID={self.invocation_id}",
        ]
        if self.cursor:
            cmd += ["--after-cursor", self.cursor]
        rc, out, _err = self.module.run_command(cmd, errors="replace")
        if rc != 0:
            return 0
        new = []
        for line in out.split("\n"):
            if line.startswith("-- cursor: "):
                self.cursor = line[len("-- cursor: ") :].strip()
            elif line:
                new.extend(split_lines(line))
        self.lines.extend(new)
        return len(new)

    def launch(self):
        return self.lines

    def restarted_in_log(self):
        return False


def _server_args_at(lines):
    """Where launches begin in `lines`: their `server_args=` lines (sglang_log.is_launch_line)."""
    found = []
    for i, ln in enumerate(lines):
        parsed = parse_line(ln) if "server_args=" in ln else None
        if parsed is not None and is_launch_line(parsed):
            found.append(i)
    return found


class FileLog:
    """Incremental reader of a log file that every launch appends to.

    What was in the file at the first read is cut to the latest launch (``current_launch``);
    everything appended after that is this start's. A second ``server_args=`` line in this
    start's lines is a new launch: the server restarted while the gate waited.
    """

    source = "file"

    def __init__(self, path, not_before=None):
        self.path = path
        self.not_before = not_before
        self.offset = 0
        self.partial = ""
        self.base = None  # this launch's lines that were already in the file at the first read
        self.new = []
        self.new_launch_seen = False

    def read(self):
        try:
            size = os.path.getsize(self.path)
        except OSError:
            if self.base is None:
                self.base = []
            return 0
        if size < self.offset:  # truncated or rotated: what follows is new
            self.offset, self.partial = 0, ""
        data = b""
        if size > self.offset:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(size - self.offset)
            self.offset += len(data)
        text = self.partial + data.decode("utf-8", "replace")
        parts = split_lines(text)
        if text and not text.endswith(("\n", "\r")):  # keep an unterminated line for later
            self.partial = parts.pop() if parts else ""
        else:
            self.partial = ""
            if parts and parts[-1] == "":
                parts.pop()
        if self.base is None:
            self.base = current_launch(parts, self.not_before)
            return len(self.base)
        self.new.extend(parts)
        return len(parts)

    def launch(self):
        base = self.base or []
        new = self.new + ([self.partial] if self.partial else [])
        if self.not_before is None and _server_args_at(base) and _server_args_at(new):
            # Without the process start time the file's last launch at the first read may
            # have been the previous one: a launch that begins afterwards replaces it.
            base = []
        lines = base + new
        starts = _server_args_at(lines)
        if len(starts) > 1:
            self.new_launch_seen = True
            return lines[: starts[1]]
        return lines

    def restarted_in_log(self):
        return self.new_launch_seen


# ------------------------------------------------------------------------------------------
# HTTP
# ------------------------------------------------------------------------------------------


class Http:
    """GET against the server with Ansible's own `Request` (its proxy, certificate and redirect
    handling), one TLS context for the whole run: `fetch_url` makes a new one for every request and
    loads the system's CA store into it, about 35 ms of CPU a probe (two a second while a server
    starts) whether or not the URL is https. Answers and failures read as `fetch_url` reports them."""

    def __init__(self, module, base_url, api_key, request_timeout):
        self.module = module
        self.base = base_url.rstrip("/")
        self.headers = {"Accept": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.request_timeout = request_timeout
        validate = module.params["validate_certs"]
        self.request = Request(
            use_proxy=module.params["use_proxy"],
            validate_certs=validate,
            http_agent=get_user_agent(),
            context=make_context(validate_certs=validate),
            # the key goes to this server only: a redirect (a proxy's 302 to another host, or to
            # http://) is followed without it (urllib copies every other header; ansible-core keeps
            # its own basic-auth header off redirects the same way, module_utils/urls.py)
            unredirected_headers=["Authorization"],
        )

    def get(self, path, timeout=None):
        """``(status, body_text, error)``; status is ``None`` when no HTTP answer came."""
        t = self.request_timeout if timeout is None else max(0.2, min(timeout, self.request_timeout))
        try:
            resp = self.request.open("GET", self.base + path, headers=self.headers, timeout=t)
            status = resp.code
        except urllib.error.HTTPError as exc:  # an answer: its status and body
            try:
                body = exc.read() if exc.fp is not None else b""
            except Exception:  # a connection dropped mid-body is an answer without a body
                body = b""
            return exc.code, body.decode("utf-8", "replace"), None
        except UrlConnectionError as exc:  # a certificate or proxy refused: as fetch_url, fail (with the
            # gate's whole failure result, as every other failure)
            raise GateFailed("tls_or_proxy", f"{self.base + path}: {exc}") from None
        except ValueError as exc:  # a URL urllib cannot read (validate() catches most)
            raise GateFailed("bad_url", f"{self.base + path}: {exc}") from None
        except urllib.error.URLError as exc:
            return None, "", f"Request failed: {exc}"
        except OSError as exc:  # after URLError, before BadStatusLine: fetch_url's order
            return None, "", f"Connection failure: {exc}"
        except http.client.BadStatusLine as exc:
            closed = "connection was closed before a valid response was received"
            return None, "", f"Connection failure: {closed}: {exc}"
        except Exception as exc:  # as fetch_url: any other failure is no answer
            return None, "", f"An unknown error occurred: {exc}"
        try:
            raw = resp.read()
        except Exception as exc:  # a connection dropped mid-body is an answer without a body
            return status, "", str(exc)
        return status, raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw, None

    def get_json(self, path):
        status, body, err = self.get(path)
        if status != 200:
            return status, None
        try:
            return status, json.loads(body)
        except ValueError:
            return status, None


# ------------------------------------------------------------------------------------------
# The gate
# ------------------------------------------------------------------------------------------


class GateFailed(Exception):
    def __init__(self, kind, reason, context=""):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.context = context


class Gate:
    def __init__(self, module):
        p = module.params
        self.module = module
        self.t0 = time.monotonic()  # first: the gate's clock (and its timeout) include its own set-up
        self.params = p
        self.secrets = [p["api_key"]] if p["api_key"] else []
        self.http = Http(module, p["url"], p["api_key"], p["request_timeout"])
        self.unit: UnitWatcher | None = None
        self.proc: PidWatcher | None = None
        self.log: JournalLog | FileLog | None = None
        self.health_status = None
        self.health_detail = None
        self.first_probe_ok = None
        self.t_ready: float | None = None
        self.scanned = 0
        self.ready_scan = 0

    # -- set-up ----------------------------------------------------------------------------

    def setup(self):
        p = self.params
        if p["pid"] is not None:
            self.proc = PidWatcher(p["pid"])
        if p["unit"]:
            watcher = UnitWatcher(self.module, p["unit"])
            if watcher.available():
                watcher.snapshot()
                if watcher.exists():
                    self.unit = watcher
                elif not p["log_path"] and self.proc is None:
                    raise GateFailed(
                        "unit_missing",
                        "unit {} does not exist on this host ({})".format(
                            p["unit"], watcher.last.get("_error") or "LoadState=not-found"
                        ),
                    )
            elif not p["log_path"] and self.proc is None:
                raise GateFailed(
                    "unit_missing",
                    "systemctl not found: cannot watch unit {}; give log_path/pid or unit: ''".format(p["unit"]),
                )
        not_before = None
        if self.unit is not None:
            not_before = self.unit.start_epoch()
        if not_before is None and self.proc is not None:
            not_before = self.proc.start_epoch()
        self.not_before = not_before
        if p["log_path"]:
            self.log = FileLog(p["log_path"], not_before)
        elif self.unit is not None:
            self.log = JournalLog(self.module, (self.unit.baseline or {}).get("InvocationID"))

    # -- checks ----------------------------------------------------------------------------

    def lines(self):
        return self.log.launch() if self.log is not None else []

    def check_process(self):
        if self.unit is not None:
            problem = self.unit.problem(self.unit.snapshot())
            if problem:
                raise GateFailed(problem[0], problem[1])
        if self.proc is not None:
            problem = self.proc.problem()
            if problem:
                raise GateFailed(problem[0], problem[1])
        if self.log is not None and self.log.restarted_in_log():
            raise GateFailed("restarted", "a new launch started in {} while waiting".format(self.params["log_path"]))

    def startup_lines(self):
        """This start's lines up to SGLang's ready line (docs/reference/sglang.md §5.1 step 10).

        A traceback after it (a request that failed at run time) is not a start-up failure:
        when the gate runs against a server that came up long ago, /health decides.
        """
        lines = self.lines()
        for i in range(self.ready_scan, len(lines)):
            if is_ready_line(lines[i]):
                return lines[:i]
        self.ready_scan = max(0, len(lines) - 1)
        return lines

    def check_log(self):
        """Fail on a fatal line in the start-up lines that arrived since the last check."""
        if self.log is None:
            return
        self.log.read()
        lines = self.startup_lines()
        if len(lines) < self.scanned:
            self.scanned = 0
        # re-scan a little context so a traceback split across two reads is seen whole
        window = lines[max(0, self.scanned - 50) :]
        self.scanned = len(lines)
        if window and find_fatal(window) is not None:
            self.settle()
            fatal = find_fatal(self.startup_lines())
            if fatal is not None:
                raise GateFailed(fatal["kind"], fatal["reason"])

    def settle(self):
        """Read on briefly so a traceback's last line (the real reason) is in the log."""
        log = self.log
        if log is None:
            return
        deadline = time.monotonic() + FATAL_SETTLE_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if log.read():
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= FATAL_QUIET_S:
                fatal = find_fatal(self.startup_lines())
                if fatal is not None and not fatal["generic"]:
                    return

    def joined(self):
        """A worker node: this start's log shows the rank joined the group (sglang_log.JOINED_TEXT)."""
        ok = any(is_joined_line(ln) for ln in self.lines())
        self.health_detail = (
            "joined the group"
            if ok
            else "not joined yet (no 'Init torch distributed ends.' or 'Init parallel ends.' line)"
        )
        if self.first_probe_ok is None:
            self.first_probe_ok = ok
        return ok

    def probe(self, remaining):
        if self.params["worker"]:
            return self.joined()
        status, body, err = self.http.get("/health", timeout=remaining)
        self.health_status = status
        if status is None:
            self.health_detail = f"no answer ({err})"
        else:
            snippet = " ".join(body.split())[:200]
            self.health_detail = f"HTTP {status}" + ((": " + snippet) if snippet else "")
        ok = status == 200
        if self.first_probe_ok is None:
            self.first_probe_ok = ok
        return ok

    # -- the loop --------------------------------------------------------------------------

    def wait(self):
        p = self.params
        deadline = self.t0 + p["timeout"]
        while True:
            self.check_process()
            self.check_log()
            remaining = deadline - time.monotonic()
            if self.probe(max(remaining, 0.2)):
                self.t_ready = time.monotonic()
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                # the server may have died during the last probe: report that, not a timeout
                self.check_process()
                self.check_log()
                if p["worker"]:
                    raise GateFailed(
                        "timeout",
                        "timed out after {:.0f} s waiting for this worker node to join the group; {}".format(
                            p["timeout"], self.health_detail or "no log"
                        ),
                    )
                raise GateFailed(
                    "timeout",
                    "timed out after {:.0f} s waiting for {}/health to answer 200; last answer: {}".format(
                        p["timeout"], self.http.base, self.health_detail or "none"
                    ),
                )
            time.sleep(min(p["interval"], remaining))

    def settle_unit(self):
        """After a failure: the unit's state as it is now, not as last polled. A server that printed
        its fatal traceback is still exiting for a moment; wait (at most UNIT_SETTLE_S) for systemd
        to see it leave `active`, so the reported state and the message agree with the log."""
        if self.unit is None:
            return
        deadline = time.monotonic() + UNIT_SETTLE_S
        while True:
            props = self.unit.snapshot()
            if props.get("ActiveState") not in ("active", "reloading") or time.monotonic() >= deadline:
                return
            time.sleep(0.1)

    def dead_reason(self, err):
        """For a dead unit without a fatal line yet: read the rest of its log for the cause."""
        if self.log is None or err.kind not in ("unit_dead", "restarted", "process_exited"):
            return err
        deadline = time.monotonic() + DEAD_LOG_GRACE_S
        while True:
            self.log.read()
            fatal = find_fatal(self.lines())
            if fatal is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if fatal is not None:
            # the unit's state is added to the message anyway; keep what else happened
            context = "" if err.kind == "unit_dead" else err.reason
            return GateFailed(fatal["kind"], fatal["reason"], context)
        return err

    # -- results ---------------------------------------------------------------------------

    def tail(self):
        lines = self.lines()
        n = self.params["log_lines"]
        tail = lines[-n:] if n > 0 else []
        return [redact(ln, self.secrets) for ln in tail]

    def common(self):
        res = {
            "changed": False,
            "url": self.http.base,
            "waited_seconds": round(time.monotonic() - self.t0, 3),
            "health_status": self.health_status,
            "log_source": self.log.source if self.log is not None else None,
            "invocation_id": (self.unit.baseline or {}).get("InvocationID") or None if self.unit else None,
            "log_tail": self.tail(),
        }
        if self.unit is not None:
            res["unit_state"] = self.unit.state()
        return res

    def ready_seconds(self, lines):
        t_ready = self.t_ready if self.t_ready is not None else time.monotonic()
        waited = t_ready - self.t0
        start = self.not_before
        if not self.first_probe_ok and start is not None:
            now_epoch = time.time() - (time.monotonic() - t_ready)
            return max(0.0, now_epoch - start)
        first_ts = ready_ts = None
        for raw in lines:
            ln = parse_line(raw)
            if ln is None or not ln.sglang:
                continue
            if first_ts is None:
                first_ts = parse_timestamp(ln.timestamp)
            if is_ready_line(ln):
                ready_ts = parse_timestamp(ln.timestamp)
        if first_ts is not None and ready_ts is not None and ready_ts >= first_ts:
            return ready_ts - first_ts
        return waited

    def report(self):
        if self.log is not None:
            self.log.read()
        lines = self.lines()
        if self.params["worker"]:
            # a worker node serves no API: what there is to report is that it joined
            res = self.common()
            res["joined"] = True
            res["ready_seconds"] = round((self.t_ready or time.monotonic()) - self.t0, 3)
            res["sglang_warnings"] = []
            return res
        summary = summarize(lines)
        info, info_path = self.server_info()
        info_fields = parse_server_info(info) if info is not None else None
        models = None
        if not summary.get("served_model_name") and not (info_fields or {}).get("served_model_name"):
            _st, body = self.http.get_json("/v1/models")
            models = parse_models(body)
        schedule = None
        if info_fields is not None:
            spec = info_fields.get("speculative") or {}
            schedule = read_schedule(
                spec.get("adaptive"), spec.get("adaptive_config"), info_fields.get("version"), spec.get("num_steps")
            )
        res = self.common()
        res.update(build_report(summary, info_fields, models, info_path, schedule))
        res["sglang_warnings"] = [redact(w, self.secrets) for w in res["sglang_warnings"]]
        res["ready_seconds"] = round(self.ready_seconds(lines), 3)
        return res

    def server_info(self):
        for path in SERVER_INFO_PATHS:
            status, body = self.http.get_json(path)
            if status == 200 and isinstance(body, dict):
                return body, path
            if status not in (404, 405):
                break
        return None, None


# The most of an adaptive config file the gate reads (SGLang's are a few hundred bytes).
SCHEDULE_FILE_MAX = 1 << 20


def read_schedule(adaptive, config_path, version, launch_steps=None):
    """The schedule the server resolved (SGLang's JSON), or None when it runs static.

    SGLang exposes the switch and the file, not the buckets: /server_info has the resolved
    ``speculative_adaptive`` (False after a fallback) and ``speculative_adaptive_config`` (0.5.23
    utils/common.py build_server_info -> server_args.resolved_dict()), and the log names the first
    bucket's candidates only (``AdaptiveSpeculativeParams initialized``). So the gate, on the host,
    reads the file the server read, as the server's release reads it
    (plugins/module_utils/sglang_adaptive.py resolved_schedule; no file: SGLang's default).
    """
    if not adaptive:
        return None
    form = adaptive_config_form(version or "")
    cfg = None
    if config_path:
        try:
            with open(config_path, "rb") as f:
                data = f.read(SCHEDULE_FILE_MAX + 1)
            if len(data) > SCHEDULE_FILE_MAX:
                return None
            cfg = json.loads(data.decode("utf-8"))
        except (OSError, ValueError):
            return None
    return resolved_schedule(cfg, form, version, launch_steps)


def build_report(summary, info, models, info_path=None, schedule=None):
    """Merge the log summary, ``/server_info`` and ``/v1/models`` into the return keys (the rule and
    the types: module_utils/sglang_gate_report.py, which the tuner reads them back with)."""
    return GateReport.build(summary, info, models, info_path, schedule).to_json()


def argument_spec():
    return dict(
        url=dict(type="str", default="http://127.0.0.1:30000"),
        unit=dict(type="str", default="sglang-qwen.service"),
        log_path=dict(type="path"),
        pid=dict(type="int"),
        timeout=dict(type="float", default=600),
        interval=dict(type="float", default=0.5),
        request_timeout=dict(type="float", default=5),
        api_key=dict(type="str", no_log=True),
        log_lines=dict(type="int", default=40),
        validate_certs=dict(type="bool", default=True),
        use_proxy=dict(type="bool", default=False),
        worker=dict(type="bool", default=False),
    )


def validate(module):
    p = module.params
    if not p["url"].startswith(("http://", "https://")):
        module.fail_json(msg="url must start with http:// or https://, got {!r}".format(p["url"]))
    try:  # what urllib would refuse at the first probe: an unclosed IPv6 bracket, a port out of range
        parts = urllib.parse.urlsplit(p["url"])
        if not parts.hostname or parts.port == 0:  # reading .port raises for one out of range
            raise ValueError("no host" if not parts.hostname else "port 0")
    except ValueError as exc:
        module.fail_json(msg="url is not one urllib can use ({}): {!r}".format(exc, p["url"]))
    for key in ("timeout", "interval", "request_timeout"):
        if p[key] is None or p[key] <= 0:
            module.fail_json(msg=f"{key} must be > 0, got {p[key]!r}")
    if p["log_lines"] < 0:
        module.fail_json(msg="log_lines must be >= 0, got {!r}".format(p["log_lines"]))
    if p["pid"] is not None and p["pid"] <= 0:
        module.fail_json(msg="pid must be > 0, got {!r}".format(p["pid"]))


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    validate(module)
    gate = Gate(module)
    try:
        gate.setup()
        gate.wait()
        res = gate.report()
    except GateFailed as err:
        err = gate.dead_reason(err)
        gate.settle_unit()
        res = gate.common()
        reason = redact(err.reason, gate.secrets)
        context = [c for c in (err.context, _unit_context(gate)) if c]
        head = reason + (" [{}]".format("; ".join(context)) if context else "")
        tail = res["log_tail"]
        msg = head + (
            "\nLast {} log lines:\n{}".format(len(tail), "\n".join(tail)) if tail else "\n(no log lines for this start)"
        )
        res.update(reason=reason, failure_kind=err.kind, reported_at=round(time.time(), 3))
        module.fail_json(msg=msg, **res)
    # SGLang's warnings become the task's own (the result's `warnings`, docs/architecture.md); the same
    # list is in `sglang_warnings`, free of anything Ansible adds there.
    for warning in res["sglang_warnings"]:
        module.warn(warning)
    res["reported_at"] = round(time.time(), 3)
    module.exit_json(**res)


def _unit_context(gate):
    parts = []
    if gate.unit is not None and gate.unit.last:
        st = gate.unit.last
        parts.append(
            "unit {} {}/{}, Result={}, exit status {}".format(
                gate.params["unit"],
                st.get("ActiveState"),
                st.get("SubState"),
                st.get("Result"),
                st.get("ExecMainStatus"),
            )
        )
    parts.append("after %.1f s" % (time.monotonic() - gate.t0))
    return ", ".join(parts)


if __name__ == "__main__":
    main()
