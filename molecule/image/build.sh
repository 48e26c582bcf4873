#!/usr/bin/env bash
# Build the node image without depending on a registry: pull debian:bookworm when one
# answers, otherwise debootstrap a minimal base and import it.
set -euo pipefail

image="${1:-ray-cluster-node:bookworm}"
base="debian:bookworm"
here="$(cd "$(dirname "$0")" && pwd)"

if ! docker image inspect "$base" >/dev/null 2>&1 && ! docker pull -q "$base" >/dev/null 2>&1; then
  base="ray-cluster-base:bookworm"
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    echo "no registry: building $base with debootstrap" >&2
    rootfs="$(mktemp -d)"
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
  fi
fi
docker build -q --build-arg "BASE_IMAGE=$base" -t "$image" "$here" >/dev/null
echo "$image"
