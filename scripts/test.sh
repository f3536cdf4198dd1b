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
# when another failed (one run shows every problem); the exit status is 1 if any failed. The whole
# run (no argument, `all`) runs lint beside the unit stage, then the systemd stage alone;
# SGLANG_TUNE_SIDE_BY_SIDE=1 runs all three side by side (run_side_by_side, below).
# Everything a test run makes (containers, network namespaces, veths, emulator processes) carries
# its run id SGLANG_TUNE_RUN (tests/conftest.py); the trap removes that run's and nothing else,
# so the user's own emulator hosts (`make demo`) survive.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONUNBUFFERED=1
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1
# Bytecode caches are written for this run, whatever the caller's PYTHONDONTWRITEBYTECODE says
# (__pycache__ is ignored by git; lint's compileall writes it anyway): with it set, every pytest
# process rewrote the asserts of all 130 test modules again, about 2.3 CPU-seconds each (4.0 ->
# 1.7 for one collection, 2026-12-06), some 20 such processes a run. warm_bytecode, below, writes
# them once before the workers start, which would otherwise all rewrite at once.
unset PYTHONDONTWRITEBYTECODE
export SGLANG_TUNE_RUN=${SGLANG_TUNE_RUN:-test-$(date +%Y%m%d%H%M%S)-$$}
REPORTS="$PWD/.cache/test-reports/$SGLANG_TUNE_RUN"
mkdir -p "$REPORTS"
# Hosts a test makes labelled as the user's own (run "user", as `make demo` makes them: the clean-up
# scope test) carry no run id: the test lists each here before making it, and the trap removes what
# is listed (a test killed before its own clean-up left them for good).
export SGLANG_TUNE_USER_HOSTS=${SGLANG_TUNE_USER_HOSTS:-$REPORTS/hosts-made-as-user}
# A pytest stage that runs longer than this is stopped and fails (a hung play or container would
# otherwise hold the run, and its clean-up, until CI's own limit): about twice the slowest seen.
STAGE_TIMEOUT=${SGLANG_TUNE_STAGE_TIMEOUT:-1800}

