#!/usr/bin/env bash
# Makes sure a Docker daemon answers on this machine: installs docker.io when the
# client or daemon is missing (Debian/Ubuntu, as root) and starts dockerd in the
# background with its log in ${DOCKERD_LOG:-/tmp/dockerd.log}. Idempotent.
set -euo pipefail

# gVisor (Debian's runsc), registered as the runtime `runsc`, for policies that ask for
# it. A network-less container only starts under this runsc with --network=none.
ensure_gvisor() {
  if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    return 0
  fi
  if ! command -v runsc >/dev/null 2>&1; then
    echo "start-docker: installing runsc (gVisor)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || true
    apt-get install -y -q runsc >&2 || { echo "start-docker: runsc unavailable; gVisor tests will fail in CI" >&2; return 0; }
  fi
  mkdir -p /etc/docker
  if [ -s /etc/docker/daemon.json ] && ! grep -q runsc /etc/docker/daemon.json; then
    echo "start-docker: /etc/docker/daemon.json exists without runsc; not changing it" >&2
    return 0
  fi
  echo '{"runtimes": {"runsc": {"path": "'"$(command -v runsc)"'", "runtimeArgs": ["--network=none"]}}}' >/etc/docker/daemon.json
  if pgrep -x dockerd >/dev/null 2>&1; then
    kill -HUP "$(pgrep -x dockerd)"
    for _ in $(seq 1 20); do
      docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && return 0
      sleep 0.5
    done
  fi
}

if docker info >/dev/null 2>&1; then
  ensure_gvisor
  exit 0
fi

# An engine named by DOCKER_HOST is the user's choice: starting the local dockerd
# would not make it answer.
case "${DOCKER_HOST:-unix:///var/run/docker.sock}" in
  unix:///var/run/docker.sock | unix:///run/docker.sock) ;;
  *)
    echo "start-docker: DOCKER_HOST=$DOCKER_HOST does not answer (only a local dockerd is started here)" >&2
    exit 1
    ;;
esac

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
    ensure_gvisor
    exit 0
  fi
  sleep 1
done
echo "start-docker: dockerd did not answer within 60 s; see ${DOCKERD_LOG:-/tmp/dockerd.log}" >&2
exit 1
