#!/usr/bin/env bash
# `make bench`: every benchmark script, one after another (never in parallel: they time things on a
# 2-core machine). Each writes its table to bench/<name>.md from the raw data it keeps beside it
# (bench/<name>/ where it keeps more than the table), removing its earlier data first, so nothing stale
# stays; the scripts that can also rebuild their table from the kept data alone take `--render`.
#   emulator_calibration  seed cells, emulator vs the seed's measurements (+ a subset over HTTP)
#   emulator_speed        the emulator keeps its clock at 64 streams; its CPU per token
#   ready_gate            sglang_ready reports ready/failure within 1 s / 3 s (vs `sleep 100`)
#   client_accuracy       the tuner's client vs what the emulator emitted; client CPU per token
#   peer_clients          our client vs GuideLLM and AIPerf against tcpdump (peers skipped when absent)
#   sweep_overhead        per-configuration overhead of a sweep vs a one-task ansible-runner run
#   connection_cost       one Ansible task on an emulator host over SSH, podman's connection, local
#   lost_level            a sweep on a server that crashes after every start: lost levels measured again
#   noise                 repeated sweeps on a noisy profile: how often the named winner changes
#   coverage              independent sweeps with restart noise: interval coverage, reversed verdicts, cost
#   search_cost           --search model vs the grid on eight emulated machines (live and replayed)
#   search_cost_grid_again  the grid swept again, judged as search_cost judges the model (after it)
#   search_unseen         the search replayed on machines drawn at random from seeds (a seed's grid is
#                         swept once and kept: the machine it names never changes)
#   schedule_vs_static    the per-batch-size schedule vs the best static depth on six machines
#   tuner_seed_sweep      the tuner on the seed profile (steps 1-4 and 1-5) vs the seed's own answer
#   drift_rule            the gate's drift rule on simulated gate runs: false alarms and catches
#   verify_cost           what the correctness gate costs a default sweep, per configuration
# `scripts/bench.sh NAME...` runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONUNBUFFERED=1
# Hosts and processes the benchmarks make carry this run id; the trap removes those and nothing else.
export SGLANG_TUNE_RUN=${SGLANG_TUNE_RUN:-bench-$(date +%Y%m%d%H%M%S)-$$}
# shellcheck disable=SC2317  # called by the traps
cleanup() { ./scripts/cleanup_hosts.sh --run "$SGLANG_TUNE_RUN" || true; }
trap cleanup EXIT
# Ctrl-C or a TERM ends the whole run (a trap that only cleaned up let bash go on to the next bench)
trap 'cleanup; trap - EXIT; exit 130' INT
trap 'cleanup; trap - EXIT; exit 143' TERM

declare -A args=(
  [emulator_calibration]="--http"
  [emulator_speed]=""
  [ready_gate]="--starts 10 --failures 10 --systemd 10"
  [client_accuracy]=""
  [peer_clients]=""
  [sweep_overhead]=""
  [connection_cost]=""
  [lost_level]=""
  [noise]=""
  [coverage]=""
  [search_cost]=""
  [search_cost_grid_again]=""
  [search_unseen]="--sweep"
  [schedule_vs_static]=""
  [tuner_seed_sweep]=""
  [drift_rule]=""
  [verify_cost]=""
)
order=(emulator_calibration emulator_speed ready_gate client_accuracy peer_clients sweep_overhead connection_cost lost_level noise
  coverage search_cost search_cost_grid_again search_unseen schedule_vs_static tuner_seed_sweep drift_rule verify_cost)
[ $# -gt 0 ] && order=("$@")
for name in "${order[@]}"; do
  [ -n "${args[$name]+set}" ] || { echo "scripts/bench.sh: no benchmark '$name'; one of: ${!args[*]}" >&2; exit 2; }
done
status=0
for name in "${order[@]}"; do
  printf '\n\033[1m== bench/%s.py %s ==\033[0m\n' "$name" "${args[$name]}"
  # shellcheck disable=SC2086
  python "bench/$name.py" ${args[$name]} || { echo "bench/$name.py FAILED" >&2; status=1; }
done
exit $status
