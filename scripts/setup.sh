#!/usr/bin/env bash
# Idempotent set-up of everything the project needs on a fresh Debian 12 machine:
#   1. apt packages (podman + runc + mmdebstrap for the emulator hosts, iproute2 for their netns,
#      and the lint stage's shellcheck)
#   2. the podman settings this kind of VM needs (docs/reference/test-substrate.md §1a)
#   3. .venv with the project (editable) and its tools, pinned by requirements/constraints.txt:
#      the tuner's packages always, the test and lint tools (the `dev` extra) unless
#      SGLANG_TUNE_SETUP_EXTRAS=tuner says they are not needed (`make demo`: about 20 s less from a
#      fresh clone; a later `make test` adds them)
#   4. the Ansible collections, taken from the `ansible` wheel on PyPI (Galaxy is unreachable)
#   5. the emulator hosts' container image, built locally from Debian's mirror (no registry), with
#      sshd: Ansible reaches the hosts over SSH as it reaches real ones
#   6. the controller's SSH key for those hosts (~/.cache/sglang-tune/emulator_hosts_ed25519)
#   7. the wheelhouse the sglang_server role installs the emulator from
# Each step is skipped when its stamp says it is already done, so `make test` stays cheap.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STAMPS="$ROOT/.cache/setup"
mkdir -p "$STAMPS"
IMAGE=${SGLANG_EMU_IMAGE:-localhost/sglang-emulator-host:bookworm}
# What the image holds, as its label io.sglang-tune.image: a different value rebuilds it
# (2: openssh-server added).
IMAGE_VERSION=2
ANSIBLE_WHEEL_VERSION=12.3.0      # carries the collection versions pinned in requirements.yml
PY=${PYTHON:-python3}

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "setup: step '$1' needs root (apt, podman, network namespaces)" >&2
    exit 1
  fi
}

step_apt() {
  # python3-venv: Debian's python3 has no ensurepip without it, and `python3 -m venv` fails
  local pkgs=(podman runc mmdebstrap iproute2 openssh-client make git shellcheck python3-venv)
  local missing=()
  for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  need_root apt
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
}

step_podman_conf() {
  # crun 1.8 refuses cgroup-v1 hybrid hosts and podman's default nofile limit exceeds this VM's
  # hard limit; a drop-in keeps every podman call (ours, molecule's, Ansible's connection plugin)
  # on runc with limits the VM allows.
  local conf=/etc/containers/containers.conf.d/50-sglang-tune.conf
  local nofile
  nofile=$(ulimit -Hn)
  [ "$nofile" = unlimited ] && nofile=1048576
  local want
  want=$(printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=32768:32768"]\n[engine]\nruntime = "runc"\n' "$nofile" "$nofile")
  if [ -f "$conf" ] && [ "$(cat "$conf")" = "$want" ]; then return 0; fi
  need_root podman-conf
  log "podman: writing $conf (runc, nofile=$nofile)"
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" >"$conf"
}

step_venv() {
  # The extras to install: `tuner,dev` (everything; the default) or `tuner` (what the demo runs).
  # A venv that has the dev extra has the tuner's too, so either stamp satisfies a `tuner` set-up.
  local extras=${SGLANG_TUNE_SETUP_EXTRAS:-tuner,dev} hash
  case "$extras" in tuner | tuner,dev) ;; *)
    echo "setup: SGLANG_TUNE_SETUP_EXTRAS must be 'tuner' or 'tuner,dev', not '$extras'" >&2
    exit 2
    ;;
  esac
  hash=$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
  if [ -x .venv/bin/python ]; then
    [ -f "$STAMPS/venv.$hash.tuner,dev" ] && return 0
    [ "$extras" = tuner ] && [ -f "$STAMPS/venv.$hash.tuner" ] && return 0
  fi
  if [ "$extras" = tuner ]; then
    log "venv: installing the project and the tuner's packages into .venv (no test tools)"
  else
    log "venv: installing the project, the tuner's packages and the test tools into .venv"
  fi
  # a venv whose creation failed (no ensurepip) has its python but no pip: made again
  if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    rm -rf .venv
    "$PY" -m venv .venv
  fi
  # pip, wheel and setuptools pinned too: the wheelhouse builds the project without build isolation,
  # with this setuptools (pyproject.toml asks for 68 or later; Python 3.11's venv brings 65)
  .venv/bin/python -m pip install -q -c requirements/constraints.txt --upgrade pip wheel setuptools
  .venv/bin/python -m pip install -q -c requirements/constraints.txt -e ".[$extras]"
  rm -f "$STAMPS"/venv.*
  touch "$STAMPS/venv.$hash.$extras"
}

