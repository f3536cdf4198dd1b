"""The emulator plays the SGLang release it is told to (issue #12): flags, messages, endpoints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from emu_testlib import MODEL, START_FAILURE_EXIT_S, run_cli, spec_flags

from tuner.emulator import flags as F
from tuner.emulator import parse as P
from tuner.emulator import resolve as R
from tuner.emulator import versions
from tuner.emulator.profile import load_profile

PROFILE = load_profile()
DATA = Path(__file__).parent / "data" / "sglang_flags"


def real_flags(version: str) -> set[str]:
    """Every spelling the release's own parser accepts (extracted from its wheel: data/sglang_flags/extract.py)."""
    return set((DATA / f"{version}.txt").read_text().split())


def emulated_flags(version: str) -> set[str]:
    return {
        o
        for a in F.build_parser(version)._actions
        for o in a.option_strings
        if o.startswith("--") and not o.startswith("--emulator-") and o != "--help"
    }


ALL_SPELLINGS = {name for flag in F._FLAGS for name in flag.names}


@pytest.mark.parametrize("version", versions.SUPPORTED)
def test_each_release_has_exactly_the_flags_its_parser_has(version):
    real = real_flags(version)
    emulated = emulated_flags(version)
    assert emulated <= real, f"flags {version} does not have: {sorted(emulated - real)}"
    # every spelling the emulator knows from some release, and this release has, is there
    assert {f for f in ALL_SPELLINGS if f in real} <= emulated


@pytest.mark.parametrize(
    ("version", "flag", "value"),
    [
        ("0.5.9", "--speculative-adaptive", None),
        ("0.5.10", "--speculative-adaptive-config", "x.json"),
        ("0.5.23", "--stream-output", None),
        ("0.5.23", "--mamba-scheduler-strategy", "no_buffer"),
        ("0.5.12", "--mamba-radix-cache-strategy", "auto"),
        ("0.5.9", "--incremental-streaming-output", None),
        ("0.5.12", "--attn-dp-size", "2"),
    ],
)
def test_a_flag_the_release_lacks_is_an_argparse_error_of_that_release(capsys, version, flag, value):
    assert flag not in real_flags(version)
    argv = ["--model-path", MODEL, flag] + ([value] if value else [])
    with pytest.raises(SystemExit) as ei:
        P.parse_flags(argv, version=version)
    assert ei.value.code == 2
    err = capsys.readouterr().err
    prog = "launch_server.py" if version == "0.5.9" else "sglang serve"
    assert err.startswith(f"usage: {prog} ")
    assert f"{prog}: error: unrecognized arguments: {' '.join(argv[2:])}" in err


def test_0523_renamed_cuda_graph_flags_make_the_old_spelling_ambiguous(capsys):
    # 0.5.23 has --cuda-graph-max-bs-decode and -prefill: argparse reads the old name as a prefix of both.
    with pytest.raises(SystemExit):
        P.parse_flags(["--model-path", MODEL, "--cuda-graph-max-bs", "16"], version="0.5.23")
    err = capsys.readouterr().err
    assert "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match" in err
    assert "--cuda-graph-max-bs-decode" in err and "--cuda-graph-max-bs-prefill" in err
    ns = P.parse_flags(["--model-path", MODEL, "--cuda-graph-max-bs-decode", "16"], version="0.5.23")
    assert ns.cuda_graph_max_bs_decode == 16


def test_deprecated_spellings_warn_as_sglang_does(capsys):
    ns = P.parse_flags(["--model-path", MODEL, "--stream-output"], version="0.5.10")
    assert ns.incremental_streaming_output is True
    assert (
        "\033[1;33m'--stream-output' is deprecated and will be removed in a future release. "
        "Use '--incremental-streaming-output' instead.\033[0m"
    ) in capsys.readouterr().err
    ns = P.parse_flags(["--model-path", MODEL, "--enable-dp-attention"], version="0.5.23")
    assert ns.enable_dp_attention is True
    assert "Use '--attn-dp-size <dp-size>' instead." in capsys.readouterr().err


