#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: run the roles against it as a one-node cluster and record
# what a CPU-only CI cannot show. Needs root (the roles install a venv, a unit and nftables
# rules), the repository's controller venv (`make setup`) and access to a package index or a
# wheelhouse. Prints a report; docs/gpu-readiness.md says what to copy from it.
#   sudo tests/gpu/run-single-node.sh [extra ansible-playbook arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
inventory=tests/gpu/inventory.yml
artifacts=artifacts/gpu-single-node
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$PWD/$artifacts/auth_token"

echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader

echo "== cluster-up (post_mortem)"
ansible-playbook -i "$inventory" cluster-up.yml -e debug_mode=post_mortem "$@"

echo "== GPUs in Ray against nvidia-smi"
expected=$(nvidia-smi -L | grep -c '^GPU ')
offered=$(curl -s -H "Authorization: Bearer $(cat "$RAY_AUTH_TOKEN_PATH")" \
  "http://$(hostname -I | awk '{print $1}'):8265/api/v0/nodes?detail=true" \
  | python3 -c 'import json,sys; print(int(sum(n["resources_total"].get("GPU", 0) for n in json.load(sys.stdin)["data"]["result"]["result"])))')
echo "nvidia-smi: $expected, Ray: $offered"
[ "$expected" = "$offered" ]

echo "== collective check (NCCL on the GPU) and verl round trip"
ansible-playbook -i "$inventory" playbooks/collective-check.yml "$@"

echo "== debug-readiness probe (a post-mortem pause attached over DAP)"
ansible-playbook -i "$inventory" playbooks/debug-probe.yml "$@"