children=()  # the sessions of the stages running (timed's, run_side_by_side's): the trap stops them
cleanup() {  # cleanup [STATUS]: STATUS for an interrupt (the status of the last command may be 0)
  local rc=${1:-$?} sid
  trap - EXIT INT TERM  # once: the `exit` below would call it again
  # an interrupted run: stop every running stage's session (each was started with setsid; by session,
  # not process group: `timeout` puts a pytest stage in a group of its own inside it) before removing
  # the run's hosts
  for sid in "${children[@]}"; do pkill -TERM -s "$sid" 2>/dev/null || true; done
  [ ${#children[@]} -eq 0 ] || sleep 3
  for sid in "${children[@]}"; do pkill -KILL -s "$sid" 2>/dev/null || true; done
  # a stage run by run_side_by_side leaves the run's hosts to the run that started it; a clean-up
  # that left something behind fails the run (it said what, above)
  if [ "${SGLANG_TUNE_STAGE_CHILD:-0}" != 1 ] &&
    ! ./scripts/cleanup_hosts.sh --run "$SGLANG_TUNE_RUN" --also "$SGLANG_TUNE_USER_HOSTS"; then
    echo "test.sh: the clean-up could not remove everything the run made" >&2
    [ "$rc" != 0 ] || rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'cleanup 130' INT
trap 'cleanup 143' TERM

what=${1:-all}
failed=()
stage() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }
timed() {  # timed NAME COMMAND...: run one check, print its time, remember a failure
  local name=$1 t0=$SECONDS rc=0 pid c keep=()
  shift
  if [ "${SGLANG_TUNE_STAGE_CHILD:-0}" = 1 ]; then
    "$@" || rc=$?  # run_side_by_side stops this stage's whole session
  else
    # In a session of its own, waited for: bash runs a trap only once a foreground command has
    # ended, so a SIGTERM during the systemd stage waited its ten minutes (and a SIGKILL after it
    # left every host behind); `wait` is interrupted at once, and the trap stops the session.
    setsid "$@" &
    pid=$!
    children+=("$pid")
    wait "$pid" || rc=$?
    for c in "${children[@]}"; do [ "$c" = "$pid" ] || keep+=("$c"); done
    children=("${keep[@]}")
  fi
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

warm_bytecode() {  # one collection of every test: the workers that follow read its rewritten modules
  python -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 || true
}

pytest_stage() {  # pytest_stage NAME PYTEST-ARGS...: pytest, then its report against the allowed skips
  local name=$1 report="$REPORTS/$1.xml"
  shift
  rm -f "$report"
  timed "$name" timeout -k 60 "$STAGE_TIMEOUT" \
    python -m pytest -q -p no:cacheprovider -rs --durations=25 --junitxml="$report" "$@"
  timed "$name-skips" python scripts/check_skips.py --stage "$name" "$report"
}

# Workers (pytest-xdist): most tests wait on emulator processes, HTTP and ansible-runner rather
# than compute, so even 2 cores run several at once. The systemd stage keeps each test file on one
# worker (--dist loadfile): a file's tests share the host its fixture made, and every file has its
# own host names and index range; the longest files start first, by their `cost` marks, and a
# worker gets its next file only when it is down to its last test (tests/helpers/xdist_order.py:
# xdist's own loadfile hands out files by their number of tests and queues more behind a long
# one; the systemd stage took 565-678 s with this order against 633-641 s with xdist's, its wall
# time 1.06-1.08 times its tests' summed durations over 4 workers against 1.29-1.33, 2026-12-03).
# SGLANG_TUNE_WORKERS=0 runs everything in one process.
# Measured on this 2-core VM, quiet, 2026-12-02: unit 361 s on 3 workers, 299 s on 4; systemd over
# the podman connection 844 s on 2, 673 s on 3; over SSH (inventory/emulator.yml) 643 s on 3, 589 s
# on 4 (935 CPU-seconds of 1,178, 361 of them in the containers: bound by the CPU's work now).
# 2026-12-03, with process accounting (acct's `sa`): alone, the unit stage used 410 CPU-seconds in
# 343 s (about one core) and the systemd stage 911 in 641 s (Ansible 600 of them: 119 playbook
# runs, 3,655 task forks, 874 module runs in the containers): bound by the CPU's work.
# 2026-12-03, the whole machine's busy time (/proc/stat) over each stage of one `make test`: lint
# 57 CPU-seconds in 54 s, unit 612 in 425 s (1.4 cores), systemd 1,547 in 794 s (1.95 of the 2
# cores): about 2,200 CPU-seconds, so no order of the stages can take this machine under about
# 18.5 minutes; of the systemd stage's, the two molecule scenarios (over podman's connection, four
# times SSH's CPU per task: bench/connection_cost.md) took 95 and 167 alone. Since, `rollback` makes
# an emulator host and reaches it over SSH (roles/sglang_server/molecule/rollback/molecule.yml):
# 88 CPU-seconds alone; `default` keeps podman's connection, so both connections stay tested.
# 2026-12-04, the unit stage alone: 4 workers kept 1.1 cores busy (351 CPU-seconds in 320 s), its
# long sweeps, last in collection order, running on after the rest; 8 workers 275 s; 8 workers with
# the longest tests first, one per worker (tests/helpers/xdist_order.py `LongestFirstLoad`), 240 s
# (397 CPU-seconds), and 217-221 s in a whole `make test` of 11.5-11.7 minutes (13.4 with 4 workers).
UNIT_WORKERS=${SGLANG_TUNE_WORKERS:-8}
SYSTEMD_WORKERS=${SGLANG_TUNE_WORKERS:-4}

run_unit() {
  stage "unit tests"
  pytest_stage unit -m "not systemd" -n "$UNIT_WORKERS"
}

run_systemd() {
  stage "tests with real systemd (containers)"
  pytest_stage systemd -m systemd -n "$SYSTEMD_WORKERS" --dist loadfile
}

# `all` runs lint beside the unit stage: the unit stage alone leaves part of the two cores idle
# (about 1.6 of 2 busy: its real-time sweeps wait on levels) and lint is about 30 CPU-seconds of
# work that waits on nothing. The systemd stage, which keeps both cores busy, runs alone after.
# With SGLANG_TUNE_SIDE_BY_SIDE=1, `all` runs the three stages side by side: alone, the unit stage
# keeps about one core busy (it waits on emulator processes and HTTP) and the systemd stage waits
# on containers starting and servers gating. Each stage is this script run again for that stage,
# in a process group of its own (so an interrupted run stops all of it), writing its own log,
# printed whole when the stage ends (never interleaved); a line a minute says which are still
# running. Only this process removes the run's hosts, once every stage has ended.
# Not the default: on 2026-12-04 side by side took 13.1 minutes (1,545 CPU-seconds against about
# 1,200 one after the other: the stages' real-time waits stretch under the load) and one real-time
# test lost a race (fixed since). Before, on this project's 2-core VM (2026-12-03, five runs, with
# a unit-test order since taken back) side by side took 14.3-17.0 minutes against 16.1-17.3 one
# after the other: the suite is about 1,600 CPU-seconds of work, so two cores gain little, while
# the real-time tests run twice as long under the load (two tests failed so, both fixed since).
# With more cores the stages do not compete and it pays.
run_side_by_side() {  # run_side_by_side STAGE...: those stages at once, each log printed whole when it ends
  local t0=$SECONDS name pid note=60 rc stages=("$@")
  local -A pids=()
  stage "${stages[*]} side by side (logs: $REPORTS/<stage>.log)"
  for name in "${stages[@]}"; do
    SGLANG_TUNE_STAGE_CHILD=1 setsid ./scripts/test.sh "$name" > "$REPORTS/$name.log" 2>&1 &
    pids[$name]=$!
  done
  children=("${pids[@]}")
  while [ ${#pids[@]} -gt 0 ]; do
    for name in "${stages[@]}"; do
      pid=${pids[$name]:-}
      if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
        rc=0
        wait "$pid" || rc=$?
        unset "pids[$name]"
        cat "$REPORTS/$name.log"
        printf -- '-- stage %s: %s after %d s\n' "$name" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")" $((SECONDS - t0))
        [ "$rc" = 0 ] || failed+=("$name")
      fi
    done
    if [ ${#pids[@]} -gt 0 ]; then
      sleep 2
      if [ $((SECONDS - t0)) -ge "$note" ]; then
        printf -- '-- %d s: still running: %s\n' $((SECONDS - t0)) "${!pids[*]}"
        note=$((note + 60))
      fi
    fi
  done
  children=()
}

[ "${SGLANG_TUNE_STAGE_CHILD:-0}" = 1 ] || [ "$what" = lint ] || warm_bytecode
case "$what" in
  lint) run_lint ;;
  unit) run_unit ;;
  systemd) run_systemd ;;
  all)
    if [ "${SGLANG_TUNE_SIDE_BY_SIDE:-0}" = 1 ]; then
      run_side_by_side lint unit systemd
    else
      run_side_by_side lint unit
      run_systemd
    fi
    ;;
  *) echo "usage: $0 [lint|unit|systemd|all]" >&2; exit 2 ;;
esac
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: $what passed"
