"""Unit tests of the role's rules (plugins/module_utils/sglang_flags.py, sglang_spec.py) and the thin
filter plugin over them (plugins/filter/sglang_flags.py): the mapping from role variables to flags."""

from __future__ import annotations

import pytest
import roles_testlib  # noqa: F401  (puts the collection on sys.path)
from ansible_collections.sglang_tune.serving.plugins.filter.sglang_flags import FilterModule
from sglang_utils import sglang_flags, sglang_spec


def base(**over):
    settings = dict(
        engine="emulator",
        model_path="/shared/models/Qwen3.5-122B-A10B",
        served_model_name="qwen3.5-122b",
        host="0.0.0.0",
        port=30000,
        tp_size=4,
        mem_fraction_static=None,
        max_running_requests=None,
        context_length=None,
        chunked_prefill_size=None,
        trust_remote_code=False,
        enable_metrics=True,
        decode_log_interval=None,
        log_level="info",
        watchdog_timeout=None,
        skip_server_warmup=False,
        api_key="",
        admin_api_key="",
        extra_flags={},
        environment={},
        gate_url="http://127.0.0.1:30000",
        client_url="http://10.213.1.2:30000",
        dist_init_port=50000,
        emulator_profile="",
        emulator_profile_path="",
        emulator_startup_s=None,
        emulator_faults=[],
        spec=sglang_spec.spec_settings(3),
        node=sglang_flags.node_settings("h1"),
    )
    settings.update(over)
    return settings


def flat(lines):
    return [w for line in lines for w in line]


# --- spec_settings -----------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [0, 1, 3, 16, "0", "3", " 7 ", "+2"])
def test_spec_steps_accepts_whole_numbers_in_range(steps):
    out = sglang_spec.spec_settings(steps)
    assert out["errors"] == []
    assert out["num_steps"] == int(str(steps).strip())


@pytest.mark.parametrize("steps", [-1, "-1", "abc", "1.5", 1.5, 100, "100", 17, True, "", [3], "3 4", "0x3"])
def test_spec_steps_rejects_everything_else_naming_the_variable(steps):
    out = sglang_spec.spec_settings(steps)
    assert len(out["errors"]) == 1
    msg = out["errors"][0]
    assert msg.startswith("spec_steps must be a whole number from 0 to 16")
    assert "sglang_server_spec_max_steps" in msg
    assert repr(steps) in msg or str(steps) in msg


def test_spec_max_steps_is_a_setting():
    assert sglang_spec.spec_settings(20, max_steps=32)["errors"] == []
    assert "from 0 to 8" in sglang_spec.spec_settings(9, max_steps=8)["errors"][0]
    assert sglang_spec.spec_settings(3, max_steps="x")["errors"][0].startswith("sglang_server_spec_max_steps")


def test_steps_zero_means_no_speculation_and_no_flags():
    spec = sglang_spec.spec_settings(0)
    assert spec == {**spec, "enabled": False, "errors": []}
    flags = flat(sglang_flags.server_flags(base(spec=spec)))
    assert not [w for w in flags if w.startswith("--speculative")]


def test_topk_one_defaults_draft_tokens_to_steps_plus_one():
    spec = sglang_spec.spec_settings("3")
    assert (spec["algorithm"], spec["num_steps"], spec["eagle_topk"], spec["num_draft_tokens"]) == ("NEXTN", 3, 1, 4)
    assert sglang_spec.spec_settings(3, 1, 4)["errors"] == []


@pytest.mark.parametrize("draft", [3, 5, "6", 2])
def test_topk_one_rejects_draft_tokens_that_sglang_would_rewrite(draft):
    err = sglang_spec.spec_settings(3, 1, draft)["errors"]
    assert len(err) == 1
    assert err[0].startswith(f"spec_draft_tokens={int(draft)} contradicts spec_steps=3 with spec_topk=1")
    assert "= 4" in err[0]


@pytest.mark.parametrize("topk", [0, "0", -2, "x", 17])
def test_topk_out_of_range(topk):
    err = sglang_spec.spec_settings(3, topk)["errors"]
    assert err and err[0].startswith("spec_topk must be a whole number from 1 to 16")


def test_topk_above_one_bounds_draft_tokens():
    assert sglang_spec.spec_settings(3, 2, 7)["errors"] == []
    assert sglang_spec.spec_settings(3, 2, 2)["errors"] == []
    # the tree holds topk + (steps - 1) x topk^2 candidates (eagle_utils.py organize_draft_results):
    # SGLang's own docs launch steps 3, topk 4, draft 16, and 5/8/64
    assert sglang_spec.spec_settings(3, 2, 11)["errors"] == []
    assert sglang_spec.spec_settings(3, 4, 16, "EAGLE")["errors"] == []
    assert sglang_spec.spec_settings(5, 8, 64, "EAGLE")["errors"] == []
    bound = "from 2 to spec_topk + (spec_steps - 1) * spec_topk^2 + 1 = 11"
    assert bound in sglang_spec.spec_settings(3, 2, 12)["errors"][0]
    assert "from 2 to" in sglang_spec.spec_settings(3, 2, 1)["errors"][0]
    assert sglang_spec.spec_settings(3, 2)["errors"][0].startswith("spec_draft_tokens is required when spec_topk=2")
    assert sglang_spec.spec_settings(3, 2, "abc")["errors"][0].startswith("spec_draft_tokens must be a whole number")


def test_steps_zero_with_other_spec_settings_is_a_contradiction():
    assert "contradicts spec_steps=0" in sglang_spec.spec_settings(0, None, 4)["errors"][0]
    assert "contradicts spec_steps=0" in sglang_spec.spec_settings(0, 2)["errors"][0]
    assert sglang_spec.spec_settings(0, 1)["errors"] == []


@pytest.mark.parametrize("algo", ["NEXTN", "nextn", "EAGLE", "NGRAM", " dflash "])
def test_builtin_algorithms(algo):
    dflash = algo.strip().upper() == "DFLASH"  # a draft model, and one step (test_dflash_runs_one_step)
    out = sglang_spec.spec_settings(1 if dflash else 2, algorithm=algo, draft_model_path="/m/draft" if dflash else "")
    assert out["errors"] == []
    assert out["algorithm"] == algo.strip().upper()


@pytest.mark.parametrize("algo", ["MEDUSA", "eagle2", 3])
def test_unknown_algorithm(algo):
    err = sglang_spec.spec_settings(2, algorithm=algo)["errors"]
    assert err and err[0].startswith("spec_algorithm must be one of EAGLE, EAGLE3, NEXTN")


def test_separate_draft_models_need_a_path():
    assert "sglang_server_spec_draft_model_path" in sglang_spec.spec_settings(2, algorithm="EAGLE3")["errors"][0]
    out = sglang_spec.spec_settings(2, algorithm="EAGLE3", draft_model_path="/m/draft")
    assert out["errors"] == []
    flags = flat(sglang_flags.server_flags(base(spec=out)))
    assert flags[flags.index("--speculative-draft-model-path") + 1] == "/m/draft"


# --- node_settings (multi-node TP) -----------------------------------------------------------


def test_single_node_without_group():
    assert sglang_flags.node_settings("h1") == {
        "errors": [],
        "nnodes": 1,
        "node_rank": 0,
        "dist_init_addr": None,
        "is_head": True,
        "host_ip": None,
    }