def test_the_release_comes_from_the_flag_the_config_file_or_the_profile(tmp_path):
    assert P.parse_flags(["--model-path", MODEL]).emulator_facts.version == "0.5.9"  # the seed profile's
    ns = P.parse_flags(["--model-path", MODEL, "--emulator-sglang-version", "0.5.23"])
    assert ns.emulator_facts.version == "0.5.23" and hasattr(ns, "mamba_radix_cache_strategy")
    conf = tmp_path / "server.yaml"
    conf.write_text("emulator-sglang-version: 0.5.12\n")
    assert P.parse_flags(["--model-path", MODEL, "--config", str(conf)]).emulator_facts.version == "0.5.12"
    prof = tmp_path / "p.yaml"
    prof.write_text(Path(PROFILE.path).read_text().replace('sglang_version: "0.5.9"', 'sglang_version: "0.5.11"'))
    assert P.parse_flags(["--model-path", MODEL, "--emulator-profile", str(prof)]).emulator_facts.version == "0.5.11"
    assert versions.get("0.5.12.post1").version == "0.5.12"


def test_an_unmodelled_release_is_a_start_up_error_naming_the_modelled_ones(tmp_path):
    r = run_cli("--model-path", MODEL, "--emulator-sglang-version", "0.5.99")
    assert r.returncode == 2
    assert (
        "error: argument --emulator-sglang-version: SGLang 0.5.99 is not emulated; the emulator models SGLang "
        "0.5.9, 0.5.10, 0.5.11, 0.5.12, 0.5.23"
    ) in r.stderr
    prof = tmp_path / "p.yaml"
    prof.write_text(Path(PROFILE.path).read_text().replace('sglang_version: "0.5.9"', 'sglang_version: "0.4.0"'))
    r = run_cli("--model-path", MODEL, "--emulator-profile", str(prof))
    assert r.returncode == 2 and "SGLang 0.4.0 is not emulated" in r.stderr
    # named as the profile's key, not as a flag nobody passed
    assert (
        "error: argument --emulator-profile: emulator profile " in r.stderr and ": sglang_version: SGLang" in r.stderr
    )


def notes(cfg: R.ResolvedArgs) -> list[str]:
    return [n.message for n in cfg.notes]


def resolve(version: str, *argv: str, env: dict[str, str] | None = None) -> R.ResolvedArgs:
    return R.resolve(P.parse_flags(["--model-path", MODEL, *argv], version=version), PROFILE)


def test_spec_v2_rules_and_messages_per_release(monkeypatch):
    monkeypatch.delenv("SGLANG_ENABLE_SPEC_V2", raising=False)
    nr = ["--disable-radix-cache"]
    old = resolve("0.5.9", *spec_flags(3))
    assert R.MSG_OVERLAP in notes(old) and old.values["disable_overlap_schedule"] is True
    v12 = resolve("0.5.12", *spec_flags(3), *nr)
    assert "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding." in notes(v12)
    assert v12.values["disable_overlap_schedule"] is False
    topk2 = resolve(
        "0.5.11",
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "4",
        *nr,
    )
    assert (
        "Spec v1 is used for eagle/eagle3/standalone speculative decoding because spec v2 currently only supports topk = 1."
        in notes(topk2)
    )
    v23 = resolve("0.5.23", *spec_flags(3), "--disable-overlap-schedule")
    assert "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding." in notes(v23)
    assert not any("Overlap scheduler" in m for m in notes(resolve("0.5.23", *spec_flags(3))))


def test_hybrid_radix_cache_with_speculation_per_release():
    v9 = resolve("0.5.9", *spec_flags(2))
    assert v9.values["disable_radix_cache"] is True and v9.values["mamba_scheduler_strategy"] == "no_buffer"
    # 0.5.23 keeps the radix cache and picks extra_buffer when the overlap scheduler is on
    v23 = resolve("0.5.23", *spec_flags(2))
    assert v23.values["disable_radix_cache"] is False and v23.values["mamba_radix_cache_strategy"] == "extra_buffer"
    v23 = resolve("0.5.23", *spec_flags(2), "--disable-overlap-schedule")
    assert v23.values["mamba_radix_cache_strategy"] == "no_buffer"


def test_free_string_algorithm_names_are_checked_later_with_sglangs_error(capsys):
    with pytest.raises(SystemExit):
        P.parse_flags(["--model-path", MODEL, "--speculative-algorithm", "MEDUSA"], version="0.5.11")
    assert "invalid choice: 'MEDUSA'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="^Unknown speculative algorithm name: MEDUSA$"):
        resolve("0.5.23", "--speculative-algorithm", "medusa")
    assert (
        resolve("0.5.23", "--speculative-algorithm", "nextn", "--speculative-num-steps", "2").values[
            "speculative_algorithm"
        ]
        == "EAGLE"
    )


