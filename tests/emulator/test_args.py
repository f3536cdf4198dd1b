"""Flag parsing and SGLang's argument rules (docs/reference/sglang.md §2, §7.1)."""

from __future__ import annotations

import re

import pytest
from emu_testlib import MODEL, run_cli

from tuner.emulator import parse as P
from tuner.emulator import resolve as R
from tuner.emulator.faults import Fault, FaultError, FaultSet, parse_fault
from tuner.emulator.profile import DEFAULT_PROFILE_NAME, PROFILE_DIR, load_profile

PROFILE = load_profile()

# What the role's template passes (docs/architecture.md "The emulator"), in one command line.
TEMPLATE_FLAGS = [
    "--model-path",
    MODEL,
    "--served-model-name",
    "qwen3.5-122b",
    "--host",
    "0.0.0.0",
    "--port",
    "30000",
    "--tp-size",
    "4",
    "--mem-fraction-static",
    "0.8",
    "--max-running-requests",
    "64",
    "--api-key",
    "s3cret",
    "--enable-metrics",
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--context-length",
    "262144",
    "--chunked-prefill-size",
    "8192",
    "--trust-remote-code",
    "--decode-log-interval",
    "40",
    "--log-level",
    "info",
    "--watchdog-timeout",
    "600",
    "--skip-server-warmup",
    "--nnodes",
    "1",
    "--node-rank",
    "0",
    "--dist-init-addr",
    "10.0.0.1:5000",
    # other common SGLang flags (docs/reference/sglang.md §7.1)
    "--kv-cache-dtype",
    "auto",
    "--attention-backend",
    "flashinfer",
    "--page-size",
    "1",
    "--mamba-scheduler-strategy",
    "no_buffer",
    "--disable-radix-cache",
    "--cuda-graph-max-bs",
    "64",
    "--reasoning-parser",
    "qwen3",
    "--tool-call-parser",
    "qwen3_coder",
    "--tokenizer-path",
    MODEL,
    "--dp-size",
    "1",
    # the emulator's own
    "--emulator-startup-s",
    "0.5",
    "--emulator-fault",
    "slow-startup=1",
    "--emulator-fault",
    "http-5xx=0.1",
]


def resolve(*argv: str) -> R.ResolvedArgs:
    return R.resolve(P.parse_flags(["--model-path", MODEL, *argv]), PROFILE)


def messages(cfg: R.ResolvedArgs) -> list[str]:
    return [n.message for n in cfg.notes]


def test_template_flags_are_all_accepted():
    cfg = R.resolve(P.parse_flags(TEMPLATE_FLAGS), PROFILE)
    v = cfg.values
    assert v["tp_size"] == 4 and v["port"] == 30000 and v["host"] == "0.0.0.0"
    assert v["max_running_requests"] == 64 and v["mem_fraction_static"] == 0.8
    assert cfg.spec_on and cfg.num_steps == 3 and cfg.topk == 1 and cfg.num_draft_tokens == 4
    assert not cfg.draft_tokens_adjusted
    assert v["speculative_algorithm"] == "EAGLE"  # NEXTN is reported as EAGLE (§2.2)
    assert FaultSet.from_list(cfg.faults).slow_startup_s == 1.0
    assert R.MSG_MRR_RESET not in messages(cfg)  # the flag was given


