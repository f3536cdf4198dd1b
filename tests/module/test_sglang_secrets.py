"""plugins/module_utils/sglang_secrets.py: the forms a key takes in SGLang's output, and the masks.

The inputs are what SGLang really prints and serves: the `server_args=ServerArgs(...)` repr line
(sglang/srt/entrypoints/engine.py), a 0.5.23 /server_info body whose launch_command is the argv
after `--config` was merged (sglang/srt/server_args.py prepare_server_args), and JSON.
"""

from __future__ import annotations

import json

import pytest
from sglang_utils import sglang_secrets as X
from sglang_utils import sglang_server_info as S

# Printable ASCII with both quotes, a backslash, a dollar and a percent: every escaping rule at once.
NASTY = "k'e\"y\\$%{x}-7f3a"
KEYS = ["sk-plain-1234567890", "it's-a-key", 'say "hi"-key', NASTY, "A" * 4096]


@pytest.mark.parametrize("key", KEYS)
def test_every_python_and_json_spelling_is_masked(key):
    """The repr SGLang logs (either quote), a repr nested in a larger repr, and JSON."""
    texts = [
        f"server_args=ServerArgs(model_path='/m', api_key={key!r}, port=30000)",  # 0.5.9
        "server_args=" + repr({"model_path": "/m", "api_key": key, "port": 30000}),  # 0.5.23
        repr({"api_key": key, "launch": f"--api-key {key}"}),
        repr([f"prefix {key} suffix", "x'y"]),
        json.dumps({"api_key": key}),
        json.dumps({"note": f"key is {key}"}, ensure_ascii=False),
        f"Authorization: Bearer {key}",
        key,
    ]
    for text in texts:
        out = X.redact_text(text, [key])
        for form in X.secret_forms(key):
            assert form not in out, (text, out)
        assert X.MASK in out


def test_unknown_keys_are_masked_by_field_and_flag():
    """Without knowing the key: what a secret field or flag holds, in every syntax SGLang uses."""
    text = (
        "server_args=ServerArgs(api_key='sk-1', admin_api_key=\"adm-2\", ssl_keyfile_password='pw-3', x=1) "
        '{"api_key": "sk-4", "port": 30000} --api-key sk-5 --admin-api-key=adm-6 '
        "['--api-key', 'sk-7'] Authorization: Bearer sk-8"
    )
    out = X.redact_text(text)
    for secret in ("sk-1", "adm-2", "pw-3", "sk-4", "sk-5", "adm-6", "sk-7", "sk-8"):
        assert secret not in out
    assert "x=1" in out and '"port": 30000' in out
    assert (
        X.redact_text("api_key=None, bucket_time_to_first_token='x'") == "api_key=None, bucket_time_to_first_token='x'"
    )


def test_secret_field_names():
    for name in ("api_key", "admin_api_key", "ssl_keyfile_password", "watermark_config", "hf_token", "aws_secret_key"):
        assert X.is_secret_field(name), name
    for name in ("bucket_time_to_first_token", "kt_max_deferred_experts_per_token", "tokenizer_path", "ssl_keyfile"):
        assert not X.is_secret_field(name), name
    assert "--api-key" in X.SECRET_FLAGS and "--admin-api-key" in X.SECRET_FLAGS


def test_redact_argv_and_command_line():
    argv = ["--model-path", "/m", "--api-key", "k1", "--admin-api-key=k2", "--port", "1"]
    assert X.redact_argv(argv) == [
        "--model-path",
        "/m",
        "--api-key",
        X.MASK,
        f"--admin-api-key={X.MASK}",
        "--port",
        "1",
    ]
    assert X.redact_command_line("a --api-key k1 b") == f"a --api-key {X.MASK} b"


# 0.5.23: prepare_server_args merges `--config` into argv before it keeps launch_command, so a key
# delivered in the file is in /server_info as `--api-key KEY` (and always in the api_key field).
KEY = "sk-from-config-file-99"
BODY_0523 = {
    "version": "0.5.23",
    "api_key": KEY,
    "admin_api_key": None,
    "served_model_name": "qwen",
    "launch_command": f"--api-key {KEY} --model-path /m --config /run/credentials/x/server-secrets.yaml",
    "watermark": {"key": None},
    "internal_states": [{"effective_max_running_requests_per_dp": 3, "api_key": KEY}],
    "speculative_algorithm": None,
}


def test_server_info_parser_never_returns_a_key():
    out = S.parse_server_info(BODY_0523)
    assert KEY not in json.dumps(out)
    assert out["launch_command"][:2] == ["--api-key", X.MASK]
    whole = S.redact_server_info(BODY_0523)
    assert KEY not in json.dumps(whole)
    assert whole["api_key"] == X.MASK and whole["admin_api_key"] is None
    assert whole["served_model_name"] == "qwen"
    assert BODY_0523["api_key"] == KEY  # the input is not modified


def test_parse_secret_config_reads_what_the_template_writes():
    text = '# managed\napi-key: "it\'s \\"q\\" \\\\ $x"\nadmin-api-key: "a"\n'
    assert X.parse_secret_config(text) == {"api-key": 'it\'s "q" \\ $x', "admin-api-key": "a"}
    for bad in ("api-key: plain\n", "api-key: 'single'\n", "api-key: 12\n", 'API: "x"\n', 'api-key: "open\n'):
        with pytest.raises(ValueError) as err:
            X.parse_secret_config(bad)
        assert "line 1" in str(err.value) and "plain" not in str(err.value)


def test_yaml_reads_the_same_value_as_the_launcher():
    """SGLang reads the file with yaml.safe_load (ConfigArgumentMerger._parse_yaml_config)."""
    yaml = pytest.importorskip("yaml")
    for key in KEYS:
        text = f"api-key: {json.dumps(key)}\n"
        assert yaml.safe_load(text) == {"api-key": key} == X.parse_secret_config(text)


def test_masking_leaves_log_parsing_intact():
    """The mask keeps a repr line a valid repr (sglang_log parses server_args= with ast)."""
    from sglang_utils import sglang_log as L

    line = "[2026-01-01 00:00:00] server_args=ServerArgs(api_key='sk-xyz-123', port=30000, tp_size=4)"
    masked = X.redact_text(line, ["sk-xyz-123"])
    args = L.parse_server_args([masked])
    assert args is not None and args["api_key"] == X.MASK and args["tp_size"] == 4