step_collections() {
  local dest="$ROOT/.ansible/collections"
  local stamp
  stamp="$STAMPS/collections.$ANSIBLE_WHEEL_VERSION.$(sha256sum requirements.yml | cut -c1-16)"
  [ -f "$stamp" ] && return 0
  log "collections: extracting from ansible==$ANSIBLE_WHEEL_VERSION (PyPI)"
  mkdir -p .cache/dl
  .venv/bin/python -m pip download -q --no-deps -d .cache/dl "ansible==$ANSIBLE_WHEEL_VERSION"
  rm -rf "$dest"
  .venv/bin/python scripts/extract_collections.py ".cache/dl/ansible-$ANSIBLE_WHEEL_VERSION-py3-none-any.whl" requirements.yml "$dest"
  rm -f "$STAMPS"/collections.*
  touch "$stamp"
}

mirror_lines() {
  # mmdebstrap needs the mirror spelled out: reuse the one apt already uses on this machine.
  local base sec
  # $(REPO_URI) is apt-get's own field syntax, not a command substitution.
  # shellcheck disable=SC2016
  # (`|| true`: a machine without one of the two sources makes grep fail, which under pipefail
  # would end the function before the fallbacks below)
  base=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -v security | head -n1 || true)
  # shellcheck disable=SC2016
  sec=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep security | head -n1 || true)
  base=${base:-http://deb.debian.org/debian/}
  sec=${sec:-http://deb.debian.org/debian-security/}
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' "$base" "$base" "$sec"
}

step_collection_link() {
  # The repo root is the collection sglang_tune.serving (galaxy.yml); linked into the collections
  # path of ansible.cfg, its FQCNs resolve from the repo as they do from an installed collection.
  local link="$ROOT/.ansible/collections/ansible_collections/sglang_tune/serving"
  [ "$(readlink "$link" 2>/dev/null)" = "../../../.." ] && return 0
  log "collection: linking the repo as sglang_tune.serving"
  mkdir -p "$(dirname "$link")"
  rm -rf "$link"
  ln -s ../../../.. "$link"
}

step_image() {
  local have
  have=$(podman image inspect --format '{{ index .Config.Labels "io.sglang-tune.image" }}' "$IMAGE" 2>/dev/null || true)
  [ "$have" = "$IMAGE_VERSION" ] && return 0
  need_root image
  log "image: building $IMAGE (version $IMAGE_VERSION) with mmdebstrap (about 40 s)"
  local -a mirrors
  mapfile -t mirrors < <(mirror_lines)
  # openssh-server: Ansible reaches the hosts over SSH, as it reaches real ones (the inventory's
  # ansible_connection); its postinst makes the host keys, so every host of the image shares them.
  # Imported under a name of its own and given the image's name only once whole: a failed
  # mmdebstrap (a mirror that does not answer) still lets `podman import` make an empty image, which
  # under the image's name and label every later set-up took as built.
  local partial="$IMAGE-partial" size
  podman rmi -f "$partial" >/dev/null 2>&1 || true
  mmdebstrap --quiet --variant=minbase \
    --include=systemd,systemd-sysv,dbus,python3,python3-venv,procps,openssh-server \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --format=tar bookworm - "${mirrors[@]}" </dev/null \
    | podman import --change 'CMD ["/sbin/init"]' --change "LABEL io.sglang-tune.image=$IMAGE_VERSION" \
      - "$partial" >/dev/null
  size=$(podman image inspect --format '{{.Size}}' "$partial")
  if [ "${size:-0}" -lt 50000000 ]; then  # the image is about 200 MB
    podman rmi -f "$partial" >/dev/null 2>&1 || true
    echo "setup: the image came out at ${size:-0} bytes: mmdebstrap made no system (see above)" >&2
    return 1
  fi
  podman tag "$partial" "$IMAGE"
  podman untag "$partial" "$partial" >/dev/null 2>&1 || podman rmi "$partial" >/dev/null 2>&1 || true
}

step_ssh_key() {
  # The key the controller reaches the emulator hosts with (inventory/emulator.yml,
  # ansible_ssh_private_key_file); playbooks/emulator_hosts.yml makes it too, but parallel test
  # workers must not race to make it.
  local home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
  local key="$home/.cache/sglang-tune/emulator_hosts_ed25519"
  [ -f "$key" ] && return 0
  log "ssh: making the emulator hosts' key $key"
  mkdir -p "$(dirname "$key")"
  chmod 700 "$(dirname "$key")"
  ssh-keygen -q -t ed25519 -N "" -C "sglang-tune emulator hosts" -f "$key"
}

step_wheelhouse() {
  .venv/bin/python scripts/build_wheelhouse.py --quiet
}

main() {
  local steps=("$@")
  [ ${#steps[@]} -eq 0 ] && steps=(apt podman_conf venv collections collection_link image ssh_key wheelhouse)
  for s in "${steps[@]}"; do "step_$s"; done
}

main "$@"
