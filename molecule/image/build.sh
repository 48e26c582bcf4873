#!/usr/bin/env bash
# Build the node image for a Debian suite (bookworm unless named) without depending on a
# registry: pull debian:SUITE when one answers, otherwise debootstrap a minimal base and
# import it. Prints the image's name, ray-cluster-node:SUITE.
set -euo pipefail

suite="${1:-bookworm}"
image="ray-cluster-node:$suite"
base="debian:$suite"
here="$(cd "$(dirname "$0")" && pwd)"

if ! docker image inspect "$base" >/dev/null 2>&1 && ! docker pull -q "$base" >/dev/null 2>&1; then
  base="ray-cluster-base:$suite"
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    echo "no registry: building $base with debootstrap" >&2
    rootfs="$(mktemp -d)"
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase "$suite" "$rootfs" http://deb.debian.org/debian >/dev/null
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
  fi
fi
docker build -q --build-arg "BASE_IMAGE=$base" -t "$image" "$here" >/dev/null
echo "$image"