def test_config_merge_differs_between_releases(tmp_path):
    conf = tmp_path / "s.yaml"
    conf.write_text("json-model-override-args: {rope_scaling: {factor: 2}}\n")
    old = P.parse_flags(["--model-path", MODEL, "--config", str(conf)], version="0.5.9")
    new = P.parse_flags(["--model-path", MODEL, "--config", str(conf)], version="0.5.23")
    assert old.json_model_override_args == "{'rope_scaling': {'factor': 2}}"  # str(dict)
    assert json.loads(new.json_model_override_args) == {"rope_scaling": {"factor": 2}}  # JSON
    # 0.5.10-0.5.12 key the unsupported options by dest: the deprecated --stream-output shares the
    # dest of --incremental-streaming-output and shadows it; 0.5.23 keeps a key a supported flag reads.
    conf.write_text("incremental-streaming-output: true\n")
    with pytest.raises(ValueError) as ei:
        P.parse_flags(["--model-path", MODEL, "--config", str(conf)], version="0.5.12")
    assert str(ei.value) == (
        "Unsupported config option 'incremental_streaming_output' with action 'DeprecatedStoreTrueAction'"
    )
    assert P.parse_flags(["--model-path", MODEL, "--config", str(conf)], version="0.5.23").incremental_streaming_output


def test_0523_first_line_is_the_resolved_dict_with_the_key():
    cfg = resolve("0.5.23", "--api-key", "k-123")
    text = R.server_args_repr(cfg.values, cfg.facts)
    assert text.startswith("{'model_path': ") and "'api_key': 'k-123'" in text
    assert R.server_args_repr(resolve("0.5.12", "--api-key", "k").values, versions.get("0.5.12")).startswith(
        "ServerArgs(model_path="
    )


# ---- a 0.5.23 process: lines, /server_info, /metrics, meta_info --------------------------------------


@pytest.fixture(scope="module")
def srv23(tmp_path_factory):
    from emu_testlib import Emulator

    tmp = tmp_path_factory.mktemp("srv23")
    conf = tmp / "server.yaml"
    conf.write_text("api-key: from-the-config\nenable-metrics: true\n")
    e = Emulator(
        tmp,
        [
            "--config",
            str(conf),
            "--tp-size",
            "2",
            *spec_flags(3),
            "--decode-log-interval",
            "5",
            "--emulator-sglang-version",
            "0.5.23",
            "--emulator-startup-s",
            "0.3",
        ],
    )
    try:
        yield e.wait_ready()
    finally:
        e.kill()


AUTH = {"Authorization": "Bearer from-the-config"}


def test_0523_startup_lines(srv23):
    log = srv23.log()
    assert re.search(r"^\[[\d\- :]+\] server_args=\{'model_path': ", log, re.M)
    assert re.search(
        r"^\[[\d\- :]+ TP0\] KV Cache is allocated\. dtype: torch\.bfloat16, #tokens: 295931, K size: [\d.]+ GB, V size: [\d.]+ GB$",
        log,
        re.M,
    )
    assert "Max running requests is reset to 48" in log and "WARNING server_args.py" not in log
    # the distributed init's lines from 0.5.21 (srt/distributed/bootstrap.py): what a worker node's
    # gate reads as joined (plugins/module_utils/sglang_log.py is_joined_line)
    assert re.search(r"^\[[\d\- :]+ TP0\] Init parallel begin\.$", log, re.M)
    assert re.search(r"^\[[\d\- :]+ TP0\] Init parallel ends\. elapsed=[\d.]+ s$", log, re.M)
    assert "Init torch distributed" not in log


def test_0523_server_info_keys_and_launch_command(srv23):
    info = srv23.get_json("/server_info", headers=AUTH)
    assert info["version"].startswith("0.5.23+emulator")
    for key in ("launch_command", "kv_events", "startup_time", "frontend", "internal_states"):
        assert key in info, key
    # the merged command line: the config file's flags first, the API key in the clear (as real 0.5.23)
    assert info["launch_command"].startswith("--api-key from-the-config --enable-metrics --model-path")
    st = info["internal_states"][0]
    assert st["world_size"] == 2 and st["speculative_num_steps"] == 3
    assert set(st["memory_usage"]) >= {"weight", "kvcache", "startup_available", "token_capacity", "graph"}
    assert isinstance(st["memory_usage"]["graph"], dict) and "target_verify" in st["memory_usage"]["graph"]


