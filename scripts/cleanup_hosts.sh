#!/usr/bin/env bash
# Remove every emulator host this project made on this machine, whoever made it (demo, tests,
# molecule): containers labelled io.sglang-tune=1, network namespaces named sgt-*, and the
# controller-side veths (sgtv<idx>) whose peers lived in them (docs/architecture.md
# "Emulator hosts"). Prints what it removed. Needs root. It removes other people's emulator
# hosts too, so run it when nothing of this project is running (CI teardown, `make clean`).
#   scripts/cleanup_hosts.sh [--dry-run]
set -uo pipefail

dry=0
[ "${1:-}" = --dry-run ] && dry=1
verb=removed
[ "$dry" = 1 ] && verb="would remove"
found=0

remove() {  # remove WHAT COMMAND...
  local what=$1
  shift
  found=1
  if [ "$dry" = 1 ] || "$@" >/dev/null 2>&1; then
    echo "cleanup: $verb $what"
  else
    echo "cleanup: could not remove $what" >&2
  fi
}

if command -v podman >/dev/null 2>&1; then
  while read -r id name; do
    [ -n "$id" ] && remove "container $name" podman rm -f -t 2 "$id"
  done < <(podman ps -a --filter label=io.sglang-tune=1 --format '{{.ID}} {{.Names}}' 2>/dev/null)
fi

for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^sgt-'); do
  remove "netns $ns" ip netns del "$ns"
done

# Deleting a namespace destroys its veth pair; a pair whose peer never reached one survives here.
if [ "$dry" = 0 ]; then
  for link in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^sgtv'); do
    remove "veth $link" ip link del "$link"
  done
fi

[ "$found" = 0 ] && echo "cleanup: nothing to remove"
exit 0