def test_node_rank_follows_the_group_order_and_the_head_address():
    members = ["gpu-a", "gpu-b", "gpu-c"]
    head = sglang_flags.node_settings("gpu-a", "tp", members, "10.0.0.21", 50000)
    worker = sglang_flags.node_settings("gpu-c", "tp", members, "10.0.0.21", "51000")
    assert (head["nnodes"], head["node_rank"], head["dist_init_addr"], head["is_head"]) == (
        3,
        0,
        "10.0.0.21:50000",
        True,
    )
    assert (worker["node_rank"], worker["dist_init_addr"], worker["is_head"]) == (2, "10.0.0.21:51000", False)
    flags = flat(sglang_flags.server_flags(base(node=worker, tp_size=8)))
    assert flags[flags.index("--nnodes") : flags.index("--nnodes") + 6] == [
        "--nnodes",
        "3",
        "--node-rank",
        "2",
        "--dist-init-addr",
        "10.0.0.21:51000",
    ]


def test_node_settings_ipv6_head_and_explicit_address():
    assert sglang_flags.node_settings("b", "g", ["a", "b"], "fd00::1", 5000)["dist_init_addr"] == "[fd00::1]:5000"
    assert (
        sglang_flags.node_settings("b", "g", ["a", "b"], "", 5000, "head.example:6000")["dist_init_addr"]
        == "head.example:6000"
    )
    assert "HOST:PORT" in sglang_flags.node_settings("b", "g", ["a", "b"], "", 5000, "head")["errors"][0]
    # a port past 65535 reached the rendezvous (tcp://head:99999) after every host had changed
    for bad in ("head:99999", "head:0", "[fd00::1]:70000"):
        errors = sglang_flags.node_settings("b", "g", ["a", "b"], "", 5000, bad)["errors"]
        assert errors and "a port 1-65535" in errors[0], bad
    assert sglang_flags.node_settings("b", "g", ["a", "b"], "", 5000, "head:65535")["errors"] == []


def test_a_loopback_head_address_is_refused_for_a_group():
    """Each node is a machine of its own (two hosts behind one SSH proxy differ by port): a head
    reached at 127.0.0.1 gave the others their own loopback to meet at, and the rendezvous waited
    out its timeout after every host had changed."""
    # the unspecified address too: a node connecting to 0.0.0.0 reaches its own machine
    for head, given in (
        ("127.0.0.1", ""),
        ("::1", ""),
        ("localhost", ""),
        ("ip6-localhost", ""),
        ("0.0.0.0", ""),
        ("::", ""),
        ("::ffff:127.0.0.1", ""),
        ("", "127.0.1.1:5000"),
        ("", "[::1]:5000"),
        ("", "0.0.0.0:5000"),
    ):
        errors = sglang_flags.node_settings("b", "g", ["a", "b"], head, 5000, given)["errors"]
        assert errors and "is a loopback or unspecified address" in errors[0], head
        assert "sglang_server_dist_init_host" in errors[0], head
    assert sglang_flags.node_settings("b", "g", ["a", "b"], "10.0.0.21", 5000)["errors"] == []
    assert sglang_flags.node_settings("a", "g", ["a"], "127.0.0.1", 5000)["errors"] == []  # a group of one


def test_node_settings_errors_name_the_variable():
    assert "not an inventory group" in sglang_flags.node_settings("a", "nope", [])["errors"][0]
    assert "does not contain this host" in sglang_flags.node_settings("x", "g", ["a", "b"])["errors"][0]
    assert "sglang_server_dist_init_port" in sglang_flags.node_settings("b", "g", ["a", "b"], "h", 70000)["errors"][0]
    assert sglang_flags.node_settings("a", "g", ["a"])["nnodes"] == 1


# --- server_errors ----------------------------------------------------------------------------


def test_defaults_are_valid():
    assert sglang_flags.server_errors(base()) == []


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("port", 0, "sglang_server_port must be a whole number from 1 to 65535"),
        ("port", "70000", "sglang_server_port must be a whole number from 1 to 65535"),
        ("port", "abc", "sglang_server_port"),
        ("port", None, "sglang_server_port"),
        ("tp_size", 0, "sglang_server_tp_size"),
        ("mem_fraction_static", 0, "sglang_server_mem_fraction_static must be a number above 0 and at most 1"),
        ("mem_fraction_static", "1.2", "sglang_server_mem_fraction_static"),
        ("max_running_requests", 0, "sglang_server_max_running_requests"),
        ("chunked_prefill_size", -2, "sglang_server_chunked_prefill_size"),
        ("watchdog_timeout", 0, "sglang_server_watchdog_timeout"),
        ("engine", "vllm", "sglang_server_engine must be one of sglang, emulator"),
        ("model_path", "", "sglang_server_model_path must be set"),
        ("model_path", "models/x", "sglang_server_model_path must be an absolute path"),
        ("enable_metrics", "maybe", "sglang_server_enable_metrics must be true or false"),
        ("api_key", "two\nlines-key", "sglang_server_api_key must be one line"),
        ("api_key", "carriage\rreturn", "sglang_server_api_key must be one line"),
        ("api_key", "with blank-key", "sglang_server_api_key must be printable ASCII without blanks"),
        ("api_key", "tab\tinside-key", "sglang_server_api_key must be printable ASCII without blanks"),
        ("api_key", "n\u00e4ive-key-1", "sglang_server_api_key must be printable ASCII"),
        ("api_key", "-starts-with-dash", "sglang_server_api_key must not start with '-'"),
        ("api_key", "short", "sglang_server_api_key must have 8 to 4096 characters; it has 5"),
        ("api_key", "k" * 4097, "sglang_server_api_key must have 8 to 4096 characters; it has 4097"),
        ("api_key", 12345678, "sglang_server_api_key must be a string"),
        ("admin_api_key", "bad key!", "sglang_server_admin_api_key must be printable ASCII"),
        ("extra_flags", {"port": 1}, "must not set --port: use sglang_server_port"),
        ("extra_flags", {"--api-key": "k"}, "must not set --api-key: use sglang_server_api_key"),
        ("extra_flags", {"speculative-num-steps": 2}, "use spec_steps"),
        ("extra_flags", {"Bad Flag": 1}, "is not a flag name"),
        ("extra_flags", ["x"], "must be a mapping"),
        ("extra_flags", {"admin-api-key": "k"}, "must not set --admin-api-key: use sglang_server_admin_api_key"),
        ("extra_flags", {"config": "/etc/x.yaml"}, "must not set --config"),
        ("extra_flags", {"ssl-keyfile-password": "pw"}, "its value is a secret"),
        ("extra_flags", {"watermark-config": "{}"}, "its value is a secret"),
        # SGLang's parser takes a unique prefix of a flag: an abbreviation is the flag it abbreviates
        ("extra_flags", {"api": "sk-live-0123456789"}, "must not set --api: SGLang reads it as --api-key"),
        ("extra_flags", {"speculative-num-step": 7}, "SGLang reads it as --speculative-num-steps"),
        ("extra_flags", {"model": "/other"}, "SGLang reads it as --model-path"),
        ("extra_flags", {"ssl-keyfile-pass": "pw"}, "SGLang reads it as --ssl-keyfile-password"),
        ("environment", {"1BAD": "x"}, "not an environment variable name"),
        ("environment", {"A\n": "x"}, "not an environment variable name"),
        ("environment", {"A": "x\ny"}, "must be one line"),
        ("emulator_faults", ["bogus"], "'bogus' is not one of kv-oom"),
        ("emulator_faults", ["kv-oom=1"], "kv-oom takes no argument"),
        ("emulator_faults", ["crash-after-ready"], "crash-after-ready needs an argument"),
        ("emulator_faults", ["http-5xx=1.5"], "a share from 0 to 1"),
        ("emulator_faults", ["hang-before-ready=soon"], "needs one of http, load"),
        ("emulator_faults", "kv-oom", "must be a list"),
        (
            "emulator_profile",
            "/nonexistent/profile.yaml",
            "sglang_server_emulator_profile must name a file on the controller",
        ),
    ],
)
def test_bad_settings_name_the_variable(key, value, needle):
    errors = sglang_flags.server_errors(base(**{key: value}))
    assert any(needle in e for e in errors), errors


