"""Every path-forming, name and version variable of sglang_server is validated before any change
(plugins/module_utils/sglang_checks.py host_errors), found from the role's own argument spec so that a
variable added later cannot slip past. tests/roles/test_sglang_server_secrets_host.py runs the
same values against a real emulator host and checks that nothing there changed.
"""

from __future__ import annotations

import re

import pytest
import roles_testlib  # noqa: F401  (puts the collection on sys.path)
import yaml
from roles_testlib import ROOT
from sglang_utils import sglang_checks, sglang_flags

ROLE = ROOT / "roles" / "sglang_server"
PREFIX = "sglang_server_"

# How a variable's name says it forms a path, a name in a path or unit file, or a version.
PATHLIKE = re.compile(r"(_dir|_path|_paths|_file|_name|_python|_version|_packages|_user|_group|_groups)$")
# Pathlike by name but checked elsewhere, with the reason.
CHECKED_ELSEWHERE = {
    # A controller file, relative names allowed (docs: "relative to where ansible-playbook runs");
    # server_errors checks that it exists; its host path is derived from config_dir + unit stem.
    "sglang_server_emulator_profile": "server_errors",
    # An inventory group name, never part of a path: node_settings requires a group holding this host.
    "sglang_server_multinode_group": "node_settings",
    # OS package names handed to ansible.builtin.package as a list (no shell, no path).
    "sglang_server_system_packages": "ansible.builtin.package",
}


def argspec_options() -> dict:
    return yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]


def host_settings_keys() -> set[str]:
    text = (ROLE / "vars" / "main.yml").read_text()
    block = text.split("_sglang_server_host_settings:\n", 1)[1].split("\n\n", 1)[0]
    return {ln.split(":", 1)[0].strip() for ln in block.splitlines() if ln.strip()}


def pathlike_variables() -> list[str]:
    names = [n for n in argspec_options() if n.startswith(PREFIX)]
    return sorted(n for n in names if PATHLIKE.search(n) or n.endswith(("_dir", "_path")))


def test_every_pathlike_variable_is_validated():
    covered = {PREFIX + k for k in host_settings_keys()}
    missing = [n for n in pathlike_variables() if n not in covered and n not in CHECKED_ELSEWHERE]
    # served_model_name, unit_name, ... must be among them; the list is not empty by accident.
    assert len(pathlike_variables()) >= 15
    assert missing == [], missing
    assert covered <= set(argspec_options()), covered - set(argspec_options())


def defaults() -> dict:
    """The role's defaults as the settings dict (what vars/main.yml passes), templated by hand."""
    return {
        "unit_name": "sglang-qwen.service",
        "user": "sglang",
        "group": "sglang",
        "user_groups": ["video", "render"],
        "install_dir": "/opt/sglang",
        "venv_dir": "/opt/sglang/venv",
        "state_dir": "/var/lib/sglang",
        "config_dir": "/etc/sglang",
        "cuda_env_file": "/etc/sglang/cuda_env.env",
        "python": "/usr/bin/python3",
        "read_write_paths": [],
        "model_path": "/shared/models/Qwen3.5-122B-A10B",
        "spec_draft_model_path": "",
        "wheelhouse_dir": "",
        "emulator_wheelhouse_dir": str(ROOT / "build" / "wheelhouse"),
        "sglang_version": "0.5.9",
        "pip_packages": ["sglang==0.5.9"],
        "engine": "sglang",
        "served_model_name": "qwen3.5-122b",
        "device_allow": ["char-nvidiactl rw", "char-nvidia rw"],
        "unit_extra": {},
        "limit_nofile": 65536,
        "limit_memlock": "infinity",
    }


def test_defaults_pass():
    assert sglang_checks.host_errors(defaults()) == []
    assert set(defaults()) == host_settings_keys()


