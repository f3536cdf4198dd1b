"""Expressions of roles/sglang_server rendered as Ansible renders them (native types): the
rollback's closing message (tasks/rollback.yml) says what the restored server did, given the gate
results the module returns; ProtectHome=auto (vars/main.yml) opens /home for what the unit needs."""

from __future__ import annotations

from pathlib import Path

import yaml
from role_jinja import role_env

ROOT = Path(__file__).resolve().parents[2]


def outcome(gate: dict, restored: bool = True, rollback: bool = True) -> str:
    tasks = yaml.safe_load((ROOT / "roles/sglang_server/tasks/rollback.yml").read_text())
    fail = next(t for t in tasks if "ansible.builtin.fail" in t)
    env = role_env(strict=False)
    ctx = {
        "sglang_server_unit_name": "sglang-qwen.service",
        "inventory_hostname": "h1",
        "sglang_server_rollback": rollback,
        "__sglang_server_restore": {"found": restored},
        "__sglang_server_rollback_gate": gate,
    }
    for name in ("__sglang_server_where", "__sglang_server_restored", "__sglang_server_outcome"):
        ctx[name] = env.from_string(fail["vars"][name]).render(ctx)
    return str(ctx["__sglang_server_outcome"])


def test_a_restored_server_that_did_not_come_back_is_not_called_healthy():
    # what sglang_ready returns on failure under failed_when: false: failed is false, the verdict
    # is in failure_kind, and there is no ready_seconds
    gate = {"failed": False, "failure_kind": "unit_dead", "msg": "unit sglang-qwen.service is dead\nLast 3 log lines"}
    text = outcome(gate)
    assert "did not come back either: unit sglang-qwen.service is dead" in text and "healthy" not in text


def test_a_restored_server_that_passed_its_gate_is_healthy_again():
    text = outcome({"failed": False, "ready_seconds": 12.5})
    assert "it is healthy again (ready after 12.5 s)" in text


def test_with_nothing_to_return_to_the_unit_is_stopped():
    assert "the unit is stopped" in outcome({}, restored=False)


def protect_home(**paths: object) -> str:
    """roles/sglang_server/vars/main.yml's ProtectHome=auto rule, rendered as Ansible renders it."""
    return _home_rule("_sglang_server_protect_home", **paths)


def private_tmp(**paths: object) -> str:
    """roles/sglang_server/vars/main.yml's PrivateTmp= rule, rendered as Ansible renders it."""
    return _home_rule("_sglang_server_private_tmp", **paths)


def _home_rule(rule: str, **paths: object) -> str:
    from sglang_utils.sglang_flags import referenced_paths

    rules = yaml.safe_load((ROOT / "roles/sglang_server/vars/main.yml").read_text())
    env = role_env(**{"sglang_tune.serving.sglang_server_paths": referenced_paths})
    ctx: dict[str, object] = {
        "sglang_server_extra_flags": {},
        "sglang_server_environment": {},
        "sglang_server_protect_home": "auto",
        "sglang_server_model_path": "/models/m",
        "sglang_server_state_dir": "/var/lib/sglang",
        "sglang_server_spec_draft_model_path": "",
        "sglang_server_install_dir": "/opt/sglang",
        "sglang_server_venv_dir": "/opt/sglang/venv",
        "sglang_server_config_dir": "/etc/sglang",
        "sglang_server_python": "/usr/bin/python3",
        "sglang_server_read_write_paths": [],
        **paths,
    }
    ctx["_sglang_server_home_paths"] = env.from_string(rules["_sglang_server_home_paths"]).render(ctx)
    return str(env.from_string(rules[rule]).render(ctx))


def test_protect_home_auto_opens_home_read_only_for_what_the_unit_runs_from_there():
    assert protect_home() == "yes"
    assert protect_home(sglang_server_model_path="/home/ml/models/m") == "read-only"
    # ExecStart's interpreter and the files it reads: hidden, the unit could not start (203/EXEC)
    assert protect_home(sglang_server_python="/root/.pyenv/versions/3.11.9/bin/python3") == "read-only"
    assert protect_home(sglang_server_venv_dir="/home/ml/sglang/venv") == "read-only"
    assert protect_home(sglang_server_config_dir="/root/sglang-etc") == "read-only"