def test_emulator_only_settings_are_rejected_on_the_real_engine():
    errors = sglang_flags.server_errors(base(engine="sglang", emulator_faults=["kv-oom"], emulator_startup_s=5))
    assert any(e.startswith("sglang_server_emulator_faults only applies") for e in errors)
    assert any(e.startswith("sglang_server_emulator_startup_s only applies") for e in errors)


def test_good_faults_and_strings_from_extra_vars():
    assert (
        sglang_flags.server_errors(
            base(
                emulator_faults=["kv-oom", "slow-startup=10", "hang-before-ready", "http-5xx=0.1"],
                port="30001",
                enable_metrics="false",
                mem_fraction_static="0.85",
            )
        )
        == []
    )


# --- server_flags ------------------------------------------------------------------------------


def test_decimal_values_reach_the_server_as_given():
    """`:g` kept six significant digits: 0.8765432 reached the server as 0.876543 and a watchdog of
    1234567.5 s as 1.23457e+06, with no error; a value is passed as the number it was."""
    lines = sglang_flags.server_flags(base(mem_fraction_static="0.8765432", watchdog_timeout=1234567.5))
    flags = {line[0]: line[1:] for line in lines}
    assert flags["--mem-fraction-static"] == ["0.8765432"]
    assert flags["--watchdog-timeout"] == ["1234567.5"]
    assert {line[0]: line[1:] for line in sglang_flags.server_flags(base(mem_fraction_static=0.85))}[
        "--mem-fraction-static"
    ] == ["0.85"]


def test_flags_for_the_seed_configuration():
    lines = sglang_flags.server_flags(base(emulator_startup_s=5))
    assert lines == [
        ["--model-path", "/shared/models/Qwen3.5-122B-A10B"],
        ["--served-model-name", "qwen3.5-122b"],
        ["--host", "0.0.0.0"],
        ["--port", "30000"],
        ["--tp-size", "4"],
        ["--enable-metrics"],
        ["--log-level", "info"],
        ["--speculative-algorithm", "NEXTN"],
        ["--speculative-num-steps", "3"],
        ["--speculative-eagle-topk", "1"],
        ["--speculative-num-draft-tokens", "4"],
        ["--emulator-startup-s", "5"],
    ]


def test_unset_values_are_not_passed_and_set_ones_are_normalised():
    flags = flat(
        sglang_flags.server_flags(
            base(
                max_running_requests="64",
                mem_fraction_static="0.80",
                context_length=262144,
                chunked_prefill_size=-1,
                watchdog_timeout="1200",
                trust_remote_code="yes",
                enable_metrics="false",
                skip_server_warmup=True,
                decode_log_interval=10,
            )
        )
    )
    assert flags[flags.index("--max-running-requests") + 1] == "64"
    assert flags[flags.index("--mem-fraction-static") + 1] == "0.8"
    assert flags[flags.index("--chunked-prefill-size") + 1] == "-1"
    assert flags[flags.index("--watchdog-timeout") + 1] == "1200"
    assert "--trust-remote-code" in flags and "--skip-server-warmup" in flags
    assert "--enable-metrics" not in flags
    bare = flat(sglang_flags.server_flags(base()))
    for flag in (
        "--max-running-requests",
        "--mem-fraction-static",
        "--context-length",
        "--chunked-prefill-size",
        "--watchdog-timeout",
        "--decode-log-interval",
        "--api-key",
        "--nnodes",
        "--emulator-profile",
    ):
        assert flag not in bare


def test_api_key_is_never_a_flag_only_a_config_line():
    """The key goes into SGLang's --config YAML file (templates/sglang.secrets.yaml.j2), never argv."""
    settings = base(api_key="s3cret-key", admin_api_key="adm'n\"$-key")
    flags = flat(sglang_flags.server_flags(settings))
    assert "--api-key" not in flags and "--admin-api-key" not in flags
    assert "s3cret" not in " ".join(flags)
    assert sglang_flags.secret_config(settings) == ['api-key: "s3cret-key"', 'admin-api-key: "adm\'n\\"$-key"']
    assert sglang_flags.secret_config(base()) == []


@pytest.mark.parametrize("key", ["q\"uo'te-$HOME-%n", "A" * 4096, "true-ish", "12345678", "0x1F2E3D4C", "null-key"])
def test_good_keys_pass_and_read_back_unchanged(key):
    """What the issue lists (quotes, $, 4 KiB) and what plain YAML would turn into bools/ints."""
    import json

    import yaml

    settings = base(api_key=key)
    assert sglang_flags.server_errors(settings) == []
    line = sglang_flags.secret_config(settings)[0]
    assert yaml.safe_load(line) == {"api-key": key}
    assert json.loads(line.split(": ", 1)[1]) == key


def test_key_errors_never_quote_the_key():
    for key in ("two\nlines-secret", "has blank-secret", "-dash-secret", "sec"):
        errors = sglang_flags.server_errors(base(api_key=key))
        assert errors and not any(key in e for e in errors), errors


def test_extra_flags_in_name_order_with_bare_and_list_values():
    lines = sglang_flags.server_flags(
        base(
            extra_flags={
                "mamba-scheduler-strategy": "extra_buffer",
                "--attention-backend": "flashinfer",
                "enable-cache-report": True,
                "disable-radix-cache": False,
                "cuda-graph-bs": [1, 2, 4],
                "tokenizer-path": None,
            }
        )
    )
    tail = lines[lines.index(["--speculative-num-draft-tokens", "4"]) + 1 :]
    assert tail == [
        ["--attention-backend", "flashinfer"],
        ["--cuda-graph-bs", "1", "2", "4"],  # nargs="+": one flag, every value (a repeat keeps the last)
        ["--enable-cache-report"],
        ["--mamba-scheduler-strategy", "extra_buffer"],
    ]


def test_emulator_flags_only_for_the_emulator_engine():
    emu = flat(
        sglang_flags.server_flags(
            base(
                emulator_profile_path="/etc/sglang/p.yaml",
                emulator_startup_s="2.5",
                emulator_faults=["kv-oom", "slow-startup=3"],
            )
        )
    )
    assert emu[-8:] == [
        "--emulator-profile",
        "/etc/sglang/p.yaml",
        "--emulator-startup-s",
        "2.5",
        "--emulator-fault",
        "kv-oom",
        "--emulator-fault",
        "slow-startup=3",
    ]
    real = flat(sglang_flags.server_flags(base(engine="sglang", emulator_profile_path="/x", emulator_startup_s=1)))
    assert not [w for w in real if w.startswith("--emulator")]


