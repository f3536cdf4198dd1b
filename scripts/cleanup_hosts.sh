#!/usr/bin/env bash
# Remove emulator hosts this project made on this machine (docs/architecture.md "Emulator hosts").
#   scripts/cleanup_hosts.sh --run ID [--dry-run]   only what the run ID made (the test and bench traps)
#   scripts/cleanup_hosts.sh --all [--dry-run]      every one, whoever made it (demo, tests, molecule)
# Every emulator host is labelled: the podman container with io.sglang-tune=1 and
# io.sglang-tune.run=<run>, its network namespace sgt-<host> and the controller-side veth sgtv<idx>
# with the link alias io.sglang-tune.run=<run> (the namespace's on its loopback, set when the
# namespace is made). The run is $SGLANG_TUNE_RUN of whoever made the host ("user" when unset:
# `make hosts`, `make demo`). With --run, emulator processes started on this machine (not in a
# container) whose environment carries SGLANG_TUNE_RUN=ID are stopped too. Prints what it removed.
# Needs root. `make clean` removes the default inventory's hosts with the play instead.
set -uo pipefail

usage() { echo "usage: $0 --run ID | --all  [--dry-run]" >&2; exit 2; }
run=""
all=0
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --run)
      if [ $# -lt 2 ] || [ -z "$2" ]; then usage; fi
      run=$2
      shift 2
      ;;
    --all) all=1; shift ;;
    --dry-run) dry=1; shift ;;
    *) usage ;;
  esac
done
{ [ -n "$run" ] && [ "$all" = 0 ]; } || { [ -z "$run" ] && [ "$all" = 1 ]; } || usage

verb=removed
[ "$dry" = 1 ] && verb="would remove"
found=0
alias_want="io.sglang-tune.run=$run"

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

link_alias() {  # link_alias [ip options...] DEV: the link's alias, empty when it has none
  ip "${@:1:$#-1}" -d link show dev "${!#}" 2>/dev/null | sed -n 's/^ *alias //p' | head -n1
}

mine() {  # mine ALIAS: is a thing with this alias one to remove?
  [ "$all" = 1 ] || [ "$1" = "$alias_want" ]
}

if command -v podman >/dev/null 2>&1; then
  filter=(--filter label=io.sglang-tune=1)
  [ "$all" = 1 ] || filter+=(--filter "label=io.sglang-tune.run=$run")
  while read -r id name; do
    [ -n "$id" ] && remove "container $name" podman rm -f -t 2 "$id"
  done < <(podman ps -a "${filter[@]}" --format '{{.ID}} {{.Names}}' 2>/dev/null)
fi

for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^sgt-'); do
  mine "$(link_alias -n "$ns" lo)" && remove "netns $ns" ip netns del "$ns"
done

# Deleting a namespace destroys its veth pair; a pair whose peer never reached one survives here
# (with --dry-run, the pairs of the namespaces above are listed too).
for link in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^sgtv'); do
  mine "$(link_alias "$link")" && remove "veth $link" ip link del "$link"
done

if [ -n "$run" ]; then
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    [ "$pid" = "$$" ] && continue
    { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qxF "SGLANG_TUNE_RUN=$run" || continue
    { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- '-m tuner\.emulator' || continue
    remove "emulator process $pid" kill -TERM "$pid"
  done
fi

[ "$found" = 0 ] && echo "cleanup: nothing to remove"
exit 0
