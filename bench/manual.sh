#!/usr/bin/env bash
# The Ray debugger guide's sequence done by hand over SSH, one node at a time: copy the
# wheelhouse, install into a venv with pip, start Ray in legacy debug mode (head first).
# Usage: manual.sh KEY ARCHIVE LOCK HEAD_IP WORKER_IP...
set -euo pipefail
key=$1 archive=$2 lock=$3 head=$4
shift 4
ssh_options=(-i "$key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
debug_env="RAY_DEBUG=legacy RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0"

install() {
  scp -q "${ssh_options[@]}" "$archive" "root@$1:/root/wheelhouse.tar"
  scp -q "${ssh_options[@]}" "$lock" "root@$1:/root/requirements.lock"
  ssh "${ssh_options[@]}" "root@$1" "python3 -m venv /opt/manual && mkdir -p /root/wheels \
    && tar -xf /root/wheelhouse.tar -C /root/wheels \
    && /opt/manual/bin/pip install --quiet --no-index --find-links /root/wheels -r /root/requirements.lock"
}

install "$head"
ssh "${ssh_options[@]}" "root@$head" "$debug_env /opt/manual/bin/ray start --head --port=6379 \
  --dashboard-host=0.0.0.0 --ray-debugger-external >/dev/null"
for worker in "$@"; do
  install "$worker"
  ssh "${ssh_options[@]}" "root@$worker" "$debug_env /opt/manual/bin/ray start \
    --address=$head:6379 --ray-debugger-external >/dev/null"
done