TRAVERSAL = ["../../etc/passwd", "/etc/../etc/passwd", "relative/dir", "/a//b", "/a/b/", "/a/./b", "", "/a\nb"]
# (key, bad values, what the message must say). Every key of the settings is walked.
CASES: dict[str, tuple[list, str]] = {
    "unit_name": (
        [
            "../../etc/passwd",
            "a/b.service",
            "x..y.service",
            "sglang-qwen",
            "tpl@.service",
            "a b.service",
            "\\x2d.service",
        ],
        "sglang_server_unit_name must be a systemd service name",
    ),
    "user": (["root", "../x", "Bad", "a b", "", "x" * 40], "sglang_server_user"),
    "group": (["root", "../x", ""], "sglang_server_group"),
    "user_groups": ([["../x"], ["root"], "video"], "sglang_server_user_groups"),
    "install_dir": (
        TRAVERSAL + ["/", "/usr", "/var/lib", "/opt", "/var/lib/sglang/opt", "/opt/my sglang"],
        "sglang_server_install_dir",
    ),
    "venv_dir": (TRAVERSAL + ["/usr/local"], "sglang_server_venv_dir"),
    "state_dir": (TRAVERSAL + ["/", "/var/lib", "/tmp", "/home"], "sglang_server_state_dir"),
    "config_dir": (TRAVERSAL + ["/etc", "/etc/systemd/system", "/var/lib/sglang/etc"], "sglang_server_config_dir"),
    "cuda_env_file": (TRAVERSAL + ["/etc/x%n.env"], "sglang_server_cuda_env_file"),
    "python": (TRAVERSAL + ["python3"], "sglang_server_python"),
    "read_write_paths": ([["../x"], ["/a b"], ["/a/../b"], "/x"], "sglang_server_read_write_paths"),
    "model_path": (["../../etc/passwd", "/m/../etc", "/m//x", "/m/\nx"], "sglang_server_model_path"),
    "spec_draft_model_path": (["draft", "/d/../x"], "sglang_server_spec_draft_model_path"),
    "wheelhouse_dir": (["wh", "/wh/../x", "/wh/"], "sglang_server_wheelhouse_dir"),
    "emulator_wheelhouse_dir": (
        ["build/wheelhouse", "/repo/roles/x/../../build"],
        "sglang_server_emulator_wheelhouse_dir",
    ),
    "sglang_version": (
        ["latest", "", "v0.5.9", "0.5.x", "0.5.9; rm -rf /", "0.5.9\n", None],
        "sglang_server_sglang_version",
    ),
    "pip_packages": ([["-e", "git+https://x"], ["--index-url=http://x"], ["a\nb"], []], "sglang_server_pip_packages"),
    "served_model_name": (["two\nlines"], "sglang_server_served_model_name"),
    "device_allow": ([["char-nvidia rw\nExecStartPre=/bin/sh"], ["a b c"]], "sglang_server_device_allow"),
    "unit_extra": ([{"X=Y\nZ": "1"}, {"CPUAffinity": "0\nExecStartPre=/bin/sh"}, ["x"]], "sglang_server_unit_extra"),
    # systemd takes a number or `infinity` only: any other word is ignored and the default applies
    "limit_nofile": (["1\nExecStart=x", "a b", "unlimited", "max", "64K", "1:2:3"], "sglang_server_limit_nofile"),
    "limit_memlock": (["infinity\n", "unlimited", "abc", "-1"], "sglang_server_limit_memlock"),
}


def test_every_setting_has_bad_cases():
    # (engine only selects a rule here: its own value is sglang_flags.server_errors' to check)
    assert set(CASES) == set(defaults()) - {"engine"}


@pytest.mark.parametrize("key,value,needle", [(k, v, n) for k, (vals, n) in CASES.items() for v in vals])
def test_bad_values_fail_naming_the_variable(key, value, needle):
    errors = sglang_checks.host_errors(dict(defaults(), **{key: value}))
    assert errors and all(needle in e for e in errors), errors


@pytest.mark.parametrize(
    "key,value",
    [
        ("unit_name", "sglang-qwen@gpu0.service"),
        ("unit_name", "my_server:2.service"),
        ("install_dir", "/srv/sglang"),
        ("state_dir", "/data/sglang-state"),
        ("model_path", "/data/My Models/Qwen 3.5"),
        ("read_write_paths", ["/home/sglang/.cache", "/scratch"]),
        ("sglang_version", "0.5.10rc0"),
        ("sglang_version", "0.5.5.post3"),
        ("sglang_version", "0.5.23"),
        ("pip_packages", ["sglang[all]==0.5.9", "flashinfer-python==0.2.3"]),
        ("limit_nofile", ""),
        ("limit_nofile", "65536:1048576"),
        ("limit_nofile", "infinity"),
        ("limit_memlock", "64M:infinity"),
        ("limit_memlock", 0),
        ("unit_extra", {"CPUAffinity": "0-15", "Environment": ["A=1", "B=2"]}),
    ],
)
def test_good_values_pass(key, value):
    assert sglang_checks.host_errors(dict(defaults(), **{key: value})) == []


def test_suggests_the_normalised_path():
    (err,) = sglang_checks.host_errors(dict(defaults(), config_dir="/etc//sglang/"))
    assert "did you mean '/etc/sglang'?" in err


def test_bad_input_cases_cover_the_issue_example():
    """`-e sglang_server_unit_name=../../etc/passwd` wrote /etc/passwd.env before this check existed."""
    (err,) = sglang_checks.host_errors(dict(defaults(), unit_name="../../etc/passwd"))
    assert err.startswith("sglang_server_unit_name must be a systemd service name") and "'../../etc/passwd'" in err


