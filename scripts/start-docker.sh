#!/usr/bin/env bash
# Makes sure a Docker daemon answers on this machine: installs docker.io when the
# client or daemon is missing (Debian/Ubuntu, as root) and starts dockerd in the
# background with its log in ${DOCKERD_LOG:-/tmp/dockerd.log}. Idempotent.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "start-docker: installing docker.io" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q docker.io >&2
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "start-docker: starting dockerd (log: ${DOCKERD_LOG:-/tmp/dockerd.log})" >&2
  nohup dockerd >"${DOCKERD_LOG:-/tmp/dockerd.log}" 2>&1 &
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "start-docker: dockerd did not answer within 60 s; see ${DOCKERD_LOG:-/tmp/dockerd.log}" >&2
exit 1
