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
