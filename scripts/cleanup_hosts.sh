#!/usr/bin/env bash
# Remove emulator hosts this project made on this machine (docs/architecture.md "Emulator hosts").
#   scripts/cleanup_hosts.sh --run ID [--dry-run]   only what the run ID made (the test and bench traps)
#   scripts/cleanup_hosts.sh --all [--dry-run]      every one, whoever made it (demo, tests, molecule)
#   ... --also FILE                                  also the hosts FILE lists, a "<host> <index>" a line:
#                                                    ones a test made labelled as the user's (run "user")
# Every emulator host is labelled: the podman container with io.sglang-tune=1 and
# io.sglang-tune.run=<run>, its network namespace sgt-<host> and the controller-side veth sgtv<idx>
# with the link alias io.sglang-tune.run=<run> (the namespace's on its loopback, set when the
# namespace is made). The run is $SGLANG_TUNE_RUN of whoever made the host ("user" when unset:
# `make hosts`, `make demo`). With --run, the run's Ansible processes are stopped first. A run nested in ID (its id "ID.<more>": a test that makes hosts under
# a run of its own inside the suite's) is ID's too, so an interrupted test's hosts go with the
# suite's trap. With --run, emulator processes started on this machine (not in a container) whose
# environment carries SGLANG_TUNE_RUN=ID (or a run nested in it) are stopped too. A namespace
# sgt-<host> left without its label (a run killed between making it and labelling it) goes with
# the container <host> removed here. Prints what it removed.
# Exits 1 when something it should remove is still there (it says what); a thing gone by itself
# meanwhile (a process that ended) counts as removed. Needs root. `make clean` removes the default
# inventory's hosts with the play instead.
set -uo pipefail

usage() { echo "usage: $0 --run ID | --all  [--also FILE] [--dry-run]" >&2; exit 2; }
run=""
all=0
dry=0
also=""
while [ $# -gt 0 ]; do
  case "$1" in
    --run)
      if [ $# -lt 2 ] || [ -z "$2" ]; then usage; fi
      run=$2
      shift 2
      ;;
    --all) all=1; shift ;;
    --also)
      if [ $# -lt 2 ]; then usage; fi
      also=$2
      shift 2
      ;;
    --dry-run) dry=1; shift ;;
    *) usage ;;
  esac
done
{ [ -n "$run" ] && [ "$all" = 0 ]; } || { [ -z "$run" ] && [ "$all" = 1 ]; } || usage

verb=removed
[ "$dry" = 1 ] && verb="would remove"
found=0
failed=0

remove() {  # remove WHAT COMMAND...
  local what=$1
  shift
  found=1
  if [ "$dry" = 1 ] || "$@" >/dev/null 2>&1; then
    echo "cleanup: $verb $what"
  else
    echo "cleanup: could not remove $what" >&2
    failed=1
  fi
}

# shellcheck disable=SC2317  # called through remove "$@"
gone_or() {  # gone_or KIND NAME COMMAND...: COMMAND, or success when NAME is gone anyway
  local kind=$1 name=$2
  shift 2
  "$@" && return 0
  case $kind in
    pid) ! kill -0 "$name" 2>/dev/null ;;
    container) ! podman container exists "$name" 2>/dev/null ;;
    netns) ! ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$name" ;;
    link) ! ip link show dev "$name" >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

link_alias() {  # link_alias [ip options...] DEV: the link's alias, empty when it has none
  ip "${@:1:$#-1}" -d link show dev "${!#}" 2>/dev/null | sed -n 's/^ *alias //p' | head -n1
}

ours() {  # ours RUN: is a thing of this run one to remove? (the run itself or one nested in it)
  [ "$all" = 1 ] || [ "$1" = "$run" ] || [[ "$1" == "$run".* ]]
}

mine() {  # mine ALIAS: is a thing with this alias one to remove?
  [ "$all" = 1 ] || { [[ "$1" == io.sglang-tune.run=* ]] && ours "${1#io.sglang-tune.run=}"; }
}

run_pids() {  # run_pids PATTERN: the pids of the run's processes whose command line matches PATTERN
  local environ pid env_run
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    [[ " $ancestors " == *" $pid "* ]] && continue
    env_run=$({ tr '\0' '\n' <"$environ"; } 2>/dev/null | sed -n 's/^SGLANG_TUNE_RUN=//p' | head -n1)
    if [ -z "$env_run" ] || ! ours "$env_run"; then continue; fi
    { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- "$1" && echo "$pid"
  done
}

# this script and the processes it runs under (the test run's own, which carry its id too)
ancestors=" " p=$$
while [ -n "$p" ] && [ "$p" != 0 ]; do
  ancestors+="$p "
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
done

# The run's Ansible first: a play still running after its test was stopped (ansible-runner starts
# ansible-playbook in a session of its own, out of the stopped test's process group) would make a
# host or start an emulator after the clean-up below.
if [ -n "$run" ]; then
  for pid in $(run_pids '/ansible-\(playbook\|runner\|inventory\)'); do
    remove "ansible process $pid" gone_or pid "$pid" kill -TERM "$pid"
  done
  [ "$found" = 0 ] || [ "$dry" = 1 ] || sleep 1
fi

containers=" "  # the names of the containers removed, for their unlabelled namespaces
also_hosts=" " also_links=" "  # --also's hosts and their veths, whatever their label
if [ -n "$also" ] && [ -f "$also" ]; then
  while read -r name index _; do
    [[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || continue
    also_hosts+="$name "
    [[ "$index" =~ ^[0-9]+$ ]] && also_links+="sgtv$index "
    if command -v podman >/dev/null 2>&1 && podman container exists "$name" 2>/dev/null; then
      remove "container $name" gone_or container "$name" podman rm -f -t 2 "$name"
      containers+="$name "
    fi
  done <"$also"
fi
if command -v podman >/dev/null 2>&1; then
  while read -r id name label; do
    if [ -z "$id" ] || ! ours "$label"; then continue; fi
    remove "container $name" gone_or container "$id" podman rm -f -t 2 "$id"
    containers+="$name "
  done < <(podman ps -a --filter label=io.sglang-tune=1 \
    --format '{{.ID}} {{.Names}} {{index .Labels "io.sglang-tune.run"}}' 2>/dev/null)
fi

for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^sgt-'); do
  alias=$(link_alias -n "$ns" lo)
  if mine "$alias" || [[ "$also_hosts" == *" ${ns#sgt-} "* ]] ||
    { [ -z "$alias" ] && [[ "$containers" == *" ${ns#sgt-} "* ]]; }; then
    remove "netns $ns" gone_or netns "$ns" ip netns del "$ns"
  fi
done

# Deleting a namespace destroys its veth pair; a pair whose peer never reached one survives here
# (with --dry-run, the pairs of the namespaces above are listed too).
for link in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^sgtv'); do
  if mine "$(link_alias "$link")" || [[ "$also_links" == *" $link "* ]]; then
    remove "veth $link" gone_or link "$link" ip link del "$link"
  fi
done

if [ -n "$run" ]; then
  for pid in $(run_pids '-m tuner\.emulator'); do
    remove "emulator process $pid" gone_or pid "$pid" kill -TERM "$pid"
  done
fi

[ "$found" = 0 ] && echo "cleanup: nothing to remove"
exit "$failed"
