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

import yaml
from roles_testlib import ROOT, run

TASKS = ROOT / "roles" / "sglang_server" / "tasks"
MSG = "KV cache pool is empty [unit failed]\nLast 2 log lines:\nline one\nline two"
SECOND = "the rank's own reason [unit activating]\nLast 1 log lines:\nonly line"


def task_named(path, name: str) -> dict:
    return next(t for t in yaml.safe_load(path.read_text()) if t.get("name") == name)


def render(tmp_path, cases: dict[str, tuple[str, dict]]) -> dict[str, str]:
    """Render each (expression, variables) with ansible-playbook on localhost: name -> text."""
    tasks = [
        {"name": name, "ansible.builtin.debug": {"msg": expr}, "vars": variables}
        for name, (expr, variables) in cases.items()
    ]
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]
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


def test_a_rollback_gates_the_restored_server_where_it_listens(tmp_path):
    """A run that moved sglang_server_port and failed restored the unit that last passed, which
    listens on the old port; its gate asked the new one, where nothing served (or something else
    did), and waited the whole gate timeout. The restored unit's --port is read back and the gate's
    URL follows it, in the single host's rollback and the group's."""
    role_vars = yaml.safe_load((ROOT / "roles" / "sglang_server" / "vars" / "main.yml").read_text())
    url_expr = role_vars["_sglang_server_restored_gate_url"]
    # one reading of the restored unit's port, for the single host's rollback and the group's
    port_expr = role_vars["_sglang_server_restored_port"]
    unit = (
        "[Service]\nExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server --model-path /m "
        "--nccl-port 29999 --dist-init-addr 10.0.0.1:5000 --port 30000 --host 0.0.0.0\n"
    )
    import base64

    slurped = {"content": base64.b64encode(unit.encode()).decode()}

    def url(gate: str, restored: str, port: int = 30001) -> tuple[str, dict]:
        return url_expr, {
            "sglang_server_gate_url": gate,
            "sglang_server_port": port,
            "_sglang_server_restored_port": restored,
        }

    got = render(
        tmp_path,
        {
            "port": (port_expr, {"__sglang_server_restored_unit": slurped}),
            # the group's node without a good configuration: its read was skipped
            "skipped": (port_expr, {"__sglang_server_restored_unit": {"skipped": True, "changed": False}}),
            "none": (port_expr, {"__sglang_server_restored_unit": {"content": base64.b64encode(b"x").decode()}}),
            "v4": url("http://127.0.0.1:30001", "30000"),
            "v6": url("http://[::1]:30001", "30000"),
            "path": url("http://h.example:30001/sglang", "30000"),
            # a gate at another port (a proxy or TLS front) is the user's: left as it is
            "proxy": url("https://127.0.0.1:8443/sglang", "30000"),
            "v6 no port": url("http://[::1]/", "30000"),
            "kept": url("http://127.0.0.1:30000", "30000", port=30000),
            "unread": url("http://127.0.0.1:30001", ""),
        },
    )
    assert got["port"] == "30000" and got["none"] == got["skipped"] == "", got
    assert got["v4"] == "http://127.0.0.1:30000" and got["v6"] == "http://[::1]:30000", got
    assert got["path"] == "http://h.example:30000/sglang", got
    assert got["proxy"] == "https://127.0.0.1:8443/sglang" and got["v6 no port"] == "http://[::1]/", got
    assert got["kept"] == "http://127.0.0.1:30000" and got["unread"] == "http://127.0.0.1:30001", got
    for path in ("rollback.yml", "multinode_gate.yml"):
        text = (TASKS / path).read_text()
        assert "_sglang_server_restored_gate_url" in text or "__sglang_server_mn_gate_url" in text, path


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