def test_0523_metrics_and_meta_info_names(srv23):
    status, out = srv23.post_json(
        "/generate",
        {
            "text": "count these words " * 8,
            "sampling_params": {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True},
        },
        headers=AUTH,
    )
    assert status == 200
    meta = out["meta_info"]
    assert {"spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_correct_drafts_histogram"} <= set(meta)
    assert "spec_accept_token_num" not in meta
    text = srv23.get("/metrics")[1].decode()
    ver = float(re.search(r"^sglang:spec_verify_calls_total\{[^}]*\} ([\d.]+)$", text, re.M).group(1))
    gen = sum(
        float(x)
        for x in re.findall(r'^sglang:generation_tokens_total\{[^}]*is_streaming="\w+"\} ([\d.]+)$', text, re.M)
    )
    assert ver >= 10 and 1.0 < (gen - 1) / ver <= 4.0
    assert re.search(r"^sglang:spec_num_steps\{[^}]*\} 3\.0$", text, re.M)
    assert re.search(r"^sglang:spec_num_draft_tokens\{[^}]*\} 4\.0$", text, re.M)
    # the rest of what 0.5.23's metrics collector adds
    for name in ("context_len", "kv_cache_memory_usage_gb", "startup_time_seconds"):
        assert re.search(rf"^sglang:{name}\{{[^}}]*\}} [\d.]+$", text, re.M), name
    assert re.search(r"^sglang:request_time_per_output_token_seconds_count\{[^}]*\} [1-9]", text, re.M)
    # and its readiness probe, which 0.5.9 and 0.5.12 do not have
    assert srv23.get("/ready", headers=AUTH)[0] == 200


@pytest.mark.parametrize("version", ["0.5.10", "0.5.23"])
def test_not_enough_memory_wording_from_0510(emulator, version):
    """0.5.10's pool check (model_runner_kv_cache_mixin.py; pool_configurator.py in 0.5.11-0.5.12)
    names the fraction itself, as 0.5.23 does, not 0.5.9's `self.server_args.mem_fraction_static=`."""
    e = emulator("--emulator-sglang-version", version, "--emulator-fault", "kv-oom", "--emulator-startup-s", "0.2")
    e.wait_exit(START_FAILURE_EXIT_S)
    assert (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "mem_fraction_static=0.8"
    ) in e.log()


def test_0511_prelaunch_warnings_are_plain_lines(emulator):
    e = emulator(
        *spec_flags(2), "--disable-radix-cache", "--emulator-sglang-version", "0.5.11", "--emulator-startup-s", "0.2"
    )
    e.wait_ready()
    log = e.log()
    assert re.search(r"^\[[\d\- :]+\] Spec v2 is enabled by default for eagle/eagle3/standalone", log, re.M)
    assert "WARNING server_args.py" not in log


@pytest.mark.parametrize(
    ("version", "present", "absent"),
    [
        (
            "0.5.11",
            {"spec_accepted_drafts", "spec_proposed_drafts", "spec_accept_histogram"},
            {"spec_accept_token_num"},
        ),
        (
            "0.5.12",
            {
                "spec_num_correct_drafts",
                "spec_num_proposed_drafts",
                "spec_correct_drafts_histogram",
                "spec_accepted_drafts",
                "spec_proposed_drafts",
                "spec_accept_histogram",
            },
            {"spec_accept_token_num", "spec_draft_token_num"},
        ),
    ],
)
def test_meta_info_speculative_names_per_release(emulator, version, present, absent):
    """The speculative counts' names of /generate's meta_info as each release's
    tokenizer_manager.py writes them: 0.5.11 renamed 0.5.9's, 0.5.12 renamed them again and kept
    0.5.11's as aliases (the emulator sent 0.5.9's names for both)."""
    e = emulator(
        "--emulator-sglang-version", version, *spec_flags(3), "--disable-radix-cache", "--emulator-startup-s", "0.1"
    ).wait_ready()
    status, out = e.post_json(
        "/generate", {"text": "count these words " * 8, "sampling_params": {"max_new_tokens": 24, "ignore_eos": True}}
    )
    assert status == 200
    meta = set(out["meta_info"])
    assert present <= meta and not (absent & meta), sorted(meta)
