#!/usr/bin/env bash
# `make demo`: the main job end to end on this machine. Creates the emulator hosts of the default
# inventory (emu1 and emu2: podman containers with systemd, inventory/emulator.yml; the sweep
# spreads its deployments over both, as over two GPU servers), then sweeps spec_steps 1..5 at
# concurrency 1, 4, 16, 32, 64 with the model-guided search (the tuner's default, docs/tuner.md
# "Model-guided search" says why): each configuration it deploys goes through the deploy play
# (ansible-runner), gated by sglang_ready, benchmarked, stored; those the model says cannot win a
# level are skipped with their prediction; then plotted and recommended. Here it skips one of the
# five depths the grid would deploy (about a minute).
# At the end the recommended configuration is deployed on both hosts and verified (--deploy-best).
# Re-running continues an interrupted demo (--resume) instead of starting over, when it is run with
# the same sweep arguments (kept in $OUT/.demo-sweep-args); with others, the earlier output is moved
# aside ($OUT.<time>) and the demo starts afresh: a resume keeps the levels already measured, which
# would then be reported under the new arguments' caps.
# The demo's levels stop sending after 10 s (--max-level-s 10; the tuner's default is 120 s): three
# quarters of a default demo's time was its C=16..64 levels chasing +-2% (2026-12-02: 566 of 755 s),
# so a level here may end wider than that; the report says how wide each one ended. A user's sweep
# keeps the default. DEMO_SWEEP_ARGS replaces these arguments (DEMO_SWEEP_ARGS= make demo: none, the
# tuner's defaults; DEMO_SWEEP_ARGS="--max-level-s 10 --search grid" deploys every depth).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-demo-out}
read -r -a extra <<<"${DEMO_SWEEP_ARGS---max-level-s 10}"
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONUNBUFFERED=1

echo "== $(date +%T) emulator hosts (inventory/emulator.yml) =="
ansible-playbook playbooks/emulator_hosts.yml

echo "== $(date +%T) sweep (python -m tuner sweep --out $OUT ${extra[*]}) =="
resume=()
if [ -f "$OUT/sweep.json" ]; then
  if [ "$(cat "$OUT/.demo-sweep-args" 2>/dev/null || echo '(none kept)')" = "${extra[*]}" ]; then
    resume=(--resume)
  else
    aside="$OUT.$(date +%Y%m%d-%H%M%S)"
    mv "$OUT" "$aside"
    echo "== $OUT held a demo run with other sweep arguments: moved to $aside; starting afresh =="
  fi
fi
mkdir -p "$OUT"
printf '%s\n' "${extra[*]}" >"$OUT/.demo-sweep-args"
python -m tuner sweep --out "$OUT" --deploy-best "${extra[@]}" "${resume[@]}"
echo "== $(date +%T) done =="

cat <<MSG

Done. Open:
  $OUT/throughput_vs_steps.png   throughput (aggregate, per request) and KV capacity against steps
  $OUT/report.md                 the recommendation, every measured cell, how it was measured
  $OUT/recommendation.json       best spec_steps per concurrency level and for the workload
  $OUT/results.csv               one row per configuration x concurrency x repeat
The emulator hosts keep running the recommended configuration (curl http://10.213.1.2:30000/health,
and 10.213.2.2 for emu2). Remove them with: make hosts-absent
MSG
