#!/usr/bin/env bash
# Run on a machine with NVIDIA GPUs and no network: the roles make it a one-node cluster and
# prove what a CPU-only CI cannot: CUDA sees every GPU Ray offers (cluster-up's GPU proof)
# and NCCL runs on the devices (2 ranks on 2+ GPUs; on one GPU a 1-rank group still proves
# NCCL initialises there).
#
# Must already be on the machine (checked below; the first missing piece is named):
#   - root (the roles install a venv, a systemd unit and nftables rules);
#   - an NVIDIA driver: nvidia-smi lists at least one GPU;
#   - python3 3.10-3.12 with its venv module (verl supports no other), and nft, systemd;
#   - the controller venv, .venv/ (`make setup` on a connected machine, then copy the tree);
#   - WHEELS=<dir>: every wheel the node needs, for this Python and platform: ray[default],
#     debugpy, uv, verl and their dependencies, with a CUDA build of torch
#     (on a connected machine of the same platform:
#      pip download -d wheels 'ray[default]==2.60.0' debugpy uv==0.13.9 verl==0.9.1 torch).
#
#   sudo WHEELS=/path/to/wheels tests/gpu/run-single-node.sh [extra ansible-playbook arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
inventory=tests/gpu/inventory.yml
artifacts=artifacts/gpu-single-node

missing() {
  echo "MISSING: $*" >&2
  exit 2
}

[ "$(id -u)" = 0 ] || missing "root: run with sudo"
command -v nvidia-smi >/dev/null || missing "nvidia-smi: install the NVIDIA driver"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "$gpus" -ge 1 ] || missing "a GPU: nvidia-smi lists none (is the driver loaded?)"
python3 -c 'import sys, venv; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' \
  2>/dev/null || missing "python3 3.10-3.12 with venv (verl's range); found $(python3 -V 2>&1)"
for tool in nft systemctl; do
  command -v "$tool" >/dev/null || missing "$tool"
done
[ -x .venv/bin/ansible-playbook ] || missing ".venv/ with Ansible: run 'make setup' where there is network"
[ -d "${WHEELS:-}" ] || missing "WHEELS=<dir of wheels>: see the top of $0"
ls "$WHEELS"/torch-*.whl >/dev/null 2>&1 || missing "a torch wheel in $WHEELS"

# No index: the lock resolves from the wheels given, and pip and uv never look further.
export UV_OFFLINE=1 PIP_NO_INDEX=1
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$PWD/$artifacts/auth_token"
settings=$(printf '{"ray_lock_find_links": ["%s"], "ray_wheelhouse": "%s"}' \
  "$(realpath "$WHEELS")" "$PWD/$artifacts/wheelhouse")

echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,driver_version --format=csv,noheader

echo "== cluster-up (post_mortem), ending with the GPU proof: CUDA against nvidia-smi and Ray"
ansible-playbook -i "$inventory" cluster-up.yml -e debug_mode=post_mortem -e "$settings" "$@"

echo "== NCCL all-reduce on the GPUs ($gpus: $([ "$gpus" -ge 2 ] && echo 2 || echo 1) ranks)"
ansible-playbook -i "$inventory" playbooks/collective_check.yml -e "$settings" "$@"

echo "== debug-readiness probe (a post-mortem pause attached over DAP)"
ansible-playbook -i "$inventory" playbooks/debug_probe.yml -e "$settings" "$@"
