#!/usr/bin/env bash
# `make bench`: every benchmark script, one after another (never in parallel: they time things on a
# 2-core machine). Each writes its table to bench/<name>.md, which is kept in the repo.
#   emulator_calibration  seed cells, emulator vs the seed's measurements (+ a subset over HTTP)
#   emulator_speed        the emulator keeps its clock at 64 streams; its CPU per token
#   ready_gate            sglang_ready reports ready/failure within 1 s / 3 s (vs `sleep 100`)
#   client_accuracy       the tuner's client vs what the emulator emitted; client CPU per token
#   sweep_overhead        per-configuration overhead of a sweep vs a one-task ansible-runner run
#   tuner_seed_sweep      the tuner on the seed profile (steps 1-4 and 1-5) vs the seed's own answer
# `scripts/bench.sh NAME...` runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONUNBUFFERED=1
# Hosts and processes the benchmarks make carry this run id; the trap removes those and nothing else.
export SGLANG_TUNE_RUN=${SGLANG_TUNE_RUN:-bench-$(date +%Y%m%d%H%M%S)-$$}
trap './scripts/cleanup_hosts.sh --run "$SGLANG_TUNE_RUN" || true' EXIT INT TERM

declare -A args=(
  [emulator_calibration]="--http"
  [emulator_speed]=""
  [ready_gate]="--starts 10 --failures 10 --systemd 10"
  [client_accuracy]=""
  [sweep_overhead]=""
  [tuner_seed_sweep]=""
)
order=(emulator_calibration emulator_speed ready_gate client_accuracy sweep_overhead tuner_seed_sweep)
[ $# -gt 0 ] && order=("$@")
status=0
for name in "${order[@]}"; do
  printf '\n\033[1m== bench/%s.py %s ==\033[0m\n' "$name" "${args[$name]}"
  # shellcheck disable=SC2086
  python "bench/$name.py" ${args[$name]} || { echo "bench/$name.py FAILED" >&2; status=1; }
done
exit $status