def test_paths_in_the_extra_flags_and_the_environment_are_weighed_too():
    """A --tokenizer-path or --chat-template under /home, a --lora-paths entry under /tmp, HF_HOME
    under /root: hidden inside the unit (ProtectHome=yes, PrivateTmp=yes), the server's start failed
    and the role rolled back a configuration it could not deploy."""
    flags = {"tokenizer-path": "/home/alice/tok", "chat-template": "/home/alice/tpl.jinja"}
    assert protect_home(sglang_server_extra_flags=flags) == "read-only"
    assert private_tmp(sglang_server_extra_flags=flags) == "yes"
    assert private_tmp(sglang_server_extra_flags={"lora-paths": ["a=/tmp/lora-a", "b=/srv/lora-b"]}) == "no"
    assert protect_home(sglang_server_environment={"HF_HOME": "/root/.cache/huggingface"}) == "read-only"
    assert protect_home(sglang_server_environment={"LD_LIBRARY_PATH": "/usr/lib:/home/x/lib"}) == "read-only"
    # neither a switch, a number nor a path elsewhere opens anything
    other = {"enable-metrics": True, "mem-fraction-static": 0.8, "tokenizer-path": "/srv/tok", "x": "http://h/home"}
    assert (
        protect_home(sglang_server_extra_flags=other) == "yes" and private_tmp(sglang_server_extra_flags=other) == "yes"
    )


def device_allow(policy: str, allow: list[str], multinode: bool) -> list[str]:
    """roles/sglang_server/vars/main.yml's DeviceAllow= lines, rendered as Ansible renders them."""
    rules = yaml.safe_load((ROOT / "roles/sglang_server/vars/main.yml").read_text())
    env = role_env()
    ctx = {
        "sglang_server_device_policy": policy,
        "sglang_server_device_allow": allow,
        "_sglang_server_multinode": multinode,
    }
    return list(env.from_string(rules["_sglang_server_device_allow"]).render(ctx))


def test_a_multi_node_group_opens_the_rdma_devices_where_the_list_closes_the_others():
    """NCCL that cannot open /dev/infiniband/uverbs* runs the group's collectives over TCP sockets
    and says so at INFO only; `auto` with no line opens every device, where one line would close the
    GPUs (the multi-node group lost them)."""
    gpus = ["char-nvidia rw"]
    imex = "char-nvidia-caps-imex-channels rw"
    assert device_allow("closed", gpus, True) == [*gpus, "char-infiniband_verbs rw", imex]
    assert device_allow("closed", gpus, False) == gpus
    assert device_allow("auto", [], True) == []
    assert device_allow("closed", [], True) == ["char-infiniband_verbs rw", imex]
    assert device_allow("closed", [*gpus, "char-infiniband_verbs r"], True) == [*gpus, "char-infiniband_verbs r", imex]
    # `char-nvidia-caps` is another group (systemd matches the names with fnmatch): not taken for it
    assert device_allow("closed", ["char-nvidia-caps rw"], True)[-1] == imex
    assert device_allow("closed", [imex], True) == [imex, "char-infiniband_verbs rw"]


def test_a_strict_policy_opens_the_pseudo_devices_closed_opens_by_itself():
    """systemd.resource-control(5): `closed` allows /dev/null, /dev/zero, /dev/full, /dev/random and
    /dev/urandom besides the list, `strict` only the list: ExecStartPre's `>/dev/null` (the UVM node
    was then never made) and Triton's compiler run with its output to /dev/null failed."""
    pseudo = ["/dev/null rw", "/dev/zero rw", "/dev/full rw", "/dev/random r", "/dev/urandom r"]
    gpus = ["char-nvidia rw"]
    assert device_allow("strict", gpus, False) == [*gpus, *pseudo]
    assert device_allow("closed", gpus, False) == gpus
    assert device_allow("strict", [*gpus, "/dev/null rw"], False) == [*gpus, "/dev/null rw", *pseudo[1:]]


def test_private_tmp_is_off_only_where_a_path_the_server_uses_is_under_tmp():
    """PrivateTmp= mounts an empty /tmp and /var/tmp for the server: a model copied to /tmp, or a
    venv or read-write path there, would be missing inside the unit (after the host changed)."""
    assert private_tmp() == "yes"
    assert private_tmp(sglang_server_model_path="/tmp/models/m") == "no"
    assert private_tmp(sglang_server_venv_dir="/var/tmp/sglang/venv") == "no"
    assert private_tmp(sglang_server_read_write_paths=["/data/cache", "/var/tmp"]) == "no"
    assert private_tmp(sglang_server_model_path="/tmpfs/models/m", sglang_server_state_dir="/srv/var/tmp/s") == "yes"