def test_a_whole_flag_that_begins_a_guarded_one_is_not_an_abbreviation():
    # --ssl-keyfile is a flag of its own (the key file's path), not --ssl-keyfile-password
    assert sglang_flags.abbreviates("--ssl-keyfile") is None
    assert sglang_flags.server_errors(base(extra_flags={"ssl-keyfile": "/etc/ssl/k.pem"})) == []
    assert sglang_flags.server_errors(base(extra_flags={"attention-backend": "fa3"})) == []


def test_a_server_with_a_certificate_is_gated_and_benchmarked_over_https():
    # with --ssl-certfile SGLang's uvicorn answers TLS only: the http:// defaults were refused
    # until the gate's 1800 s timeout
    for name in ("ssl-certfile", "--ssl-certfile", "ssl-cert"):
        errors = sglang_flags.server_errors(base(extra_flags={name: "/etc/ssl/c.pem", "ssl-keyfile": "/etc/ssl/k.pem"}))
        assert len(errors) == 2 and "sglang_server_gate_url must be an https:// URL" in errors[0], (name, errors)
        assert "sglang_server_client_url" in errors[1] and "http://10.213.1.2:30000" in errors[1]
    https = {"gate_url": "https://gpu1.example:30000", "client_url": "https://gpu1.example:30000"}
    assert sglang_flags.server_errors(base(extra_flags={"ssl-certfile": "/etc/ssl/c.pem"}, **https)) == []
    assert sglang_flags.server_errors(base(extra_flags={"ssl-ca-certs": "/etc/ssl/ca.pem"})) == []


def test_a_unit_is_read_back_where_and_as_it_listens():
    """A rollback gates the unit it restored where that unit's server listens (unit_listen reads the
    ExecStart the role wrote): its --host and --port, and TLS from --ssl-certfile, in the quoting
    systemd_exec_quote writes; the launcher's own arguments before `--` are not the server's."""
    flags = sglang_flags.server_flags(
        base(
            engine="sglang",
            host="fd00::5",
            port=30002,
            extra_flags={"ssl-cert": "/etc/ssl/my 100%.pem", "ssl-keyfile": "/k"},
        )
    )
    words = " \\\n    ".join(" ".join(sglang_flags.systemd_exec_quote(w) for w in line) for line in flags)
    unit = (
        "[Service]\nExecStart=/v/bin/python /l/sglang_launcher.py --secrets /run/credentials/%n/s.yaml --port 1 -- \\\n"
        f"    /v/bin/python -m sglang.launch_server \\\n    {words}\n\nRestart=on-failure\n"
    )
    assert '"/etc/ssl/my 100%%.pem"' in unit
    assert sglang_flags.unit_listen(unit) == {"host": "fd00::5", "port": "30002", "tls": True}
    plain = unit.replace("--ssl-cert ", "--ssl-ca-certs ")
    assert sglang_flags.unit_listen(plain) == {"host": "fd00::5", "port": "30002", "tls": False}
    assert sglang_flags.unit_listen("ExecStart=/x -m sglang.launch_server --host=10.0.0.1 --port=3") == {
        "host": "10.0.0.1",
        "port": "3",
        "tls": False,
    }
    assert sglang_flags.unit_listen("") is None and sglang_flags.unit_listen("[Service]\nType=exec\n") is None


def test_the_gate_url_rule_is_one_for_the_run_and_the_restored_unit():
    """The default gate URL (gate_url) and a rollback's (restored_gate) come from one rule: the
    run's default URL becomes exactly the restored unit's default, whatever moved."""
    g = sglang_flags.gate_url
    assert g("0.0.0.0", 30000) == "http://127.0.0.1:30000" and g("", 1) == "http://127.0.0.1:1"
    assert g("::", 30000, True) == "https://[::1]:30000" and g("fd00::5", 30000) == "http://[fd00::5]:30000"
    assert g("10.0.0.2", " 30000 ") == "http://10.0.0.2:30000"
    tls = {"ssl-certfile": "/c.pem", "ssl-keyfile": "/k.pem"}

    def unit(host, port, extra):
        lines = sglang_flags.server_flags(base(engine="sglang", host=host, port=port, extra_flags=extra))
        return "ExecStart=/v/bin/python -m sglang.launch_server " + " ".join(
            sglang_flags.systemd_exec_quote(w) for line in lines for w in line
        )

    hosts, ports, modes = ("0.0.0.0", "::", "127.0.0.1", "fd00::5"), (30000, 30001), ({}, tls)
    for run_host in hosts:
        for restored_host in hosts:
            for run_port in ports:
                for run_extra in modes:
                    for restored_extra in modes:
                        url = g(run_host, run_port, bool(run_extra))
                        got = sglang_flags.restored_gate(
                            url, run_host, run_port, run_extra, unit(restored_host, 30000, restored_extra)
                        )
                        assert got["url"] == g(restored_host, 30000, bool(restored_extra)), (url, got)
    # certificates are checked, except where the rollback itself moved the URL to https at a loopback address
    assert sglang_flags.restored_gate("http://127.0.0.1:30000", "0.0.0.0", 30000, {}, unit("0.0.0.0", 30000, tls)) == {
        "url": "https://127.0.0.1:30000",
        "validate_certs": False,
    }
    assert sglang_flags.restored_gate(
        "http://gpu1.example:30000", "0.0.0.0", 30000, {}, unit("0.0.0.0", 30000, tls)
    ) == {
        "url": "https://gpu1.example:30000",
        "validate_certs": True,
    }
    # a run that bound the certificate's name, restoring a unit on every interface: the https URL
    # moves to the loopback address, which the certificate does not name (the old code kept the name)
    for restored in ("0.0.0.0", "::"):
        got = sglang_flags.restored_gate(
            "https://gpu1.example:30000", "gpu1.example", 30000, tls, unit(restored, 30000, tls)
        )
        assert got["validate_certs"] is False and got["url"] == g(restored, 30000, True), got
    # ... or on one IP address, which the certificate of the run's name need not name (the old code
    # checked it there and reported a restored server that was back as not come back); an address
    # moved to a name the restored unit bound is still checked
    for restored in ("10.0.0.5", "fd00::5"):
        got = sglang_flags.restored_gate(
            "https://gpu1.example:30000", "gpu1.example", 30000, tls, unit(restored, 30000, tls)
        )
        assert got == {"url": g(restored, 30000, True), "validate_certs": False}, got
    assert sglang_flags.restored_gate(
        "https://10.0.0.5:30000", "10.0.0.5", 30000, tls, unit("gpu1.example", 30000, tls)
    ) == {"url": "https://gpu1.example:30000", "validate_certs": True}
    # a name the run did not bind, or an https address the rollback did not move, is still checked
    assert sglang_flags.restored_gate(
        "https://gpu1.example:30000", "0.0.0.0", 30000, tls, unit("0.0.0.0", 30000, tls)
    ) == {"url": "https://gpu1.example:30000", "validate_certs": True}
    assert sglang_flags.restored_gate(
        "https://127.0.0.1:30000", "0.0.0.0", 30000, tls, unit("0.0.0.0", 30001, tls)
    ) == {"url": "https://127.0.0.1:30001", "validate_certs": True}
    # a disabled certificate flag is left off the command line: no TLS
    assert sglang_flags.certfile_flag({"ssl-certfile": False}) is None
    assert (
        sglang_flags.certfile_flag({"ssl-ce": "/c"}) == "--ssl-ce"
        and sglang_flags.certfile_flag({"ssl-c": "/c"}) is None
    )
    filters = FilterModule().filters()
    assert (
        filters["sglang_gate_url"]("::", 1) == "http://[::1]:1"
        and filters["sglang_restored_gate"].__name__ == "restored_gate"
    )


