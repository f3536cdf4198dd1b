#!/usr/bin/env bash
# mypy over the project's Python (the lint stage of scripts/test.sh; settings in pyproject.toml).
#   1. the collection's plugins (modules, module_utils, filters) under the names Ansible imports
#      them by, ansible_collections.sglang_tune.serving.plugins.*, through the link `make setup`
#      makes in .ansible/collections;
#   2. the tuner, which imports the same module_utils as sglang_utils (pyproject.toml's
#      package-dir mapping; mypy cannot see an editable install's mapping, so a directory of links
#      stands in for it);
#   3. the scripts and the file the cuda_env role copies to hosts.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
MYPY="$ROOT/.venv/bin/mypy"
status=0

MYPYPATH="$ROOT/.ansible/collections" "$MYPY" -p ansible_collections.sglang_tune.serving.plugins || status=1

links="$ROOT/.cache/mypy-path"
mkdir -p "$links"
ln -sfn ../../plugins/module_utils "$links/sglang_utils"
rm -f "$links/sglang_filters"
MYPYPATH="$links" "$MYPY" -p tuner || status=1

"$MYPY" scripts/*.py roles/cuda_env/files/nccl_allreduce_check.py || status=1
exit $status
