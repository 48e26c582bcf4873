#!/usr/bin/env bash
# By hand over SSH, no Ansible, with cluster-up's installer: for each node one SSH session
# streams the wheelhouse archive in, takes uv out of its own wheel, makes the venv and
# installs the lock with uv, and starts Ray in legacy debug mode; the head first, then the
# workers one at a time. With the head alone it is the limit, the floor for one node; with
# --all-at-once every node's session runs at the same time (the workers' `ray start` retries
# the head's GCS until it is up): the floor for the cluster.
# Usage: manual.sh [--all-at-once] KEY ARCHIVE LOCK HEAD_IP [WORKER_IP...]
set -euo pipefail
at_once=false
if [[ $1 == --all-at-once ]]; then
  at_once=true
  shift
fi
key=$1 archive=$2 lock=$3 head=$4
shift 4
ssh_options=(-i "$key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
debug_env="RAY_DEBUG=legacy RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0"
# Plain name==version lines: they travel in the command, the archive on standard input.
pins=$(tr '\n' ' ' <"$lock")

up() {  # node address, then `ray start`'s arguments
  local address=$1
  shift
  ssh "${ssh_options[@]}" "root@$address" "set -e
    mkdir -p /root/wheels && tar -xf - -C /root/wheels
    printf '%s\n' $pins >/root/requirements.lock
    python3 -m zipfile -e /root/wheels/uv-*.whl /root/uv
    uv=\$(echo /root/uv/uv-*.data/scripts/uv) && chmod +x \$uv
    \$uv venv --quiet --python python3 /opt/manual
    \$uv pip sync --quiet --python /opt/manual/bin/python --no-index --find-links /root/wheels \
      /root/requirements.lock
    $debug_env /opt/manual/bin/ray start $* >/dev/null" <"$archive"
}

head_options=(--head --port=6379 --dashboard-host=0.0.0.0 --ray-debugger-external)
worker_options=(--address="$head:6379" --ray-debugger-external)
if $at_once; then
  pids=()
  up "$head" "${head_options[@]}" &
  pids+=($!)
  for worker in "$@"; do
    up "$worker" "${worker_options[@]}" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"
  done
else
  up "$head" "${head_options[@]}"
  for worker in "$@"; do
    up "$worker" "${worker_options[@]}"
  done
fi
