"""Applying one configuration: an ansible-runner run of the deploy play, read from its events.

How (docs/architecture.md "Roles", docs/reference/ansible.md §3):
- A fresh private data dir per run (`tempfile.mkdtemp`): ansible-runner never rewrites an
  existing `env/extravars`, so a reused dir would deploy a previous run's variables (gotcha 1).
  `project_dir` is the repository, so its ansible.cfg (roles, library, collections) applies.
- The first run on a host in a tuner process is a full run; later ones only re-render and restart
  (`--tags sglang_server_configure,sglang_server_run --skip-tags cuda_env`): an unchanged host is
  not re-provisioned, and the GPU facts and checks that the full run made are not made again (only
  the spec_* variables change between configurations; the sglang_server preflight still validates
  them before anything changes).
- The role publishes the `sglang_ready` module's result with `set_stats`; it turns up in the
  `playbook_on_stats` event's `artifact_data` (not in `Runner.stats`). The module's own
  `runner_on_ok` event is the fallback for plays whose gate task is not `no_log` (the role's is,
  because its arguments carry the API key, so there the publication is the source). A failed configuration is a `runner_on_failed` event
  whose `msg` starts with the reason; the role has already rolled the host back.
- The event handler returns True, or ansible-runner drops the events (gotcha 2).
- Extra vars reach the play as `-e @FILE` (0600, in the private data dir), not through
  ansible-runner's `extravars`, which it passes on ansible-playbook's command line.
- The private data dir holds `env/` and `artifacts/<id>/command`, which carry the whole
  environment, API key included (gotcha 5): only the stdout and the job events are kept, under
  OUT/deploy/<config>/, after every occurrence of the key is scrubbed; the dir is deleted.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_utils.sglang_gate_report import GateReport

from ..data.records import DeployRecord
from ..data.redact import Redactor
from ..spec.configs import SpecConfig

FAST_TAGS = ("sglang_server_configure", "sglang_server_run")
# Read-only GPU facts and checks: made by a host's full run; nothing a configuration changes affects them.
FAST_SKIP_TAGS = ("cuda_env",)
READY_ACTION_SUFFIX = "sglang_ready"


def project_root() -> Path:
    """The repository the tuner runs from (it holds ansible.cfg and playbooks/)."""
    return Path(__file__).resolve().parents[2]


# -- pure: reading the runner's events -----------------------------------------------------------


@dataclass
class PlayOutcome:
    report: dict[str, Any] | None = None  # the sglang_ready module's result
    client_url: str | None = None
    failure: str | None = None  # the reason, when the host's configuration failed
    failed_task: str | None = None
    source: str | None = None  # "set_stats" | "runner_on_ok"


def _action(ev: dict[str, Any]) -> str:
    data = ev.get("event_data") or {}
    return str(data.get("resolved_action") or data.get("task_action") or "")


def _serves(entry: Any) -> bool:
    """A published readiness entry of a rank that serves the API (not a worker node's `joined`)."""
    return isinstance(entry, dict) and isinstance(entry.get("report"), dict) and not entry["report"].get("joined")


def outcome_from_events(events: list[dict[str, Any]], host: str, members: tuple[str, ...] = ()) -> PlayOutcome:
    """What one host's deploy came to, from ansible-runner job events (pure).

    `host` is the one whose readiness report counts (a multi-node group's head); a failure on any
    of `members` (the group's other nodes) fails the deploy too.
    """
    out = PlayOutcome()
    mine = {host, *members}
    failures: list[tuple[str, str, Any]] = []  # (task, message, the host that failed)
    for ev in events:
        kind = ev.get("event")
        data = ev.get("event_data") or {}
        if kind == "playbook_on_stats":
            published = (data.get("artifact_data") or {}).get("sglang_ready") or {}
            entry = published.get(host) if isinstance(published, dict) else None
            if members and isinstance(published, dict) and not _serves(entry):
                # the group's head is the rank that serves: the one whose report is no worker's
                # (`joined`). The tuner orders a group as the role does, but a head it cannot read
                # (a templated sglang_server_multinode_head) leaves the inventory's order, whose
                # first host may be a worker with SGLang's placeholder /health
                entry = next((published[m] for m in (host, *members) if _serves(published.get(m))), entry)
            if isinstance(entry, dict) and isinstance(entry.get("report"), dict):
                out.report = entry["report"]
                out.client_url = entry.get("client_url") or out.client_url
                out.source = "set_stats"
            continue
        if data.get("host") not in (None, *mine):
            continue
        if kind == "runner_on_ok" and _action(ev).endswith(READY_ACTION_SUFFIX) and data.get("host") == host:
            if out.source != "set_stats" and isinstance(data.get("res"), dict):
                res = dict(data["res"])
                res.pop("invocation", None)
                out.report = res
                out.source = "runner_on_ok"
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            res = data.get("res") or {}
            if res.get("censored"):  # a no_log task (the gate): the role's final failure says why
                failures.append((str(data.get("task") or ""), "", data.get("host")))
                continue
            msg = _result_message(res, "failed")
            if members and data.get("host") != host:
                msg = f"{data.get('host')}: {msg}"
            failures.append((str(data.get("task") or ""), msg, data.get("host")))
        elif kind == "runner_on_unreachable":
            res = data.get("res") or {}
            prefix = f"{data.get('host')} unreachable: " if members else "unreachable: "
            failures.append((str(data.get("task") or ""), prefix + _result_message(res, ""), data.get("host")))
    told = [f for f in failures if f[1]]
    if failures:
        # The role's final failure (after its rollback) starts with the reason; earlier ones
        # (the gate itself, inside a block the role rescued) are detail, or censored (no_log). A
        # group's final failure is every node's: the head's words, whatever order the events came in
        final = told[-1][0] if told else None
        heads = [f for f in told if f[0] == final and f[2] == host]
        out.failed_task, out.failure = (
            heads[-1][:2] if heads else told[-1][:2] if told else (failures[-1][0], "failed (output hidden by no_log)")
        )
        if len(told) > 1 and told[0][0] != out.failed_task and told[0][1] not in out.failure:
            out.failure = f"{out.failure} (first failure: {told[0][0]}: {told[0][1]})"
    if out.client_url is None and out.report:
        out.client_url = out.report.get("client_url") or out.report.get("url")
    return out


def _result_message(res: dict[str, Any], default: str) -> str:
    """Why a task failed: its message, or for a loop (whose own message is Ansible's summary, "One
    or more items failed", even "All items completed" for an unreachable host) the first failed
    item's, named by its item."""
    items = res.get("results")
    if isinstance(items, list):
        for it in items:
            if isinstance(it, dict) and (it.get("failed") or it.get("unreachable")):
                why = it.get("msg") or it.get("stderr") or it.get("module_stderr")
                if why:
                    return f"item {it.get('item')!r}: {why}"
    return str(res.get("msg") or res.get("stderr") or res.get("module_stderr") or default)


def stdout_tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# -- running the play ---------------------------------------------------------------------------


@dataclass
class DeployResult:
    host: str
    config: SpecConfig
    ok: bool
    reason: str | None
    client_url: str | None
    report: dict[str, Any] | None
    elapsed_s: float
    runner_status: str
    runner_rc: int | None
    tags: list[str] = field(default_factory=list)
    artifacts: str | None = None
    source: str | None = None
    detail: str | None = None  # the whole failure message (log tail included)
    members: list[str] = field(default_factory=list)  # a multi-node group's hosts, head first

    @property
    def rollback(self) -> str | None:
        """The role's own account of the rollback ("Rolled back ... healthy again"), if it gave one."""
        for line in (self.detail or "").splitlines():
            if line.startswith(("Rolled back", "No earlier configuration")):
                return line.strip()
        return None

    @property
    def gate(self) -> GateReport:
        """The sglang_ready module's report, typed (module_utils/sglang_gate_report.py)."""
        return GateReport.from_json(self.report)

    def record(self) -> DeployRecord:
        """The `deploy` record of records.jsonl (tuner/data/records.py)."""
        rep = self.report or {}
        return DeployRecord(
            config=self.config,
            host=self.host,
            hosts=self.members if len(self.members) > 1 else None,
            status="ok" if self.ok else "failed",
            reason=self.reason,
            rollback=self.rollback,
            detail=self.detail if self.detail != self.reason else None,
            client_url=self.client_url,
            ready_s=rep.get("ready_seconds"),
            capacity=rep.get("capacity"),
            speculative=rep.get("speculative"),
            server=rep.get("server"),
            # SGLang's own (the module's `sglang_warnings`, always a list); Ansible adds the task
            # result's `warnings` only when there are some, with any of its own among them
            warnings=rep.get("sglang_warnings", rep.get("warnings")),
            elapsed_s=round(self.elapsed_s, 3),
            runner_status=self.runner_status,
            runner_rc=self.runner_rc,
            tags=self.tags,
            artifacts=self.artifacts,
            result_source=self.source,
        )


RUNNER_DIR_PREFIX = "sgt-runner-"


def remove_stale_runner_dirs(tmp: str | None = None) -> list[Path]:
    """ansible-runner's private directories that a tuner killed mid-deploy (SIGKILL: no `finally`)
    left behind: their `artifacts/*/command` holds the play's environment, the API key included.
    A directory is named for the tuner that made it (`sgt-runner-<pid>-...`) and removed once that
    process is gone; one of a live process, or not so named, is left alone."""
    removed: list[Path] = []
    for d in Path(tmp or tempfile.gettempdir()).glob(RUNNER_DIR_PREFIX + "*-*"):
        pid = d.name[len(RUNNER_DIR_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or not d.is_dir() or d.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # that tuner still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # another user's process holds the number
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


class Deployer:
    """Runs the deploy play for one configuration on one host."""

    def __init__(
        self,
        *,
        inventory: Path,
        out_dir: Path,
        extravars: dict[str, Any] | None = None,
        project_dir: Path | None = None,
        playbook: str = "playbooks/deploy.yml",
        redactor: Redactor | None = None,
        timeout_s: float = 1800.0,
        cancel: threading.Event | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        slots: dict[str, list[str]] | None = None,
    ):
        self.project_dir = Path(project_dir or project_root()).resolve()
        self.playbook = playbook
        # absolute, not resolved: the play reads the group_vars/ beside the path as given
        self.inventory = Path(os.path.abspath(inventory))
        self.out_dir = Path(out_dir)
        self.extravars = dict(extravars or {})
        self.redactor = redactor or Redactor()
        self.timeout_s = timeout_s
        self.cancel = cancel or threading.Event()
        self.on_event = on_event
        self.slots = dict(slots or {})  # slot name -> its hosts (head first)
        self._full_done: set[str] = set()
        self._lock = threading.Lock()
        remove_stale_runner_dirs()

    def members(self, slot: str) -> list[str]:
        return self.slots.get(slot) or [slot]

    def has_had_full_run(self, slot: str) -> bool:
        with self._lock:
            return slot in self._full_done

    def _envvars(self) -> dict[str, str]:
        """On top of the inherited environment (which carries SGLANG_API_KEY for the role):
        the project's ansible.cfg, and the venv's bin first on PATH for Ansible's helpers."""
        path = os.environ.get("PATH", "")
        venv_bin = str(Path(sys.executable).parent)
        if venv_bin not in path.split(os.pathsep):
            path = venv_bin + os.pathsep + path
        return {
            "ANSIBLE_CONFIG": str(self.project_dir / "ansible.cfg"),
            "PATH": path,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }

    def _artifact_dir(self, label: str) -> Path:
        base = self.out_dir / "deploy"
        d = base / label
        n = 2
        with self._lock:
            while d.exists():
                d = base / f"{label}-{n}"
                n += 1
            d.mkdir(parents=True)
        return d

    def deploy(
        self,
        config: SpecConfig,
        host: str,
        *,
        label: str | None = None,
        full: bool | None = None,
        extravars: dict[str, Any] | None = None,
    ) -> DeployResult:
        """One play run limited to slot `host` (a host, or a multi-node group); never raises for a
        failed play."""
        import ansible_runner  # the tuner extra; imported late so `--help` stays fast

        with self._lock:
            do_full = (host not in self._full_done) if full is None else full
        tags = [] if do_full else list(FAST_TAGS)
        events: list[dict[str, Any]] = []

        def handler(ev: dict[str, Any]) -> bool:
            events.append(ev)
            if self.on_event is not None:
                try:
                    self.on_event(host, ev)
                except Exception:  # progress display must never break a deploy
                    pass
            return True  # keep the event (docs/reference/ansible.md §3, gotcha 2)

        extravars = {**self.extravars, **(extravars or {}), **config.extravars()}
        # 0700, deleted below (or by the next tuner, `remove_stale_runner_dirs`, if this one is killed)
        pdd = Path(tempfile.mkdtemp(prefix=f"{RUNNER_DIR_PREFIX}{os.getpid()}-"))
        started = time.monotonic()
        status, rc, stdout = "failed", None, ""
        try:
            # Extra vars as `-e @FILE` (0600 in the private dir), not ansible-runner's `extravars=`,
            # which it puts on ansible-playbook's command line as JSON: every local user reads that
            # in /proc/PID/cmdline for the whole play (an inventory variable's value never is there)
            vars_file = pdd / "extravars.json"
            fd = os.open(vars_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(extravars, f, default=str)
            kwargs: dict[str, Any] = dict(
                private_data_dir=str(pdd),
                project_dir=str(self.project_dir),
                playbook=self.playbook,
                inventory=str(self.inventory),
                limit=",".join(self.members(host)),
                cmdline=f"-e @{shlex.quote(str(vars_file))}",
                event_handler=handler,
                quiet=True,
                suppress_env_files=True,
                # whole seconds, never 0: ansible-runner sets no job timeout at 0 (`if self.timeout`)
                timeout=max(1, math.ceil(self.timeout_s)),
                cancel_callback=self.cancel.is_set,
                envvars=self._envvars(),
            )
            if tags:
                kwargs["tags"] = ",".join(tags)
                kwargs["skip_tags"] = ",".join(FAST_SKIP_TAGS)
            try:
                r = ansible_runner.run(**kwargs)
                status, rc = r.status, r.rc
                try:
                    stdout = r.stdout.read()
                except Exception:
                    stdout = ""
            except Exception as exc:  # ansible-runner itself broke (bad project dir, ...)
                status, rc, stdout = "error", None, f"ansible-runner: {exc}"
        finally:
            elapsed = time.monotonic() - started
            shutil.rmtree(pdd, ignore_errors=True)  # env/ and command carry the environment
        members = self.members(host)
        outcome = outcome_from_events(events, members[0], tuple(members[1:]))
        artifacts = self._keep_artifacts(label or config.config_id, stdout, events)
        ok = status == "successful" and outcome.report is not None and outcome.failure is None
        reason = detail = None
        if not ok:
            if status in ("timeout", "canceled"):
                # ansible-runner killed the play: whatever failed before (the gate, inside the block
                # the role rescues), its rescue (the rollback) did not finish, so this comes first;
                # an earlier failure is the detail
                reason = (
                    f"the deploy play ran past {self.timeout_s:g} s" if status == "timeout" else "canceled"
                ) + f", stopped before its gate or rollback could finish: {host} may be left on this configuration"
                reason += " until the next deploy there"
                if outcome.failure:
                    detail = self.redactor.scrub(f"{reason}; before that: {outcome.failure}")
            elif outcome.failure:
                # The role's message: the reason on its first line, then the rollback outcome,
                # the failed step and the log tail.
                detail = self.redactor.scrub(outcome.failure)
                reason = outcome.failure.strip().splitlines()[0] if outcome.failure.strip() else outcome.failure
            elif status == "successful":
                reason = "the play succeeded but published no sglang_ready result"
            else:
                reason = f"the deploy play {status} (rc {rc}): {stdout_tail(stdout, 6)}"
            reason = self.redactor.scrub(reason)
        if ok:
            with self._lock:
                self._full_done.add(host)
        return DeployResult(
            host=host,
            config=config,
            ok=ok,
            reason=reason,
            client_url=outcome.client_url,
            report=self.redactor.scrub_obj(outcome.report),
            elapsed_s=elapsed,
            runner_status=status,
            runner_rc=rc,
            tags=tags,
            artifacts=str(artifacts.relative_to(self.out_dir)) if artifacts else None,
            source=outcome.source,
            detail=detail,
            members=members,
        )

    def _keep_artifacts(self, label: str, stdout: str, events: list[dict[str, Any]]) -> Path | None:
        try:
            d = self._artifact_dir(label)
            (d / "stdout.txt").write_text(self.redactor.scrub(stdout))
            with open(d / "events.jsonl", "w") as f:
                for ev in events:
                    f.write(json.dumps(self.redactor.scrub_obj(ev), default=str) + "\n")
            return d
        except OSError:
            return None