def test_the_restored_servers_key_is_read_from_its_own_secrets_file():
    text = "\n".join(sglang_flags.secret_config({"api_key": "old-key-123456789", "admin_api_key": "adm-123456789"}))
    assert sglang_flags.config_api_key(text) == "old-key-123456789"
    assert sglang_flags.config_api_key('admin-api-key: "adm-123456789"') == ""
    # not the role's format: the launcher refuses it and the server cannot start; no key is sent
    assert sglang_flags.config_api_key("api-key: plain") == "" and sglang_flags.config_api_key(None) == ""
    assert FilterModule().filters()["sglang_config_api_key"](text) == "old-key-123456789"


def test_every_mapped_flag_is_protected_from_extra_flags():
    """What a user sees for every flag the role maps: sglang_server_extra_flags may not set it
    (the membership of FLAG_TABLE in MANAGED_FLAGS, built from it, could not fail)."""
    for key, flag, _kind in sglang_flags.FLAG_TABLE:
        errors = sglang_flags.server_errors(base(extra_flags={flag[2:]: "1"}))
        assert any(f"must not set {flag}: use sglang_server_{key}" in e for e in errors), (flag, errors)


# --- quoting -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "word,quoted",
    [
        ("/opt/sglang/venv/bin/python", "/opt/sglang/venv/bin/python"),
        ("--tp-size", "--tp-size"),
        ("qwen3.5-122b", "qwen3.5-122b"),
        ("with space", '"with space"'),
        ("100%", '"100%%"'),
        ("$HOME", '"$$HOME"'),
        ('a"b', '"a\\"b"'),
        ("back\\slash", '"back\\\\slash"'),
        ("", '""'),
        (";", '";"'),
        ("${SGLANG_SERVER_API_KEY}", '"$${SGLANG_SERVER_API_KEY}"'),
        ("${OTHER}", '"$${OTHER}"'),
        ("%d/server-secrets.yaml", '"%%d/server-secrets.yaml"'),
        ('{"a": 1}', '"{\\"a\\": 1}"'),
    ],
)
def test_systemd_exec_quote(word, quoted):
    assert sglang_flags.systemd_exec_quote(word) == quoted


def test_systemd_env_assign():
    assert sglang_flags.systemd_env_assign("A", "plain") == 'A="plain"'
    assert sglang_flags.systemd_env_assign("K", 'k$y "x" \\ `z`') == 'K="k\\$y \\"x\\" \\\\ \\`z\\`"'
    assert sglang_flags.systemd_env_assign("B", True) == 'B="true"'
    assert sglang_flags.systemd_env_assign("N", None) == 'N=""'
    with pytest.raises(ValueError):
        sglang_flags.systemd_env_assign("BAD NAME", "x")
    with pytest.raises(ValueError):
        sglang_flags.systemd_env_assign("A", "two\nlines")


def test_filter_module_exposes_the_filters():
    names = set(FilterModule().filters())
    assert {
        "sglang_spec",
        "sglang_node",
        "sglang_server_errors",
        "sglang_server_host_errors",
        "sglang_flags",
        "sglang_secret_config",
        "systemd_exec_quote",
        "systemd_env_assign",
    } <= names


def test_extra_flags_cannot_move_the_groups_rendezvous_or_break_the_unit():
    """--nccl-init-addr is --dist-init-addr's other spelling (one argparse destination): a later one
    on the line wins, past the group's port and agreement checks; so would a second --dist-timeout
    on a multi-node server. A carriage return or NUL in a value ends the unit's line for systemd."""
    group = sglang_flags.node_settings("a", "g", ["a", "b"], "10.0.0.21", 29500)
    for flags, needle in (
        ({"nccl-init-addr": "10.9.9.9:1234"}, "--nccl-init-addr: use sglang_server_multinode_group"),
        ({"dist-timeout": 30}, "--dist-timeout: use sglang_server_dist_timeout"),
        ({"chat-template": "/x/t.jinja\rExecStartPre=/bin/true"}, "must not hold a carriage return or NUL"),
        ({"cuda-graph-bs": [1, "2\x00"]}, "must not hold a carriage return or NUL"),
    ):
        errors = sglang_flags.server_errors(base(extra_flags=flags, node=group))
        assert any(needle in e for e in errors), (flags, errors)
    # a single-node server has no --dist-timeout of the role's: the flag is the user's to give
    assert sglang_flags.server_errors(base(extra_flags={"dist-timeout": 30})) == []


@pytest.mark.parametrize("value", [0, -5, "0"])
def test_a_dist_timeout_that_can_never_form_a_group_is_refused(value):
    errors = sglang_flags.server_errors(base(dist_timeout=value))
    assert any(e.startswith("sglang_server_dist_timeout must be") for e in errors), errors
    assert sglang_flags.server_errors(base(dist_timeout=600)) == []


def test_an_algorithm_the_release_does_not_have_is_refused_before_any_host_changes():
    """0.5.9's argparse has five choices (sglang_releases.SPEC_ALGORITHMS_SINCE): DFLASH on it
    passed preflight, then the server exited with 'invalid choice' and the host rolled back."""
    for algo, version in (("DFLASH", "0.5.9"), ("UNO", "0.5.19"), ("DSPARK", "0.5.15")):
        errors = sglang_flags.server_errors(
            base(spec=sglang_spec.spec_settings(3, algorithm=algo), sglang_version=version, engine="sglang")
        )
        assert any(e.startswith(f"spec_algorithm={algo} is not an algorithm of SGLang {version}") for e in errors)
    # DSPARK from 0.5.16 and UNO from 0.5.20 (spec_info.py of each wheel): both were dated 0.5.23
    for algo, version in (
        ("DFLASH", "0.5.11"),
        ("UNO", "0.5.20"),
        ("DSPARK", "0.5.16"),
        ("EAGLE3", "0.5.9"),
        ("NEXTN", "0.4.3"),
    ):
        # DFLASH, DSPARK and UNO run one step (test_dflash_runs_one_step_..., test_dspark_uno_and_ngram_...);
        # UNO needs its linear width
        steps = 1 if algo in ("DFLASH", "DSPARK", "UNO") else 3
        draft = 4 if algo == "UNO" else None
        spec = sglang_spec.spec_settings(steps, draft_tokens=draft, algorithm=algo)
        ok = base(spec=spec, sglang_version=version, engine="sglang")
        if algo == "UNO":  # one GPU and its adapter (test_uno_needs_its_adapter_...)
            ok.update(tp_size=1, extra_flags={"uno-lora-path": "/m/uno"})
        assert sglang_flags.server_errors(ok) == [], (algo, version)


