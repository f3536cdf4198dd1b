"""The role's own expressions (its task files' and vars/main.yml's Jinja), rendered by real Ansible.

The failure messages start with the reason's first line, not the module's whole message.

The gate (plugins/modules/sglang_ready.py) fails with "reason [unit state]" followed by the
start's log tail; the rollback and the multi-node gate keep that first line as the reason and print
the tail once, below it. The expressions are the task files' own, rendered by real Ansible: inside a
folded YAML block (`>-`), `'\\n'` reaches Jinja as a backslash and an n, which `split` never finds,
so the whole message, tail included, became the "reason" and the tail was printed twice.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from roles_testlib import ROOT, run

TASKS = ROOT / "roles" / "sglang_server" / "tasks"
MSG = "KV cache pool is empty [unit failed]\nLast 2 log lines:\nline one\nline two"
SECOND = "the rank's own reason [unit activating]\nLast 1 log lines:\nonly line"


def task_named(path, name: str) -> dict:
    return next(t for t in yaml.safe_load(path.read_text()) if t.get("name") == name)


def render(tmp_path, cases: dict[str, tuple[str, dict]], vars_files: list[str] | None = None) -> dict[str, Any]:
    """Render each (expression, variables) with ansible-playbook on localhost, the play reading
    `vars_files` first (a role's defaults and vars): name -> value."""
    tasks = [
        {"name": name, "ansible.builtin.debug": {"msg": expr}, "vars": variables}
        for name, (expr, variables) in cases.items()
    ]
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]
    if vars_files:
        play[0]["vars_files"] = vars_files
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = run(
        [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml")],
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    return {t["task"]["name"]: t["hosts"]["localhost"]["msg"] for t in out["plays"][0]["tasks"]}


def test_the_reason_is_the_first_line_of_the_gates_message(tmp_path):
    rollback = TASKS / "rollback.yml"
    reason = task_named(rollback, "Keep the reason the new configuration failed")["ansible.builtin.set_fact"]
    fail_vars = task_named(rollback, "Fail with the reason and the log tail")["vars"]
    gate = task_named(TASKS / "multinode_gate.yml", "Say how this rank did")["ansible.builtin.set_fact"]
    common = {"sglang_server_unit_name": "sglang-qwen.service", "sglang_server_rollback": True}
    outcome_vars = {
        **common,
        **{k: v for k, v in fail_vars.items() if k != "__sglang_server_outcome"},
        "__sglang_server_restore": {"found": True},
        "__sglang_server_rollback_gate": {"msg": SECOND, "failure_kind": "exited"},
    }
    got = render(
        tmp_path,
        {
            "reason": (reason["__sglang_server_failure"]["reason"], {"ansible_failed_result": {"msg": MSG}}),
            "outcome": (fail_vars["__sglang_server_outcome"], outcome_vars),
            "rank": (
                gate["__sglang_server_mn_rank_failure"],
                {
                    "__sglang_server_gate": {"msg": MSG, "failure_kind": "kv_pool"},
                    "__sglang_server_gate_recheck": {"skipped": True},
                },
            ),
            "rank after rank 0": (
                gate["__sglang_server_mn_rank_failure"],
                {
                    "__sglang_server_gate": {"msg": "ok", "ready_seconds": 3.0, "invocation_id": "a"},
                    "__sglang_server_gate_recheck": {"msg": SECOND, "failure_kind": "exited"},
                },
            ),
        },
    )
    assert got["reason"] == "KV cache pool is empty [unit failed]"
    assert got["outcome"] == (
        "Rolled back sglang-qwen.service on localhost to the last good configuration, but it did not come back "
        "either: the rank's own reason [unit activating]"
    )
    assert got["rank"] == "KV cache pool is empty [unit failed]"
    assert got["rank after rank 0"] == "the rank's own reason [unit activating]"


def test_a_bad_default_is_named_as_the_default(tmp_path):
    """spec_steps and spec_algorithm fall back to sglang_server_spec_steps_default and
    sglang_server_spec_algorithm_default: a bad default was reported as `spec_steps must be ...`,
    a variable the user never set."""
    text = (ROOT / "roles" / "sglang_server" / "vars" / "main.yml").read_text()
    expr = yaml.safe_load(text)["_sglang_server_spec"]
    limits = {"sglang_server_spec_max_steps": 16, "sglang_server_spec_max_topk": 16}
    limits["sglang_server_spec_draft_model_path"] = ""
    got = render(
        tmp_path,
        {
            "default": (
                expr,
                {**limits, "sglang_server_spec_steps_default": 20, "sglang_server_spec_algorithm_default": "EAGLE4"},
            ),
            "given": (
                expr,
                {
                    **limits,
                    "sglang_server_spec_steps_default": 3,
                    "sglang_server_spec_algorithm_default": "NEXTN",
                    "spec_steps": 20,
                    "spec_algorithm": "EAGLE4",
                },
            ),
        },
    )
    assert [e.split(" must be")[0] for e in got["default"]["errors"]] == [
        "sglang_server_spec_steps_default",
        "sglang_server_spec_algorithm_default",
    ], got["default"]
    assert [e.split(" must be")[0] for e in got["given"]["errors"]] == ["spec_steps", "spec_algorithm"], got["given"]


def test_an_interrupted_runs_files_restart_the_unit(tmp_path):
    """A run that wrote an env, profile or adaptive file and was interrupted before its restart left
    them on disk; the next identical run wrote nothing (changed_files []), systemd saw no change
    (NeedDaemonReload no), so nothing restarted, the gate passed on the old server, and the new
    files were kept as the last good ones. The last good copy differing from the files says so."""
    block = yaml.safe_load((TASKS / "run.yml").read_text())[0]
    start = next(
        t for t in block["block"] if t["name"] == "Start (or restart) a unit that is not running its current file"
    )
    seen = {"ActiveState": "active", "NeedDaemonReload": "no", "UnitFileState": "enabled"}

    def case(last_good_current):
        return {
            **block["vars"],
            "_sglang_server_applied": {
                "changed_files": [],
                "unit_state": seen,
                **({} if last_good_current is None else {"last_good_current": last_good_current}),
            },
            "__sglang_server_apply": {},
            "sglang_server_service_enabled": True,
        }

    exprs = {
        "runs": "{{ not (__sglang_server_changed | bool or __sglang_server_unit_ok | bool) }}",
        "state": start["ansible.builtin.systemd_service"]["state"],
    }
    cases = {f"{name} {lg}": (expr, case(lg)) for name, expr in exprs.items() for lg in (True, False, None)}
    got = render(tmp_path, cases)
    assert [got[f"runs {lg}"] for lg in (True, False, None)] == [False, True, False], got
    assert got["state False"] == "restarted", got
    # the group's path reads the same fact
    assert "last_good_current | default(true)" in (TASKS / "run_multinode.yml").read_text()


def test_a_forced_nccl_check_without_its_python_waits_for_the_engine(tmp_path):
    """cuda_env_nccl_check_force: true (what the skip message itself suggests on one GPU) ran the
    check in the role's first pass, before the engine venv existed, with no python: the play failed.
    An empty python skips it there; deploy.yml's second pass runs it with the venv's."""
    task = next(
        t
        for t in yaml.safe_load((ROOT / "roles" / "cuda_env" / "tasks" / "nccl_check.yml").read_text())
        if t.get("name") == "Decide whether the NCCL check runs"
    )
    expr = task["ansible.builtin.set_fact"]["__cuda_env_nccl_skip"]
    base = {"cuda_env_nccl_check": True, "cuda_env_gpu_facts_source": "nvidia-smi", "cuda_env_visible_gpu_count": 1}
    got = render(
        tmp_path,
        {
            "forced, no python": (expr, {**base, "cuda_env_nccl_check_force": True, "cuda_env_nccl_check_python": ""}),
            "forced": (
                expr,
                {**base, "cuda_env_nccl_check_force": True, "cuda_env_nccl_check_python": "/v/bin/python"},
            ),
            "one GPU": (expr, {**base, "cuda_env_nccl_check_force": False, "cuda_env_nccl_check_python": ""}),
            "declared": (
                expr,
                {
                    **base,
                    "cuda_env_gpu_facts_source": "declared",
                    "cuda_env_nccl_check_force": False,
                    "cuda_env_nccl_check_python": "",
                },
            ),
        },
    )
    assert got["forced, no python"].startswith("cuda_env_nccl_check_python is empty"), got
    assert got["forced"] == "", got
    # unforced, the host's own reason comes first (an emulator host says so: tests/cuda_env)
    assert got["one GPU"].startswith("this host has 1 GPU"), got
    assert got["declared"].startswith("the GPUs are declared"), got


def test_the_hosts_wheelhouse_is_the_controllers_alone():
    """unarchive never removes a file: an older project wheel stayed beside a new version's, and the
    install's pip refused the two ('Cannot install sglang-tune 0.1.0 ... and sglang-tune 0.1.1'), on
    every later deploy. The copy starts from an empty directory, and pip upgrades to the new one."""
    tasks = yaml.safe_load((TASKS / "install_emulator_copy.yml").read_text())[0]["block"]
    names = [t["name"] for t in tasks]
    removal = names.index("Remove the host's older copy of the wheelhouse")
    assert tasks[removal]["ansible.builtin.file"]["state"] == "absent"
    assert (
        removal
        < names.index("Create the wheelhouse directory on the host")
        < names.index("Copy the wheelhouse to the host")
    )
    script = (ROOT / "roles" / "sglang_server" / "templates" / "install_emulator.sh.j2").read_text()
    assert "--upgrade sglang-tune" in script


def _unit(host: str = "0.0.0.0", port: int = 30000, extra: dict | None = None, key: str = "") -> str:
    """A unit's ExecStart as templates/sglang.service.j2 writes it: the launcher, then one line per
    entry of the role's flag mapping (sglang_flags.server_flags), each word systemd-quoted."""
    from sglang_utils import sglang_flags

    settings = {"engine": "sglang", "model_path": "/models/q", "host": host, "port": port, "extra_flags": extra or {}}
    secrets = " --secrets /run/credentials/%n/server-secrets.yaml" if key else ""
    config = " \\\n    --config /run/credentials/%n/server-secrets.yaml" if key else ""
    lines = "".join(
        " \\\n    " + " ".join(sglang_flags.systemd_exec_quote(w) for w in line)
        for line in sglang_flags.server_flags(settings)
    )
    return (
        "[Service]\nType=exec\n"
        f"ExecStart=/opt/sglang/venv/bin/python /opt/sglang/launcher/sglang_launcher.py{secrets} -- \\\n"
        f"    /opt/sglang/venv/bin/python -m sglang.launch_server{config}{lines}\n\nSyslogIdentifier=sglang-qwen\n"
    )


def _slurped(text: str) -> dict:
    import base64

    return {"content": base64.b64encode(text.encode()).decode(), "encoding": "base64", "source": "/etc/x"}


TLS = {"ssl-certfile": "/etc/ssl/gpu 1.pem", "ssl-keyfile": "/etc/ssl/gpu1.key"}
NO_FILE = {"failed": True, "msg": "file not found: /etc/sglang/sglang-qwen.secrets.yaml"}


def test_a_rollback_gates_the_restored_server_where_and_as_it_listens(tmp_path):
    """A failed run restored the unit that last passed; its gate probed the run's own URL and key.
    A run that moved the port, the listen address, turned TLS on or off or changed the API key
    restored a server that listened elsewhere, spoke another scheme or refused the run's key, and
    the message said a healthy server "did not come back either" after the whole gate timeout.
    The restored gate's URL is each part of the run's gate URL that named the run's server moved to
    the restored unit's (the default URL becomes the restored unit's default), and its key is the
    restored secrets file's. The gate tasks' own arguments, rendered by real Ansible with the role's
    defaults and vars, for the single host's rollback and the group's."""
    role = ROOT / "roles" / "sglang_server"
    gate = task_named(TASKS / "rollback.yml", "Restore the last good configuration and gate on it")["block"]
    args = next(t for t in gate if t["name"] == "Wait until the restored server is ready again")
    args = args["sglang_tune.serving.sglang_ready"]
    mn_args = yaml.safe_load((TASKS / "multinode_gate.yml").read_text())[0]["sglang_tune.serving.sglang_ready"]
    mn_block = task_named(
        TASKS / "rollback_multinode.yml", "Restore every node's last good files and gate the group on them"
    )
    mn_restart = next(t for t in mn_block["block"] if t["name"].startswith("Restart and gate the restored group"))
    mn_vars = next(t for t in mn_restart["block"] if t["name"] == "Gate the restored group")["vars"]

    def expr(a: dict) -> str:
        return (
            "{{ {'url': "
            + a["url"].strip()[2:-2]
            + ", 'validate_certs': "
            + a.get("validate_certs", "{{ true }}").strip()[2:-2]
            + ", 'api_key': "
            + a["api_key"].strip()[2:-2]
            + "} }}"
        )

    def case(unit: str | None, secrets: dict | None = None, **run: object) -> dict:
        given = {"sglang_server_api_key": "", **run}
        if unit is not None:
            given["__sglang_server_restored_unit"] = _slurped(unit)
        given["__sglang_server_restored_secrets"] = secrets if secrets is not None else NO_FILE
        return given

    key = _slurped('api-key: "old-key-9876543210"\n')
    cases = {
        "port": case(_unit(port=30000), sglang_server_port=30001),
        "host": case(_unit(host="10.0.0.5")),
        "v6 to v4": case(_unit(host="0.0.0.0"), sglang_server_host="::"),
        "to v6": case(_unit(host="fd00::5"), sglang_server_host="0.0.0.0"),
        "tls off": case(_unit(extra=TLS)),
        "tls on": case(_unit(), sglang_server_extra_flags=TLS, sglang_server_gate_url="https://gpu1.example:30000"),
        "both tls": case(
            _unit(extra=TLS, port=30000),
            sglang_server_extra_flags=TLS,
            sglang_server_gate_url="https://gpu1.example:30001",
            sglang_server_port=30001,
        ),
        "path": case(
            _unit(port=30000), sglang_server_port=30001, sglang_server_gate_url="http://h.example:30001/sglang"
        ),
        # a gate in front of the server (a proxy, TLS terminated there) is the user's: left as it is
        "proxy": case(
            _unit(port=30000, host="10.0.0.5"),
            sglang_server_port=30001,
            sglang_server_gate_url="https://127.0.0.1:8443/sglang",
        ),
        "v6 no port": case(_unit(port=30000), sglang_server_port=30001, sglang_server_gate_url="http://[::1]/"),
        "kept": case(_unit()),
        "unread": case(None, sglang_server_port=30001),
        "old key": case(_unit(key="k"), key, sglang_server_api_key="run-key-0123456789"),
        "no key": case(_unit(), sglang_server_api_key="run-key-0123456789"),
    }
    # the group's gate as rollback_multinode.yml includes it, with the restored head's variables
    group_vars = {"__sglang_server_mn_head": True, **mn_vars}
    got = render(
        tmp_path,
        {
            f"{n} {which}": (expr(a), {**v, **group_vars})
            for n, v in cases.items()
            for which, a in (("single", args), ("group", mn_args))
        },
        vars_files=[str(role / "defaults" / "main.yml"), str(role / "vars" / "main.yml")],
    )

    wrong = []

    def check(name: str, url: str, validate: bool = True, key: str | None = None) -> None:
        # `default(omit, true)`: no key is sent (Ansible drops an omitted value from the dict)
        want = {"url": url, "validate_certs": validate, **({} if key is None else {"api_key": key})}
        wrong.extend(
            (name, which, got[f"{name} {which}"]) for which in ("single", "group") if got[f"{name} {which}"] != want
        )

    check("port", "http://127.0.0.1:30000")
    check("host", "http://10.0.0.5:30000")
    # `::` is gated at ::1; a restored server on 0.0.0.0 listens on IPv4 only
    check("v6 to v4", "http://127.0.0.1:30000")
    check("to v6", "http://[fd00::5]:30000")
    # the run turned TLS off: the restored server answers TLS only, at 127.0.0.1, which its
    # certificate does not name (SGLang's own health checks do not check it there either)
    check("tls off", "https://127.0.0.1:30000", validate=False)
    # the run turned TLS on: the restored server answers plain HTTP, at the same name
    check("tls on", "http://gpu1.example:30000")
    check("both tls", "https://gpu1.example:30000")
    check("path", "http://h.example:30000/sglang")
    check("proxy", "https://127.0.0.1:8443/sglang")
    check("v6 no port", "http://[::1]/")
    check("kept", "http://127.0.0.1:30000")
    check("unread", "http://127.0.0.1:30001")
    # the restored server expects the key of its own secrets file, not this run's (and one
    # without a file expects none)
    check("old key", "http://127.0.0.1:30000", key="old-key-9876543210")
    check("no key", "http://127.0.0.1:30000")
    assert not wrong, f"{sorted({name for name, _, _ in wrong})}: {wrong}"
    for path in ("rollback.yml", "rollback_multinode.yml"):
        text = (TASKS / path).read_text()
        assert "Read the restored server's API key" in text and "no_log: true" in text, path


def test_a_running_users_home_and_a_new_users_state_directory(tmp_path):
    """A new sglang_server_state_dir made the user module run `usermod -d`, which refuses while the
    user's processes run (the server: shadow's usermod.c, E_USER_BUSY), and every run failed until
    the unit was stopped by hand: an existing user's home is left alone (the unit sets HOME=). A new
    sglang_server_user found the state directory's contents owned by the old one: they are handed
    over, walked only when the directory itself changed hands."""
    tasks = yaml.safe_load((TASKS / "install.yml").read_text())
    user = next(t for t in tasks if t["name"] == "Create the service user (system account, no login shell)")
    handover = next(t for t in tasks if t["name"].startswith("Give the state directory's contents"))
    home = user["ansible.builtin.user"]["home"]
    facts = {"sglang_server_user": "sglang", "sglang_server_state_dir": "/srv/sglang-new"}

    def dirs(changed: bool) -> dict:
        results = [
            {"item": {"path": "/opt/sglang"}, "changed": True},
            {"item": {"path": "/srv/sglang-new"}, "changed": changed},
        ]
        return {**facts, "__sglang_server_dirs": {"results": results}}

    got = render(
        tmp_path,
        {
            "existing": (
                home,
                {
                    **facts,
                    "ansible_facts": {
                        "getent_passwd": {"sglang": ["x", "999", "999", "", "/old", "/usr/sbin/nologin"]}
                    },
                },
            ),
            "new": (home, {**facts, "ansible_facts": {"getent_passwd": {"sglang": None}}}),
            "handed": ("{{ " + handover["when"] + " }}", dirs(True)),
            "kept": ("{{ " + handover["when"] + " }}", dirs(False)),
        },
    )
    # omitted: `debug` then prints its own default message
    assert got["existing"] == "Hello world!" and got["new"] == "/srv/sglang-new", got
    assert got["handed"] is True and got["kept"] is False, got
    assert handover["ansible.builtin.file"]["recurse"] is True
