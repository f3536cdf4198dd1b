#!/usr/bin/env bash
# The project's whole test run (`make test`, called by .ci/run):
#   lint    -> yamllint, ansible-lint (production profile), ansible-doc renders the module by FQCN,
#              ruff (lint and format check), mypy (scripts/typecheck.sh), shellcheck on every
#              script, inline task script and shell template (scripts/shellcheck_all.py),
#              ansible-test sanity on the built collection (scripts/sanity.sh)
#   unit    -> pytest without the tests that need containers
#   systemd -> pytest -m systemd: molecule scenarios, the module under real systemd, the collection
#              installed from its tarball, the tuner end to end
# A stage passes only when it ran tests and skipped none that CI must run: scripts/check_skips.py
# reads each pytest stage's junit report against tests/allowed_skips.yml. Every stage runs even
# when an earlier one failed (one run shows every problem); the exit status is 1 if any failed.
# Everything a test run makes (containers, network namespaces, veths, emulator processes) carries
# its run id SGLANG_TUNE_RUN (tests/conftest.py); the trap removes that run's and nothing else,
# so the user's own emulator hosts (`make demo`) survive.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONUNBUFFERED=1
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1
export SGLANG_TUNE_RUN=${SGLANG_TUNE_RUN:-test-$(date +%Y%m%d%H%M%S)-$$}
REPORTS="$PWD/.cache/test-reports/$SGLANG_TUNE_RUN"
mkdir -p "$REPORTS"

cleanup() {
  local rc=$?
  ./scripts/cleanup_hosts.sh --run "$SGLANG_TUNE_RUN" || true
  exit "$rc"
}
trap cleanup EXIT INT TERM

what=${1:-all}
failed=()
stage() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }
timed() {  # timed NAME COMMAND...: run one check, print its time, remember a failure
  local name=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  printf -- '-- %s: %s (%d s)\n' "$name" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")" $((SECONDS - t0))
  [ "$rc" = 0 ] || failed+=("$name")
}

run_lint() {
  stage "lint"
  timed yamllint yamllint -s .
  timed ansible-lint ansible-lint --offline -q
  timed ansible-doc bash -c 'ansible-doc sglang_tune.serving.sglang_ready >/dev/null'
  timed ruff-check ruff check .
  timed ruff-format ruff format --check .
  timed mypy ./scripts/typecheck.sh
  timed shellcheck python scripts/shellcheck_all.py
  timed compileall python -m compileall -q tuner plugins scripts bench tests roles
  timed ansible-test-sanity ./scripts/sanity.sh
}

pytest_stage() {  # pytest_stage NAME PYTEST-ARGS...: pytest, then its report against the allowed skips
  local name=$1 report="$REPORTS/$1.xml"
  shift
  rm -f "$report"
  timed "$name" python -m pytest -q -p no:cacheprovider -rs --durations=25 --junitxml="$report" "$@"
  timed "$name-skips" python scripts/check_skips.py --stage "$name" "$report"
}

# Workers (pytest-xdist): most tests wait on emulator processes, HTTP and ansible-runner rather
# than compute, so even 2 cores run several at once. The systemd stage keeps each test file on one
# worker (--dist loadfile): a file's tests share the host its fixture made, and every file has its
# own host names and index range; the longest files start first (tests/conftest.py).
# SGLANG_TUNE_WORKERS=0 runs everything in one process.
# Measured on this 2-core VM, quiet, 2026-12-02: unit 361 s on 3 workers, 299 s on 4; systemd over
# the podman connection 844 s on 2, 673 s on 3; over SSH (inventory/emulator.yml) 643 s on 3, 589 s
# on 4 (935 CPU-seconds of 1,178, 361 of them in the containers: bound by the CPU's work now).
UNIT_WORKERS=${SGLANG_TUNE_WORKERS:-4}
SYSTEMD_WORKERS=${SGLANG_TUNE_WORKERS:-4}

run_unit() {
  stage "unit tests"
  pytest_stage unit -m "not systemd" -n "$UNIT_WORKERS"
}

run_systemd() {
  stage "tests with real systemd (containers)"
  pytest_stage systemd -m systemd -n "$SYSTEMD_WORKERS" --dist loadfile
}

case "$what" in
  lint) run_lint ;;
  unit) run_unit ;;
  systemd) run_systemd ;;
  all) run_lint; run_unit; run_systemd ;;
  *) echo "usage: $0 [lint|unit|systemd|all]" >&2; exit 2 ;;
esac
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: $what passed"
