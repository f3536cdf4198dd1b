#!/usr/bin/env bash
# `ansible-test sanity` on the built collection, offline (part of the lint stage of scripts/test.sh):
#   1. ansible-galaxy collection build  -> build/collection/sglang_tune-serving-<version>.tar.gz
#   2. install it with ansible-galaxy (offline, into a fresh path):
#        build/ansible-test/ansible_collections/sglang_tune/serving
#      ansible-test needs the collection at .../ansible_collections/<namespace>/<name>. It lists the
#      files to check with git when it finds a .git above the collection, and the repo's .gitignore
#      hides build/: an empty `git init` there makes it list the installed tree itself.
#   3. ansible-test sanity --local: each test that needs Python packages gets its own virtual
#      environment, into which ansible-test bootstraps pip with a script it downloads from a host
#      that only the package registries' machines cannot reach. Its documented hook is a script
#      already in ~/.ansible/test/cache/get_pip_<version>.py: scripts/ansible_test_get_pip.py stands
#      in (ensurepip, then the pins from PyPI). HOME points into .cache/ so that those environments
#      (~100 MB, built once: the cold run) stay with the checkout and the user's home is not touched.
# Options are passed to ansible-test (e.g. --test pylint).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VENV_BIN="$ROOT/.venv/bin"
BUILD="$ROOT/build/collection"
TREE="$ROOT/build/ansible-test"
DEST="$TREE/ansible_collections/sglang_tune/serving"
export HOME="$ROOT/.cache/ansible-test/home"
export ANSIBLE_COLLECTIONS_PATH="$TREE"   # not the repo's link: install into the fresh path

version=$(sed -n 's/^version: *//p' galaxy.yml)
tarball="$BUILD/sglang_tune-serving-$version.tar.gz"
mkdir -p "$BUILD"
"$VENV_BIN/ansible-galaxy" collection build --force --output-path "$BUILD" . >/dev/null
rm -rf "$TREE"
"$VENV_BIN/ansible-galaxy" collection install --offline --no-deps -p "$TREE" "$tarball" >/dev/null
git -C "$DEST" init -q

pip_version=$("$VENV_BIN/python" -c '
import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="3.11"))["pip"])')
mkdir -p "$HOME/.ansible/test/cache"
cp scripts/ansible_test_get_pip.py "$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"

cd "$DEST"
exec "$VENV_BIN/ansible-test" sanity --local --python 3.11 --color no "$@"