def test_unique_prefix_is_accepted_like_argparse():
    cfg = resolve("--speculative-algo", "NEXTN", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1")
    assert cfg.values["speculative_algorithm"] == "EAGLE" and cfg.num_steps == 2


def test_topk1_forces_draft_tokens_with_sglang_warning():
    cfg = resolve(
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "4",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "9",
        "--max-running-requests",
        "8",
    )
    assert cfg.num_draft_tokens == 5 and cfg.values["speculative_num_draft_tokens"] == 5
    assert cfg.draft_tokens_adjusted
    assert R.MSG_TOPK_ADJUST == (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
    )
    assert R.MSG_TOPK_ADJUST in messages(cfg)


def test_topk1_without_draft_tokens_is_adjusted_too():
    cfg = resolve("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1")
    assert cfg.num_draft_tokens == 3 and cfg.draft_tokens_adjusted


def test_speculation_without_max_running_requests_resets_to_48():
    cfg = resolve(
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    )
    assert cfg.values["max_running_requests"] == 48
    assert (
        "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
        "setting --max-running-requests."
    ) in messages(cfg)
    # the warning comes before the topk rule, as in SGLang's __post_init__
    ms = messages(cfg)
    assert ms.index(R.MSG_MRR_RESET) < ms.index(R.MSG_OVERLAP)


def test_no_speculation_leaves_max_running_requests_unset():
    cfg = resolve()
    assert cfg.values["max_running_requests"] is None and not cfg.spec_on and cfg.num_steps == 0
    assert R.MSG_MRR_RESET not in messages(cfg)


def test_auto_speculative_params_when_all_three_unset():
    cfg = resolve("--speculative-algorithm", "NEXTN")
    assert (cfg.num_steps, cfg.topk, cfg.num_draft_tokens) == (3, 1, 4)


@pytest.mark.parametrize("extra", [["--speculative-eagle-topk", "1"], ["--speculative-num-draft-tokens", "4"]])
def test_topk_or_draft_tokens_without_steps_is_a_bare_assertion(extra):
    with pytest.raises(AssertionError) as ei:
        resolve("--speculative-algorithm", "NEXTN", *extra)
    assert str(ei.value) == ""


def test_trtllm_with_topk_above_one_is_rejected():
    with pytest.raises(ValueError, match="trtllm_mha backend only supports topk = 1 for speculative decoding."):
        resolve(
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "2",
            "--speculative-num-draft-tokens",
            "6",
            "--attention-backend",
            "trtllm_mha",
        )


def test_inconsistent_tree_is_flagged_for_a_failure_at_graph_capture():
    cfg = resolve(
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert cfg.draft_tokens_inconsistent and not cfg.draft_tokens_adjusted
    ok = resolve(
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "5",
    )
    assert not ok.draft_tokens_inconsistent


def test_hybrid_model_speculation_disables_radix_cache_with_warning():
    cfg = resolve("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1")
    assert cfg.values["disable_radix_cache"] is True
    assert any(
        m.startswith("Disabling radix cache since speculative decoding for Qwen3_5MoeForConditionalGeneration")
        for m in messages(cfg)
    )


@pytest.mark.parametrize("version", ["0.5.10", "0.5.11", "0.5.12"])
def test_later_sglang_versions_refuse_radix_with_mamba_speculation(version):
    argv = ["--model-path", MODEL, "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1"]
    with pytest.raises(ValueError) as ei:
        R.resolve(P.parse_flags(argv, version=version), PROFILE)
    assert str(ei.value) == (
        "Speculative decoding for Qwen3_5MoeForConditionalGeneration is not compatible with radix cache when "
        "using --mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
        "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
    )
    ok = R.resolve(P.parse_flags([*argv, "--disable-radix-cache"], version=version), PROFILE)
    assert ok.spec_on and ok.values["disable_radix_cache"] is True


def test_unknown_flag_is_rejected_like_argparse(capsys):
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(["--model-path", MODEL, "--no-such-flag", "3"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "launch_server.py: error: unrecognized arguments: --no-such-flag 3" in err
    assert err.startswith("usage: launch_server.py")


def test_ambiguous_prefix_and_bad_choice_are_argparse_errors(capsys):
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(["--model-path", MODEL, "--speculative-a", "NEXTN"])
    assert ei.value.code == 2
    assert "ambiguous option: --speculative-a" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        P.parse_flags(["--model-path", MODEL, "--speculative-algorithm", "nextn"])
    assert "invalid choice: 'nextn'" in capsys.readouterr().err


def test_model_path_is_required(capsys):
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(["--port", "1"])
    assert ei.value.code == 2 and "the following arguments are required: --model-path" in capsys.readouterr().err


def test_fault_parsing():
    assert parse_fault("kv-oom") == Fault("kv-oom", None)
    assert parse_fault("crash-after-ready=2.5") == Fault("crash-after-ready", 2.5)
    assert parse_fault("hang-before-ready") == Fault("hang-before-ready", "http")
    assert parse_fault("hang-before-ready=load") == Fault("hang-before-ready", "load")
    assert parse_fault("http-5xx=0.25").arg == 0.25
    for bad in (
        "nope",
        "http-5xx",
        "http-5xx=2",
        "cut-stream=x",
        "kv-oom=1",
        "slow-startup=-1",
        "hang-before-ready=later",
    ):
        with pytest.raises(FaultError):
            parse_fault(bad)


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_startup_time_that_is_no_finite_number_exits_2(capsys, value):
    """`--emulator-startup-s nan` passed the `< 0` check and served at once; `inf` never finished
    starting (the profile's startup_s refuses both)."""
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(["--model-path", MODEL, "--emulator-startup-s", value])
    assert (
        ei.value.code == 2 and "argument --emulator-startup-s: must be a finite number >= 0" in capsys.readouterr().err
    )


def test_a_fault_given_twice_exits_2_and_startup_delays_add_up(capsys):
    """A second `--emulator-fault spec-diverge=7` replaced the first without a word."""
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(
            ["--model-path", MODEL, "--emulator-fault", "spec-diverge=3", "--emulator-fault", "spec-diverge=7"]
        )
    assert (
        ei.value.code == 2 and "argument --emulator-fault: spec-diverge given more than once" in capsys.readouterr().err
    )
    ns = P.parse_flags(
        ["--model-path", MODEL, "--emulator-fault", "slow-startup=1", "--emulator-fault", "slow-startup=2"]
    )
    assert FaultSet.from_list(ns.emulator_fault_list).slow_startup_s == 3


def test_bad_fault_flag_exits_2(capsys):
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(["--model-path", MODEL, "--emulator-fault", "meltdown"])
    assert (
        ei.value.code == 2 and "argument --emulator-fault: 'meltdown' is not one of kv-oom" in capsys.readouterr().err
    )


def test_server_args_line_shows_the_api_key_as_sglang_does():
    # Real SGLang prints the key in its server_args= line and /server_info (sglang issue #37457);
    # the emulator must not hide the problem the role has to solve.
    cfg = resolve("--api-key", "s3cret-key")
    text = R.server_args_repr(cfg.values)
    assert text.startswith("ServerArgs(model_path=") and "api_key='s3cret-key'" in text
    assert "admin_api_key=None" in text
    assert R.public_values(cfg.values)["api_key"] == "s3cret-key"


def test_config_file_flags_come_first_and_the_command_line_wins(tmp_path):
    conf = tmp_path / "server.yaml"
    conf.write_text(
        '{"api-key": "k$ey \\"quoted\\"\\nline", "port": 31000, "enable-metrics": true,'
        ' "disable-radix-cache": false, "log-level": "debug"}\n'
    )
    ns = P.parse_flags(["--model-path", MODEL, "--config", str(conf), "--log-level", "info"])
    assert ns.api_key == 'k$ey "quoted"\nline' and ns.port == 31000
    assert ns.enable_metrics is True and ns.disable_radix_cache is False
    assert ns.log_level == "info"  # the command line overrides the file


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("server.json", "{}", "Config file must be YAML format, got: .json"),
        ("server.yaml", "- 1\n", "Config file must contain a dictionary at root level"),
        ("missing.yaml", None, "Config file not found:"),
    ],
)
def test_config_file_errors_are_sglangs(tmp_path, name, content, message):
    conf = tmp_path / name
    if content is not None:
        conf.write_text(content)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        P.parse_flags(["--model-path", MODEL, "--config", str(conf)])


def test_two_config_files_are_refused(tmp_path):
    conf = tmp_path / "a.yaml"
    conf.write_text("{}")
    with pytest.raises(ValueError, match="Multiple config files specified"):
        P.parse_flags(["--config", str(conf), "--config", str(conf)])


def test_cli_unknown_flag_exit_code_and_message():
    r = run_cli("--model-path", MODEL, "--speculative-num-stepz", "3")
    assert r.returncode == 2
    assert "error: unrecognized arguments: --speculative-num-stepz 3" in r.stderr


def test_cli_assertion_error_like_sglang():
    r = run_cli("--model-path", MODEL, "--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1")
    assert r.returncode == 1
    assert r.stderr.rstrip().endswith("AssertionError") and "Traceback (most recent call last):" in r.stderr
    assert "server_args=" not in r.stderr  # fails while the arguments are resolved, before the first line


def test_cli_bad_profile_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("served_model_name: x\n")
    r = run_cli("--model-path", MODEL, "--emulator-profile", str(bad))
    assert r.returncode == 2 and "missing key(s)" in r.stderr and "t_spec_ms" in r.stderr


def test_cli_a_repeated_profile_key_is_a_clear_error(tmp_path):
    """PyYAML keeps the last of a repeated key: a second `alpha:` replaced the first without a
    word and the server started on it. Now the start fails naming the key and both lines."""
    base = (PROFILE_DIR / DEFAULT_PROFILE_NAME).read_text()
    bad = tmp_path / "twice.yaml"
    bad.write_text(base + "alpha: {0.0: 0.5}\n")
    r = run_cli("--model-path", MODEL, "--emulator-profile", str(bad))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "key 'alpha' appears twice" in r.stderr and "Traceback" not in r.stderr


def _without_alpha(profile_text: str) -> str:
    """The profile without its top-level `alpha:` block (the key and its indented lines)."""
    return re.sub(r"(?m)^alpha:\n(?:[ #].*\n)*", "", profile_text, count=1)


def test_a_repeated_key_on_one_line_fails_and_a_merge_key_still_loads(tmp_path):
    """`{0.0: 0.5, 0.0: 0.7}` repeats a key on one line, and `{0: 0.5, 0.0: 0.7}` in two spellings of
    one number: both fail. YAML's merge key (`<<: *anchor`) is not a repeat: the profile loads, its
    own keys over the merged ones."""
    from tuner.emulator.profile import ProfileError

    base = (PROFILE_DIR / DEFAULT_PROFILE_NAME).read_text()
    for inline in ("{0.0: 0.5, 0.0: 0.7}", "{0: 0.5, 0.0: 0.7}"):
        bad = tmp_path / "inline.yaml"
        bad.write_text(_without_alpha(base) + f"alpha: {inline}\n")
        with pytest.raises(ProfileError, match="key 0.0 appears twice"):
            load_profile(bad)
    merged = tmp_path / "merged.yaml"
    merged.write_text(_without_alpha(base) + "alpha: {<<: {0.0: 0.5, 1.0: 0.6}, 0.0: 0.9}\n")
    assert dict(load_profile(merged).alpha) == {0.0: 0.9, 1.0: 0.6}