def test_secret_flags_are_managed_or_refused():
    """Every flag sglang_secrets knows to carry a secret is refused in sglang_server_extra_flags."""
    for flag in ("--api-key", "--admin-api-key", "--ssl-keyfile-password", "--watermark-config"):
        errors = sglang_flags.server_errors(dict(_server_settings(), extra_flags={flag: "x"}))
        assert any(f"must not set {flag}" in e for e in errors), (flag, errors)


def _server_settings() -> dict:
    import test_sglang_flags_filter as flags_tests

    return flags_tests.base()


def test_path_inputs_are_never_echoed_into_a_second_line():
    """Messages quote values with repr, so a newline in a value cannot forge a second message line."""
    for err in sglang_checks.host_errors(dict(defaults(), config_dir="/etc/x\nFAKE: injected")):
        assert "\n" not in err


def test_every_numeric_limit_is_checked_by_the_role():
    """A limit in sglang_flags.NUMERIC_LIMITS is only checked for the keys vars/main.yml passes in
    `_sglang_server_settings`: one missing there would never be read."""
    text = (ROLE / "vars" / "main.yml").read_text()
    block = text.split("_sglang_server_settings:\n", 1)[1].split("\n\n", 1)[0]
    passed = {
        ln.split(":", 1)[0].strip()
        for ln in block.splitlines()
        if ln.startswith("  ") and not ln.strip().startswith("#")
    }
    assert set(sglang_flags.NUMERIC_LIMITS) <= passed, set(sglang_flags.NUMERIC_LIMITS) - passed


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("gate_interval", 0, "sglang_server_gate_interval must be a number above 0"),
        ("gate_timeout", -5, "sglang_server_gate_timeout must be a number above 0"),
        ("restart_sec", -1, "sglang_server_restart_sec must be a whole number of at least 0"),
        ("timeout_start_sec", "abc", "sglang_server_timeout_start_sec must be a whole number of at least 0"),
        ("worker_timeout_stop_sec", -60, "sglang_server_worker_timeout_stop_sec must be a whole number"),
    ],
)
def test_the_gates_and_the_units_timers_are_checked_before_any_host(key, value, message):
    """The gate refused an interval or timeout of 0 only once the unit was written (sglang_ready's
    own check); systemd ignores a negative timer with a log line and keeps its default."""
    settings = {"engine": "emulator", "model_path": "/m", "host": "0.0.0.0", "port": 30000, "tp_size": 1}
    assert sglang_flags.server_errors(settings) == []
    errors = sglang_flags.server_errors(dict(settings, **{key: value}))
    assert any(e.startswith(message) for e in errors), errors
    assert sglang_flags.server_errors(dict(settings, **{key: 0 if "gate" not in key else 0.5})) == []


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES"])
def test_the_servers_environment_does_not_choose_its_gpus(name):
    """The unit loads cuda_env's environment file first and the server's second, and systemd's later
    setting wins (systemd.exec EnvironmentFile=): `CUDA_VISIBLE_DEVICES: "0,1"` here would have the
    server see 2 GPUs while cuda_env's preflight counted 8 and its NCCL check ran on them all."""
    errors = sglang_flags.server_errors(dict(_server_settings(), environment={name: "0,1"}))
    assert errors == [
        f"sglang_server_environment must not set {name}: set it in cuda_env_cuda_env, which the GPU preflight "
        "and the NCCL check read and the unit loads"
    ]
    assert sglang_flags.server_errors(dict(_server_settings(), environment={"NCCL_DEBUG": "INFO"})) == []


def test_a_release_whose_plain_pin_installs_no_engine_is_refused():
    """Before 0.5.3 SGLang's wheel keeps its runtime (torch, the kernels, fastapi) in the `srt` extra
    (0.4.10 and 0.5.2 METADATA): the role's default `sglang==X` installed a client, pip said success,
    and the unit died on its first import. The extra, a later release or the emulator engine pass."""
    old = dict(defaults(), sglang_version="0.5.2", pip_packages=["sglang==0.5.2"])
    [err] = sglang_checks.host_errors(old)
    assert err.startswith("sglang_server_pip_packages installs sglang==0.5.2, which before 0.5.3 holds no engine")
    assert '["sglang[srt]==0.5.2"]' in err
    assert sglang_checks.host_errors(dict(old, pip_packages=["sglang[srt]==0.5.2"])) == []
    assert sglang_checks.host_errors(dict(old, engine="emulator")) == []
    assert sglang_checks.host_errors(dict(old, sglang_version="0.5.3", pip_packages=["sglang==0.5.3"])) == []
