#!/usr/bin/env bash
# The cuda_env role's GPU facts and checks, run for real on a GPU machine that has no Ansible and no
# systemd (the lent H200): nvidia-smi's output, the role's parser on it (plugins/filter/gpu_facts.py),
# the tensor-parallel fit check, a cross-check of the parsed facts against what PyTorch sees, and the
# NCCL all-reduce check (roles/cuda_env/files/nccl_allreduce_check.py) over every visible GPU: on one
# GPU that is the degenerate world_size=1 case, still a real NCCL communicator.
#
# Usage, from the repo root:   OUT=/some/dir scripts/device_gpu_check.sh
# Needs: nvidia-smi, a python3 with torch (PYTHON=... to choose another); pytest for the unit tests part.
# Writes 7 files to $OUT (default ./device-out): summary.txt (start here), nvidia-smi-query.txt,
# nvidia-smi.txt, gpu-facts.json, nccl-check.json, nccl-check-extra.jsonl, tests.txt. Finishes in well
# under 3 minutes and exits 0 only when every step gave the outcome it expects.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-$ROOT/device-out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILED=0
# NVLink multicast stays off on shared machines (the lent machines' README); the NCCL check also
# defaults these, this covers everything else the script starts.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1} \
  NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1} PYTHONUNBUFFERED=1
# CUDA numbers GPUs as nvidia-smi does (PCI bus order), as the role's environment file sets it.
export CUDA_DEVICE_ORDER=${CUDA_DEVICE_ORDER:-PCI_BUS_ID}

log() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
step() { # step NAME EXPECTED_RC RC
  if [ "$3" = "$2" ]; then log "[ok]   $1 (rc $3)"; else log "[FAIL] $1 (rc $3, expected $2)"; FAILED=1; fi
}

log "== device_gpu_check $(date -u +%FT%TZ) on $(hostname)"
log "kernel: $(uname -srm)"
log "python: $(command -v "$PY") $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1)"
log "torch:  $("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "devices", torch.cuda.device_count())' 2>&1 | tail -1)"
log "env:    $(env | grep -E '^(NCCL|CUDA|TORCH_SYMM|NVSHMEM)_' | sort | tr '\n' ' ')"

# --- 1. nvidia-smi: the exact query the role runs, the banner (driver's CUDA), topology, -q -------------
QUERY=("--query-gpu=index,name,memory.total,driver_version,compute_cap,pci.bus_id,uuid" "--format=csv,noheader,nounits")
timeout 30 nvidia-smi "${QUERY[@]}" >"$OUT/nvidia-smi-query.txt" 2>&1
step "nvidia-smi ${QUERY[*]}" 0 $?
{
  for args in "" "topo -m" "-L" "-q"; do
    echo "===== nvidia-smi $args"
    # shellcheck disable=SC2086
    timeout 30 nvidia-smi $args 2>&1
    echo "===== rc $?"
  done
} >"$OUT/nvidia-smi.txt"
log "nvidia-smi outputs: nvidia-smi-query.txt, nvidia-smi.txt"

# --- 2. the role's parser and checks on that output, cross-checked against PyTorch ---------------------
timeout 60 "$PY" - "$OUT" >>"$SUMMARY" 2>&1 <<'PYEOF'
import json, re, sys
from pathlib import Path
sys.path.insert(0, "plugins/filter")
import gpu_facts as gf

out = Path(sys.argv[1])
text = (out / "nvidia-smi.txt").read_text()
def section(name):
    m = re.search(r"===== nvidia-smi " + re.escape(name) + r"\n(.*?)===== rc (\d+)", text, re.S)
    return (m.group(1), int(m.group(2))) if m else ("", -1)

gpus = gf.parse_query_gpu((out / "nvidia-smi-query.txt").read_text())
banner, _ = section("")
topo_text, topo_rc = section("topo -m")
driver_cuda = gf.parse_driver_cuda_version(banner)
q_cuda = gf.parse_driver_cuda_version(section("-q")[0])
topology = gf.parse_topology(topo_text) if topo_rc == 0 else {"error": topo_text.strip()[:500]}
n = len(gpus)
checks = {}
for tp in sorted({1, 2, 4, 8, n, n + 1}):
    checks[f"tp{tp}_cuda12.8"] = gf.gpu_problems(gpus, tp, "8.0", "12.8", driver_cuda, "nvidia-smi", n)