def test_uno_needs_its_adapter_one_gpu_and_no_deterministic_inference_before_any_host_changes():
    """SGLang's _handle_uno (0.5.20-0.5.23 arg_groups/speculative_hook.py) refuses UNO without
    --uno-lora-path, at TP or PP above 1, with DP attention or deterministic inference: the server
    failed at start after the unit was written. The flags as SGLang's parser reads them: an
    abbreviation counts, DP attention only at a data-parallel size above 1 (SGLang turns it off)."""
    spec = sglang_spec.spec_settings(1, draft_tokens=4, algorithm="UNO")
    ok = base(spec=spec, sglang_version="0.5.23", engine="sglang", tp_size=1, extra_flags={"uno-lora-path": "/m/uno"})
    assert sglang_flags.server_errors(ok) == []
    assert sglang_flags.server_errors({**ok, "extra_flags": {"uno": "/m/uno"}}) == []  # its only flag
    assert (
        sglang_flags.server_errors({**ok, "extra_flags": {"uno-lora-path": "/m/uno", "enable-dp-attention": True}})
        == []
    )
    errors = sglang_flags.server_errors({**ok, "extra_flags": {}})
    assert len(errors) == 1 and errors[0].startswith("spec_algorithm=UNO needs its LoRA adapter"), errors
    # the emulator takes no --uno-lora-path: its UNO is not held to SGLang's start checks
    assert sglang_flags.server_errors({**ok, "engine": "emulator", "extra_flags": {}}) == []
    flags = {"uno-lora-path": "/m/uno", "enable-deterministic-inference": True, "pp-size": [2]}
    errors = sglang_flags.server_errors({**ok, "tp_size": 2, "extra_flags": flags})
    assert any("'UNO requires TP=PP=1.'" in e and "sglang_server_tp_size=2, pp-size 2" in e for e in errors), errors
    assert any("enable-deterministic-inference" in e for e in errors), errors
    for more in (
        {"enable-dp-attention": True, "dp-size": 2},
        {"attn-dp-size": 2},
        {"attention-context-parallel-size": "2"},
    ):
        extra = {"uno-lora-path": "/m/uno", **more}
        assert any("DP attention or context" in e for e in sglang_flags.server_errors({**ok, "extra_flags": extra}))
    # another algorithm is not held to UNO's rules
    eagle = base(spec=sglang_spec.spec_settings(3, algorithm="EAGLE3", draft_model_path="/m/d"), engine="sglang")
    assert not any("UNO" in e for e in sglang_flags.server_errors(eagle))


def test_a_schedule_beside_a_setting_sglangs_adaptive_mode_does_not_run_with_is_refused():
    """SGLang runs a per-batch-size schedule as a static server, with only a warning, beside DP
    attention, multi-layer EAGLE, two-batch overlap or PD multiplexing
    (speculative/adaptive_spec_params.py `adaptive_unsupported_reason`, 0.5.12-0.5.23)."""
    spec = sglang_spec.spec_settings(3, algorithm="EAGLE3", draft_model_path="/m/d")
    schedule = {"enabled": True, "config": {"1": {"candidate_steps": [3]}}}
    ok = base(spec=spec, sglang_version="0.5.23", engine="sglang", schedule=schedule)

    def refused(extra):
        return [e for e in sglang_flags.server_errors({**ok, "extra_flags": extra}) if "spec_schedule with" in e]

    assert refused({}) == []
    for flag in ("enable-multi-layer-eagle", "enable-two-batch-overlap", "enable-pdmux"):
        assert refused({flag: True}) and refused({flag: True})[0].startswith(
            f"spec_schedule with sglang_server_extra_flags' {flag}"
        )
        # without a schedule the switch is the user's to set
        assert not any(
            "spec_schedule with" in e
            for e in sglang_flags.server_errors({**ok, "schedule": None, "extra_flags": {flag: True}})
        )
    # DP attention only where it is on: SGLang turns the switch off at dp size 1
    assert refused({"enable-dp-attention": True}) == []
    assert refused({"enable-dp-attention": True, "dp-size": 2})
    assert refused({"enable-dp-attention": True, "data-parallel-size": [2]})
    # 0.5.22's spelling, which 0.5.23 asks for instead of the switch (attn_dp_enabled_of reads it)
    assert refused({"attn-dp-size": 2}) and refused({"attention-data-parallel-size": [4]})
    assert refused({"attn-dp-size": 1}) == []
    # an abbreviation is SGLang's to judge (`enable-dp` is ambiguous there), not read as another flag
    assert refused({"enable-dp": True, "dp-size": 2}) == []


def test_dflash_needs_a_draft_model_before_any_host_changes():
    """SGLang refuses DFLASH without --speculative-draft-model-path at start (0.5.12 server_args.py,
    0.5.23 speculative_hook.py): the role says so before any host changes."""
    errors = sglang_spec.spec_settings(1, None, None, "DFLASH")["errors"]
    assert errors == ["spec_algorithm=DFLASH needs a draft model: set sglang_server_spec_draft_model_path"]
    assert sglang_spec.spec_settings(1, None, None, "DFLASH", draft_model_path="/m/d")["errors"] == []


def test_dflash_runs_one_step_and_its_block_size_is_the_draft_models_unless_given():
    """SGLang runs DFLASH at one step with topk 1 and overrides anything else with only a warning
    (0.5.11+ server_args.py, 0.5.23 speculative_hook.py: "DFLASH only supports
    speculative_num_steps == 1; overriding ..."); the role refused nothing and sent steps + 1 = 4
    draft tokens, against the draft model's block size (SGLang warns "DFLASH block size mismatch"
    and runs the 4). Now other steps or topk are refused, and the block size is passed only when
    given: unset, SGLang reads it from the draft model's config."""
    errors = sglang_spec.spec_settings(3, None, None, "DFLASH", draft_model_path="/m/d")["errors"]
    assert errors and errors[0].startswith("spec_steps=3 with spec_algorithm=DFLASH: SGLang runs DFLASH at one step")
    errors = sglang_spec.spec_settings(1, 4, 16, "DFLASH", draft_model_path="/m/d")["errors"]
    assert errors and errors[0].startswith("spec_topk=4 with spec_algorithm=DFLASH")
    assert "at least 2" in sglang_spec.spec_settings(1, None, 1, "DFLASH", draft_model_path="/m/d")["errors"][0]
    unset = sglang_spec.spec_settings(1, None, None, "DFLASH", draft_model_path="/m/d")
    flags = [line[0] for line in sglang_flags.server_flags(base(spec=unset, sglang_version="0.5.23", engine="sglang"))]
    assert "--speculative-num-steps" in flags and "--speculative-num-draft-tokens" not in flags
    given = sglang_spec.spec_settings(1, None, 16, "DFLASH", draft_model_path="/m/d")
    assert given["errors"] == [] and given["num_draft_tokens"] == 16
    lines = sglang_flags.server_flags(base(spec=given, sglang_version="0.5.23", engine="sglang"))
    assert ["--speculative-num-draft-tokens", "16"] in lines and ["--speculative-num-steps", "1"] in lines


