#!/usr/bin/env bash
# Builds the runtime image `code-sandbox-mcp-runtime:trixie` (python3 + node) without
# any container registry: a Debian minbase root filesystem from debootstrap, imported
# with `docker import`. Idempotent: an existing image of the same revision (its
# `io.code-sandbox-mcp.base` label) is kept unless --force is given.
#
#   scripts/build-offline-image.sh [--force] [TAG]
#
# This image has the interpreters only. The images with libraries (numpy, pandas…;
# lodash, d3…) are built on top of it, still offline, with
#   code-sandbox-mcp image build --base code-sandbox-mcp-runtime:trixie
# (.ci/run does both).
set -euo pipefail

force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
tag="${1:-code-sandbox-mcp-runtime:trixie}"

# The definition's version: an image built from an older one is built again.
revision=3
if [ "$force" = 0 ] && [ "$(docker image inspect --format '{{index .Config.Labels "io.code-sandbox-mcp.base"}}' "$tag" 2>/dev/null)" = "$revision" ]; then
  echo "build-offline-image: $tag already exists" >&2
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "build-offline-image: installing debootstrap" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q debootstrap >&2
fi

rootfs=$(mktemp -d /tmp/code-sandbox-rootfs.XXXXXX)
# debootstrap mounts /proc in the new root; one it left mounted (a retried unpack) is
# neither packed into the image nor in the way of the clean-up.
trap 'umount -l "$rootfs/proc" 2>/dev/null || true; rm -rf "$rootfs"' EXIT

echo "build-offline-image: debootstrap trixie into $rootfs (about a minute)" >&2
debootstrap --variant=minbase --include=python3,nodejs,libnss-myhostname trixie "$rootfs" >&2

# `localhost` resolves in every box: the engine writes no /etc/hosts for a box without
# networking (and an image's own is hidden under the engine's empty one), so glibc asks
# nss-myhostname, which knows `localhost` itself, after the hosts file.
printf 'passwd:         files\ngroup:          files\nshadow:         files\nhosts:          files myhostname dns\nnetworks:       files\nprotocols:      db files\nservices:       db files\nethers:         db files\nrpc:            db files\n' > "$rootfs/etc/nsswitch.conf"

# The sandbox runs as an unprivileged user; /sandbox is its workdir (a tmpfs at run time).
mkdir -p "$rootfs/sandbox"
chmod 1777 "$rootfs/sandbox"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

umount -l "$rootfs/proc" 2>/dev/null || true
tar -C "$rootfs" -c . | docker import \
  --change 'WORKDIR /sandbox' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/sh"]' \
  --change "LABEL io.code-sandbox-mcp.base=$revision" \
  - "$tag" >&2
echo "build-offline-image: built $tag" >&2
docker image inspect --format '{{.Id}} {{.Size}}' "$tag"