checks["tp1_cuda13.9_driver"] = gf.gpu_problems(gpus, 1, "8.0", "13.9", driver_cuda, "nvidia-smi", n)
checks["tp1_min_cc_12.0"] = gf.gpu_problems(gpus, 1, "12.0", "12.8", driver_cuda, "nvidia-smi", n)
visible_first = gf.select_visible_gpus(gpus, "0")
torch_view = []
try:
    import torch
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        d = {"index": i, "name": p.name, "memory_mib": p.total_memory // (1 << 20), "compute_capability": f"{p.major}.{p.minor}"}
        if all(hasattr(p, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
            d["pci_bus_id"] = f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
        torch_view.append(d)
except Exception as exc:  # recorded, judged below
    torch_view = [{"error": f"{type(exc).__name__}: {exc}"}]
agree = [
    {"index": g["index"], "name": g["name"] == t.get("name"), "compute_capability": g["compute_capability"] == t.get("compute_capability"),
     "pci_bus_id": (g["pci_bus_id"] == t.get("pci_bus_id")) if "pci_bus_id" in t else None}
    for g, t in zip(gpus, torch_view)
]
facts = {"gpus": gpus, "gpu_count": n, "driver_cuda_version": driver_cuda, "driver_cuda_version_from_q": q_cuda,
         "topology": topology, "checks": checks, "visible_0": visible_first, "torch_view": torch_view,
         "parser_vs_torch": agree,
         "environment_file": gf.merge_environment({"CUDA_HOME": "/usr/local/cuda-12.8"},
                                                  {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ""},
                                                  {"NCCL_P2P_LEVEL": "", "NCCL_IB_DISABLE": ""})}
(out / "gpu-facts.json").write_text(json.dumps(facts, indent=2) + "\n")
print(f"parsed {n} GPU(s): {gf.describe_gpus(gpus)}; driver CUDA {driver_cuda} (-q: {q_cuda}); topology {topology.get('link_types', topology)}")
for k, v in checks.items():
    print(f"  check {k}: {'fits' if not v else v}")
print(f"  parser vs torch: {agree}")
ok = (n >= 1 and driver_cuda is not None and driver_cuda == q_cuda and checks["tp1_cuda12.8"] == []
      and checks[f"tp{n + 1}_cuda12.8"] and len(torch_view) == n
      and all(a["name"] and a["compute_capability"] and a["pci_bus_id"] in (True, None) for a in agree))
print("gpu facts:", "as expected" if ok else "UNEXPECTED")
sys.exit(0 if ok else 1)
PYEOF
step "role parser + TP/CC/driver checks + torch cross-check -> gpu-facts.json" 0 $?

# --- 3. the NCCL all-reduce check over every visible GPU (one GPU: the degenerate case) ----------------
CHECK=roles/cuda_env/files/nccl_allreduce_check.py
timeout 150 "$PY" "$CHECK" --sizes 1M,32M,256M --iters 20 --timeout 120 --json-out "$OUT/nccl-check.json" \
  >/dev/null 2>>"$SUMMARY"
step "NCCL all-reduce check, all visible GPUs -> nccl-check.json" 0 $?

# The same script's other paths with real torch: asking for more GPUs than there are (a clear failure,
# exit 1), and the real worker over 2 CPU processes with gloo (the sum check across ranks).
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
  timeout 60 "$PY" "$CHECK" --world-size $((NGPU + 1)) --sizes 1M 2>>"$SUMMARY"; echo "rc=$?"
  timeout 90 "$PY" "$CHECK" --backend gloo --world-size 2 --sizes 4K,1M --iters 5 --timeout 80 2>>"$SUMMARY"; echo "rc=$?"
} >"$OUT/nccl-check-extra.jsonl"
mapfile -t RCS < <(grep -o '^rc=[0-9]*' "$OUT/nccl-check-extra.jsonl" | cut -d= -f2)
mapfile -t REASONS < <(grep -o '"reason": [^,]*' "$OUT/nccl-check-extra.jsonl")
log "extra runs: ${REASONS[*]}"
step "NCCL check asked for $((NGPU + 1)) GPUs fails clearly" 1 "${RCS[0]:-none}"
step "  ... and says why" '"reason": "too-few-gpus"' "${REASONS[0]:-none}"
step "gloo, 2 CPU ranks, real worker (sum check across ranks)" 0 "${RCS[1]:-none}"

# --- 4. the role's CPU-side unit tests, here with torch present --------------------------------------
timeout 120 "$PY" -m pytest -q -p no:cacheprovider tests/cuda_env/test_cuda_env_gpu_facts.py \
  tests/cuda_env/test_cuda_env_nccl_check.py tests/cuda_env/test_cuda_env_specs.py >"$OUT/tests.txt" 2>&1
step "pytest tests/cuda_env (parser, NCCL check logic incl. gloo worker, specs) -> tests.txt" 0 $?
tail -3 "$OUT/tests.txt" >>"$SUMMARY"

log "== done: $([ $FAILED = 0 ] && echo 'every step as expected' || echo 'SOME STEPS FAILED') ; files in $OUT: $(find "$OUT" -mindepth 1 -maxdepth 1 -printf '%f ')"
exit $FAILED