def test_dspark_uno_and_ngram_take_only_what_sglang_runs():
    """What SGLang overrides with a warning or refuses at start-up, refused before any host changes
    (0.5.18-0.5.23 arg_groups/speculative_hook.py): DSPARK and UNO's linear mode run one step at topk
    1 ("DSpark only supports speculative_num_steps == 1; overriding", "UNO uses %s=1; overriding");
    DSPARK's verify window must equal the draft's gamma + 1, so steps + 1 = 4 draft tokens, which the
    role sent, stopped a gamma-7 draft's start ("must equal gamma + 1"): passed only when given; UNO
    requires its width, takes no draft model, and its tree mode bounds Q by F and K; NGRAM's topk is
    --speculative-ngram-max-bfs-breadth whatever it is given."""

    def errors(*args, **kw):
        return sglang_spec.spec_settings(*args, **kw)["errors"]

    assert errors(3, None, None, "DSPARK")[0].startswith("spec_steps=3 with spec_algorithm=DSPARK: SGLang runs DSPARK")
    assert errors(1, 2, 4, "DSPARK")[0].startswith("spec_topk=2 with spec_algorithm=DSPARK")
    dspark = sglang_spec.spec_settings(1, None, None, "DSPARK")
    assert dspark["errors"] == [] and dspark["num_draft_tokens"] is None
    lines = sglang_flags.server_flags(base(spec=dspark, sglang_version="0.5.23", engine="sglang"))
    assert "--speculative-num-draft-tokens" not in [line[0] for line in lines]
    assert sglang_spec.spec_settings(1, None, 8, "DSPARK")["num_draft_tokens"] == 8

    assert any(e.startswith("spec_steps=3 with spec_algorithm=UNO") for e in errors(3, None, 4, "UNO"))
    assert errors(1, None, None, "UNO") == [
        "spec_draft_tokens is required with spec_algorithm=UNO: its linear width, which SGLang requires"
    ]
    assert any("takes no draft model" in e for e in errors(1, None, 4, "UNO", draft_model_path="/m/d"))
    assert errors(1, None, 4, "UNO") == []
    # tree mode: Q - 1 <= K (F - 2) + 1 with F = steps + 1 (Q=9, K=2, F=4: 8 > 5)
    assert errors(3, 2, 9, "UNO") == [
        "spec_draft_tokens=9 with spec_algorithm=UNO in tree mode (spec_topk=2) must be at most "
        "spec_topk x (spec_steps - 1) + 2 = 6"
    ]
    assert "at least the draft width spec_steps + 1 = 4" in errors(3, 2, 3, "UNO")[0]
    assert errors(3, 2, 5, "UNO") == []

    assert errors(3, 4, 16, "NGRAM")[0].startswith("spec_topk=4 with spec_algorithm=NGRAM")
    assert errors(3, None, 16, "NGRAM") == []


def test_the_topk_1_rewrite_is_the_eagle_familys_only():
    """SGLang rewrites draft tokens to steps + 1 at topk 1 inside its EAGLE/EAGLE3/STANDALONE block
    only: NGRAM keeps the draft tokens it is given (its default is its match window), so the role
    must not call 8 a contradiction there; EAGLE3 still is."""
    ngram = sglang_spec.spec_settings(3, None, 8, "NGRAM")
    assert ngram["errors"] == [] and ngram["num_draft_tokens"] == 8
    assert sglang_spec.spec_settings(3, None, None, "NGRAM")["num_draft_tokens"] == 4
    assert "at least 2" in sglang_spec.spec_settings(3, None, 1, "NGRAM")["errors"][0]
    eagle3 = sglang_spec.spec_settings(3, None, 8, "EAGLE3", draft_model_path="/m/d")["errors"]
    assert eagle3 and "contradicts spec_steps=3 with spec_topk=1" in eagle3[0]
    assert "contradicts" in sglang_spec.spec_settings(3, None, 8, "NEXTN")["errors"][0]


def test_a_0_step_bucket_needs_sglang_0_5_14():
    """0.5.13 reads per-batch-size configs but refuses a bucket that does not draft
    (adaptive_spec_params.py: 'candidate_steps must be a list of positive ints'); 0.5.14 loads it."""
    old = sglang_spec.schedule_settings({"1": 3, "32": 0}, sglang_version="0.5.13")
    assert old["errors"] and "bucket(s) 32 with 0 steps need SGLang 0.5.14" in old["errors"][0], old["errors"]
    assert sglang_spec.schedule_settings({"1": 3, "32": 1}, sglang_version="0.5.13")["errors"] == []
    assert sglang_spec.schedule_settings({"1": 3, "32": 0}, sglang_version="0.5.14")["errors"] == []


def test_the_default_tables_launch_depth_is_checked_against_the_releases_own_table():
    """spec_schedule=default with spec_steps: 0.5.14-0.5.19's default has no 5 (its first bucket is
    [1, 3, 7]: SGLang refuses a launch depth outside the candidates), 0.5.20+'s has."""
    assert (
        "launch depth must be one of"
        in sglang_spec.schedule_settings("default", 5, sglang_version="0.5.17")["errors"][0]
    )
    assert sglang_spec.schedule_settings("default", 5, sglang_version="0.5.23")["errors"] == []
    assert sglang_spec.schedule_settings("default", 7, sglang_version="0.5.13")["errors"] == []


def test_adaptive_on_0_5_11_needs_the_overlap_scheduler_off():
    """0.5.11 falls back to static unless the overlap scheduler is off (adaptive_unsupported_reason:
    'the overlap scheduler (spec v2) is enabled'): refused before any host changes, as the role
    refuses every other fallback; 0.5.12 runs it on the v2 worker."""
    sched = sglang_spec.schedule_settings("default", sglang_version="0.5.11")
    assert sched["errors"] == [] and sched["enabled"]
    errors = sglang_flags.server_errors(base(schedule=sched, sglang_version="0.5.11", engine="sglang"))
    assert any("needs the overlap scheduler off" in e for e in errors), errors
    off = base(schedule=sched, sglang_version="0.5.11", engine="sglang", extra_flags={"disable-overlap-schedule": True})
    assert not any("overlap scheduler" in e for e in sglang_flags.server_errors(off))
    s12 = sglang_spec.schedule_settings("default", sglang_version="0.5.12")
    twelve = sglang_flags.server_errors(base(schedule=s12, sglang_version="0.5.12", engine="sglang"))
    assert not any("overlap scheduler" in e for e in twelve)


def test_default_adaptive_before_0_5_14_launches_a_chain():
    """Before 0.5.14 SGLang auto-picks (steps, topk, draft) by architecture ahead of its adaptive
    check, (5, 4, 8) for Llama: topk 4 turned adaptive off. The role launches the default at 3 steps
    with topk 1 there; from 0.5.14 SGLang itself starts adaptive at topk 1."""
    for version in ("0.5.11", "0.5.12", "0.5.13"):
        s = sglang_spec.schedule_settings("default", sglang_version=version)
        assert s["errors"] == [] and s["num_steps"] == 3, version
        flags = flat(sglang_flags.server_flags(base(schedule=s, sglang_version=version, engine="sglang")))
        assert flags[flags.index("--speculative-eagle-topk") + 1] == "1" and "--speculative-adaptive" in flags
    assert sglang_spec.schedule_settings("default", sglang_version="0.5.23")["num_steps"] is None


