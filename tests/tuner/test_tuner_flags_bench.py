"""`--url` (bench and verify) and the level axes: what the client could only get wrong is refused
at the flag, before anything is sent or written."""

from __future__ import annotations

import pytest

from tuner import cli
from tuner.run.levels import first_index
from tuner.spec.flags import BadInput, check_url, parse_concurrency
from tuner.spec.sweepspec import WorkloadSpec


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        # sent as Basic auth, and written in clear to the progress lines, sweep.json, records.jsonl,
        # results.csv and report.md
        ("http://admin:hunter2@127.0.0.1:30000", "credentials"),
        ("http://admin@127.0.0.1:30000", "credentials"),
        # the request paths were appended after the query (/?token=abc/server_info) or lost (#x)
        ("http://127.0.0.1:30000/?token=abc", "query or fragment"),
        ("http://127.0.0.1:30000#x", "query or fragment"),
        # OpenAI-style base URLs: /v1/server_info is a 404 with no hint
        ("http://127.0.0.1:30000/v1", "ends in /v1"),
        ("http://127.0.0.1:30000/v1/", "ends in /v1"),
    ],
)
def test_a_url_the_client_would_misuse_is_refused(url, needle):
    with pytest.raises(BadInput) as e:
        check_url(url)
    assert needle in str(e.value) and "hunter2" not in str(e.value)


def test_a_url_it_can_use_is_kept():
    assert check_url("http://127.0.0.1:30000/") == "http://127.0.0.1:30000"
    assert check_url("https://gpu.example/sglang") == "https://gpu.example/sglang"
    assert check_url("http://[::1]:30000") == "http://[::1]:30000"


def test_bench_refuses_a_url_with_credentials_before_anything(tmp_path, capsys):
    out = tmp_path / "o"
    rc = cli.main(["bench", "--url", "http://admin:hunter2@127.0.0.1:9", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "credentials" in err and "hunter2" not in err
    assert not out.exists()


def test_the_level_axes_stay_within_the_prompt_layout(tmp_path, capsys):
    """first_index lays prompts out 64 repeats by 64 concurrency levels: a 65th gave two levels the
    same prompts (served from the prefix cache, faster)."""
    with pytest.raises(BadInput, match="at most 64"):
        parse_concurrency(",".join(str(c) for c in range(1, 66)))
    assert len(parse_concurrency(",".join(str(c) for c in range(1, 65)))) == 64
    assert cli.main(["bench", "--url", "http://h:1", "--repeats", "65", "--out", str(tmp_path / "o")]) == 2
    assert "--repeats: 65 is above the maximum 64" in capsys.readouterr().err
    w = WorkloadSpec(concurrency=tuple(range(1, 65)), repeats=64, temperature=(0.0, 0.7))
    starts = {first_index(w, t, r, c) for t in w.temperature for r in range(1, 65) for c in w.concurrency}
    assert len(starts) == 2 * 64 * 64
