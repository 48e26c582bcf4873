#!/usr/bin/env bash
# What `make` needs from the machine, by name: each missing piece is installed (root on
# Debian or Ubuntu, with apt-get) or named at once, with the command that installs it, before
# anything else runs. The Docker daemon is started when it is installed but not running.
#
#   tools/prerequisites.sh venv docker debootstrap nmap ssh
#
# PREREQUISITES_INSTALL=0 only names what is missing (the default for non-root users).
set -euo pipefail

# piece -> "command that proves it|Debian package"
declare -A NEEDS=(
  [venv]="python3 -c 'import ensurepip, venv'|python3-venv"
  [docker]="command -v dockerd|docker.io"
  [debootstrap]="command -v debootstrap|debootstrap"
  [nmap]="command -v nmap|nmap"
  [ssh]="command -v ssh|openssh-client"
  [rsync]="command -v rsync|rsync"
  # The runbook's state API command pipes curl into python3 (molecule's test_runbook.py runs
  # it as printed).
  [curl]="command -v curl|curl"
  # The unit tests build a stand-in libcuda.so.1 (tests/integration/test_gpu_proof_with_a_driver.py).
  [gcc]="command -v gcc|gcc"
)

install="${PREREQUISITES_INSTALL:-$([[ $(id -u) == 0 ]] && echo 1 || echo 0)}"
command -v apt-get >/dev/null || install=0

missing=()
for piece in "$@"; do
  [[ -n "${NEEDS[$piece]:-}" ]] || { echo "prerequisites: unknown piece '$piece' (known: ${!NEEDS[*]})" >&2; exit 2; }
  check="${NEEDS[$piece]%|*}"
  bash -c "$check" >/dev/null 2>&1 || missing+=("${NEEDS[$piece]#*|}")
done

if ((${#missing[@]})); then
  if [[ "$install" != 1 ]]; then
    echo "missing: ${missing[*]}; install with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # make test runs stages side by side: another stage's apt-get may hold the lock a while.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
fi

if [[ " $* " == *" docker "* ]] && ! docker info >/dev/null 2>&1; then
  if [[ "$install" != 1 ]]; then
    echo "the Docker daemon is not running; start it with: sudo systemctl start docker" >&2
    exit 1
  fi
  if [[ -d /run/systemd/system ]]; then
    systemctl start docker
  else
    # No systemd (a container, CI): the daemon in the background, as CI machines run it.
    setsid dockerd >/var/log/dockerd.log 2>&1 </dev/null &
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "the Docker daemon did not start: see /var/log/dockerd.log" >&2; exit 1; }
fi