def test_rank_0_binds_its_message_queue_on_the_dist_init_address():
    """SGLang's cross-node message queue binds rank 0's `get_local_ip_auto()` (SGLANG_HOST_IP, else
    the default route's address: srt/distributed/device_communicators/shm_broadcast.py): on hosts
    with a management network and a cluster network the worker nodes could not reach it and the
    group hung. Rank 0 gets its dist-init IP; a host name (zmq binds numeric addresses only) none."""
    members = ["a", "b"]
    assert sglang_flags.node_settings("a", "g", members, "10.0.0.21", 29500)["host_ip"] == "10.0.0.21"
    assert sglang_flags.node_settings("b", "g", members, "10.0.0.21", 29500)["host_ip"] is None
    assert sglang_flags.node_settings("a", "g", members, "fd00::21", 29500)["host_ip"] == "fd00::21"
    assert sglang_flags.node_settings("a", "g", members, "gpu-a.cluster", 29500)["host_ip"] is None
    assert sglang_flags.node_settings("a", "g", members, "", 29500, "[fd00::5]:29500")["host_ip"] == "fd00::5"
    assert sglang_flags.node_settings("a", "", None, "", 29500)["host_ip"] is None


def test_what_a_release_needs_on_the_host():
    """The wheels' METADATA: Requires-Python >=3.11 from 0.5.22 (>=3.10 before), and from 0.5.11 CUDA
    13 builds (cuda-python>=13.0, torch 2.11+, PyPI's CUDA 13.0 build). Ubuntu 22.04's Python 3.10
    got pip's "no matching distribution" after the venv was made; a CUDA 12 driver passed."""
    from sglang_utils import sglang_releases as R

    [py] = R.install_errors("0.5.22", "3.10", "13.0")
    assert py.startswith("SGLang 0.5.22 needs Python 3.11 or later") and "/usr/bin/python3.11" in py
    assert R.install_errors("0.5.21", "3.10", "13.0") == []
    assert R.install_errors("0.5.23.post1", "3.12", "13.0") == []
    [cuda] = R.install_errors("0.5.11", "3.12", "12.8")
    assert (
        "PyTorch built for CUDA 13," in cuda and "0.5.10 or earlier" in cuda and "cuda_env_check_driver: false" in cuda
    )
    # the major version only: CUDA's minor-version compatibility runs a 12.8 build on a 12.2 driver
    assert R.install_errors("0.5.10", "3.10", "12.2") == [] and R.install_errors("0.5.11", "3.12", "13.0") == []
    assert R.install_errors("0.5.9", "3.10", "11.8")[0].startswith("SGLang 0.5.9 installs a PyTorch built for CUDA 12,")
    # unknown values and a source build of main are not checked
    assert R.install_errors("0.5.23", None, "N/A") == [] and R.install_errors("0.5.23", "", "ERR!") == []
    assert R.install_errors("0.0.0.dev1+gabc", "3.9", "11.0") == []
    # from 0.5.11 only cp310-cp313 wheels and no sdist: a newer Python finds no distribution
    [newer] = R.install_errors("0.5.11", "3.14", "13.0")
    assert newer.startswith("SGLang 0.5.11 ships wheels for Python up to 3.13 only (no sdist)"), newer
    assert R.install_errors("0.5.23", "3.13", "13.0") == [] and R.install_errors("0.5.10", "3.14", "12.8") == []


def test_an_extra_flags_value_cannot_smuggle_in_a_flag_of_its_own():
    """Each value is its own word on the command line, and argparse reads a word that starts with a
    dash as an option: a list item `--api-key` put the key on the command line and a later
    `--tp-size` overrode the role's, past every check on the flags' names."""
    for flags in (
        {"cuda-graph-bs": [1, 2, "--api-key", "s3cretkey-on-cmdline", "--tp-size", "8"]},
        {"cuda-graph-bs": [1, "-tp"]},
        {"chat-template": "--dist-timeout"},
        {"cuda-graph-bs": [1, "--api-key=s3cretkey-on-cmdline"]},  # the message names the flag, not the key
    ):
        errors = sglang_flags.server_errors(base(extra_flags=flags))
        assert any("SGLang's parser reads a word starting with '-' as a flag" in e for e in errors), (flags, errors)
        assert "s3cretkey-on-cmdline" not in " ".join(errors)
    # negative numbers are values, not flags, as argparse tells them (-1, -0.5, -.5; -1e3 and -1. it
    # reads as options, and SGLang would exit "expected one argument")
    for value in ("-1e3", ["-1.", 4]):
        assert sglang_flags.server_errors(base(extra_flags={"cuda-graph-bs": value})), value
    for value in (-1, "-1", "-0.5", ["-.5", 4], "a-b"):
        assert sglang_flags.server_errors(base(extra_flags={"cuda-graph-bs": value})) == [], value


def test_a_lora_adapter_beside_speculation_sglang_refuses_is_refused_before_any_host_changes():
    """SGLang refuses LoRA beside any speculation but NGRAM up to 0.5.18 (server_args.py
    check_lora_server_args: 'Currently LoRA is only compatible with NGRAM speculative decoding.'),
    and from 0.5.19 beside adaptive speculation or an algorithm outside the EAGLE family, DFLASH and
    DSPARK (arg_groups/lora_hook.py check_lora_speculative_compatibility). The role's own default
    speculates (NEXTN, 3 steps): adding an adapter failed the start on every release to 0.5.18."""
    nextn = sglang_spec.spec_settings(3, algorithm="NEXTN")
    lora = {"lora-paths": "ad=/models/lora"}

    def errors(version, spec=nextn, extra=lora, schedule=None, engine="sglang"):
        settings = base(spec=spec, sglang_version=version, engine=engine, extra_flags=extra, schedule=schedule)
        return [e for e in sglang_flags.server_errors(settings) if "LoRA" in e]

    [old] = errors("0.5.16")
    assert "spec_algorithm=NEXTN" in old and "Currently LoRA is only compatible with NGRAM" in old
    assert errors("0.5.18", extra={"enable-lora": True})
    assert errors("0.5.19") == [] and errors("0.5.23") == []
    ngram = sglang_spec.spec_settings(3, algorithm="NGRAM")
    assert errors("0.5.16", spec=ngram) == []
    assert errors("0.5.16", spec=sglang_spec.spec_settings(0)) == []  # no speculation
    # a switch set false is left off the line (server_flags): the paths still turn LoRA on
    assert errors("0.5.16", extra={"lora-paths": "ad=/m", "enable-lora": False})
    standalone = sglang_spec.spec_settings(3, algorithm="STANDALONE", draft_model_path="/m/d")
    [other] = errors("0.5.23", spec=standalone)
    assert "NGRAM, EAGLE, NEXTN, EAGLE3, DFLASH or DSPARK only" in other
    schedule = sglang_spec.schedule_settings({"1": 4, "16": 3}, sglang_version="0.5.23")
    [adaptive] = errors("0.5.23", schedule=schedule)
    assert "does not support --speculative-adaptive" in adaptive and adaptive.endswith(
        "drop spec_schedule or the adapter"
    )
    # before 0.5.19 too: the fix is the same (spec_steps=0 would leave the schedule on, NGRAM has no schedule)
    old_schedule = sglang_spec.schedule_settings({"1": 4, "16": 3}, sglang_version="0.5.13")
    [before] = errors("0.5.13", schedule=old_schedule)
    assert before.endswith("drop spec_schedule or the adapter") and "spec_steps=0" not in before
    # the emulator takes no LoRA flags; a release before the table is not judged
    assert errors("0.5.16", engine="emulator") == [] and errors("0.5.3") == []
    assert errors("0.5.16", extra={}) == []
