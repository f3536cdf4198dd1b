"""scripts/check_skips.py on junit reports that pytest itself writes (a throwaway test tree in tmp)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import check_skips  # noqa: E402

TESTS = """
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="no torch here")
def test_needs_torch():
    pass

class TestGroup:
    @pytest.mark.parametrize("n", [1, 2])
    def test_param(self, n):
        if n == 2:
            pytest.skip("two is not for today")
"""


def junit(tmp_path: Path, *args: str) -> Path:
    """Run pytest on the throwaway tree as scripts/test.sh runs a stage; return its junit report."""
    tree = tmp_path / "tests" / "demo"
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "test_mod.py").write_text(TESTS)
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "tests", *args],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    return report


def allowed(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "allowed.yml"
    path.write_text(text)
    return path


def test_unlisted_skips_fail_the_stage_and_are_named(tmp_path, capsys) -> None:
    report = junit(tmp_path)
    rc = check_skips.main([str(report), "--stage", "unit", "--allowed", str(allowed(tmp_path, "[]\n"))])
    err = capsys.readouterr().err
    assert rc == 1
    assert "tests.demo.test_mod.test_needs_torch was skipped (no torch here)" in err
    assert "tests.demo.test_mod.TestGroup.test_param[2]" in err
    assert "test_param[1]" not in err


def test_listed_skips_pass_only_in_their_stage(tmp_path, capsys) -> None:
    report = junit(tmp_path)
    listed = allowed(
        tmp_path,
        "- {test: 'tests/demo/test_mod.py::test_needs_torch', stages: [unit], reason: no torch}\n"  # refs: ignore
        "- {test: 'tests/demo/test_mod.py::TestGroup::test_param[[]2]', stages: [unit], reason: two}\n",  # refs: ignore
    )
    assert check_skips.main([str(report), "--stage", "unit", "--allowed", str(listed)]) == 0
    assert "4 tests, 2 allowed skips" in capsys.readouterr().out
    assert check_skips.main([str(report), "--stage", "systemd", "--allowed", str(listed)]) == 1


def test_a_stage_that_ran_nothing_fails(tmp_path, capsys) -> None:
    report = junit(tmp_path, "-m", "no_such_marker")
    rc = check_skips.main([str(report), "--stage", "systemd", "--allowed", str(allowed(tmp_path, "[]\n"))])
    assert rc == 1 and "stage systemd: no test ran" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    ["- {test: x, stages: [unit]}\n", "- {test: x, stages: unit, reason: r}\n", "{test: x}\n"],
)
def test_an_allowed_entry_without_stages_or_reason_is_refused(tmp_path, text, capsys) -> None:
    report = junit(tmp_path)
    assert check_skips.main([str(report), "--stage", "unit", "--allowed", str(allowed(tmp_path, text))]) == 2
    assert "check_skips:" in capsys.readouterr().err


def test_a_missing_report_is_an_error_not_a_pass(tmp_path) -> None:
    assert check_skips.main([str(tmp_path / "none.xml"), "--stage", "unit"]) == 2


def test_nodeid_spelling() -> None:
    assert nodeid("tests/a/test_b.py::C::test_d[x-1]") == "tests.a.test_b.C.test_d[x-1]"  # refs: ignore


def nodeid(s: str) -> str:
    return check_skips.nodeid_to_junit(s)


def test_the_projects_list_is_valid_and_every_entry_names_a_real_test() -> None:
    import yaml

    entries = check_skips.parse_allowed(yaml.safe_load(check_skips.DEFAULT_ALLOWED.read_text()))
    assert entries
    for e in entries:
        path, _, name = e.test.partition("::")
        assert (ROOT / path).is_file(), e.test
        assert f"def {name.split('::')[-1].split('[')[0]}(" in (ROOT / path).read_text(), e.test
        assert set(e.stages) <= {"unit", "systemd"} and len(e.reason) > 40
