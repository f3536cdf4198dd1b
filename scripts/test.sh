#!/usr/bin/env bash
# The project's whole test run (`make test`, called by .ci/run):
#   lint  -> yamllint, ansible-lint (production profile), ansible-doc renders the module
#   unit  -> pytest without the tests that need containers
#   systemd -> pytest -m systemd: molecule scenarios, the module under real systemd, the tuner end to end
# Every container and network namespace the tests make is labelled io.sglang-tune=1 / named sgt-*;
# the trap removes them whatever happens, so CI leaves the machine as it found it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONUNBUFFERED=1
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1

cleanup() {
  local rc=$?
  # Emulator processes the tests started on this machine (not in containers) run this checkout's
  # venv python; a test killed half-way may leave one behind.
  pkill -TERM -f "^$PWD/.venv/bin/python[0-9.]* -m tuner.emulator" 2>/dev/null || true
  ./scripts/cleanup_hosts.sh || true
  exit $rc
}
trap cleanup EXIT INT TERM

what=${1:-all}
stage() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

run_lint() {
  stage "lint"
  yamllint -s .
  ansible-lint --offline -q
  ansible-doc -M library sglang_ready >/dev/null
  python -m compileall -q tuner plugins library scripts bench tests >/dev/null
}

run_unit() {
  stage "unit tests"
  python -m pytest -q -m "not systemd" -p no:cacheprovider
}

run_systemd() {
  stage "tests with real systemd (containers)"
  python -m pytest -q -m systemd -p no:cacheprovider
}

case "$what" in
  lint) run_lint ;;
  unit) run_unit ;;
  systemd) run_systemd ;;
  all) run_lint; run_unit; run_systemd ;;
  *) echo "usage: $0 [lint|unit|systemd|all]" >&2; exit 2 ;;
esac