def needs_restart(**facts: object) -> bool:
    """tasks/run_multinode.yml's "does this node need a restart" rule, rendered as Ansible does."""
    tasks = yaml.safe_load((ROOT / "roles/sglang_server/tasks/run_multinode.yml").read_text())
    expr = next(t for t in tasks if "ansible.builtin.set_fact" in t)["ansible.builtin.set_fact"]
    env = role_env(strict=False)
    ctx: dict[str, object] = {
        "__sglang_server_apply": {},
        "_sglang_server_applied": {
            "changed_files": [],
            "unit_state": {"ActiveState": "active", "NeedDaemonReload": "no", "UnitFileState": "enabled"},
        },
        "sglang_server_service_enabled": True,
        **facts,
    }
    return bool(env.from_string(expr["__sglang_server_mn_needs_restart"]).render(ctx))


def test_a_group_restarts_for_a_new_engine_though_its_files_did_not_change():
    """On a group the install's restart handler is off: a new SGLang release or emulator wheel
    (the install task changed) must still restart every rank, or they keep running the old code."""
    assert needs_restart() is False
    assert needs_restart(__sglang_server_engine_install={"changed": True}) is True
    assert needs_restart(__sglang_server_engine_install={"changed": False, "skipped": True}) is False


def test_an_ipv6_host_is_bracketed_in_the_gate_and_client_urls():
    from sglang_utils.sglang_flags import gate_url

    defaults = yaml.safe_load((ROOT / "roles/sglang_server/defaults/main.yml").read_text())
    env = role_env(native=False, **{"sglang_tune.serving.sglang_gate_url": gate_url})

    def gate(host: str) -> str:
        return env.from_string(defaults["sglang_server_gate_url"]).render(
            sglang_server_host=host, sglang_server_port=30000
        )

    def client(host: str | None = None, bind: str = "0.0.0.0", ansible_host: str = "10.213.3.2") -> str:
        given = {} if host is None else {"sglang_server_client_host": host}
        return env.from_string(defaults["sglang_server_client_url"]).render(
            **given, sglang_server_host=bind, ansible_host=ansible_host, sglang_server_port=30000
        )

    assert gate("fd00::5") == "http://[fd00::5]:30000" and gate("0.0.0.0") == "http://127.0.0.1:30000"
    # `::` listens on IPv6 only (uvloop's create_server sets IPV6_V6ONLY): gated at ::1, where
    # 127.0.0.1 was refused and every gate waited out its timeout
    assert gate("::") == "http://[::1]:30000"
    assert gate("10.0.0.2") == "http://10.0.0.2:30000"
    assert client("fd00::5") == "http://[fd00::5]:30000" and client("emu1") == "http://emu1:30000"
    assert client("10.213.3.2") == "http://10.213.3.2:30000"
    # a server bound to one address listens there only: the host's management address (what
    # Ansible connects to) would be refused; every interface, or the loopback (which the controller
    # cannot reach but through the host's own name), keeps the address Ansible reaches the host by
    assert client(bind="192.168.7.4") == "http://192.168.7.4:30000"
    assert client(bind="fd00::7") == "http://[fd00::7]:30000"
    for bind in ("0.0.0.0", "::", "", "127.0.0.1", "127.0.1.1", "::1", "localhost"):
        assert client(bind=bind) == "http://10.213.3.2:30000", bind
    assert client("client.example", bind="192.168.7.4") == "http://client.example:30000"


def test_a_group_whose_unit_is_enabled_against_the_setting_is_brought_in_line():
    enabled = {"ActiveState": "active", "NeedDaemonReload": "no", "UnitFileState": "enabled"}
    disabled = {**enabled, "UnitFileState": "disabled"}

    def state(unit: dict, want: bool) -> bool:
        applied = {"changed_files": [], "unit_state": unit}
        return needs_restart(_sglang_server_applied=applied, sglang_server_service_enabled=want)

    assert state(enabled, True) is False and state(disabled, False) is False
    assert state(disabled, True) is True and state(enabled, False) is True
