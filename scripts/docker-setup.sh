# Sourced by scripts/test-compose.sh when COMPOSE_ENGINE=docker: makes Docker work on a Debian bookworm machine
# without a container registry, as scripts/podman-setup.sh does for Podman. It installs Debian's docker.io
# (the engine and its CLI), docker-compose (Compose v1, 1.29: bookworm packages no Compose v2 plugin) and
# debootstrap, starts the Docker daemon when none answers (with systemctl where systemd runs; otherwise
# dockerd in the background, stopped again by docker_teardown), and makes the bookworm base image, $BASE_IMAGE,
# locally (scripts/base-image.sh).
# The caller sets `set -euo pipefail`; messages are prefixed with $DOCKER_SETUP_TAG.

source "$(dirname "${BASH_SOURCE[0]}")/base-image.sh"

BASE_IMAGE=localhost/bookworm-base:1
DOCKER_SETUP_TAG=${DOCKER_SETUP_TAG:-docker-setup}
DOCKERD_PID=

docker_setup() {
  local need=() p
  for p in docker.io docker-compose debootstrap ${DOCKER_EXTRA_PACKAGES:-}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
  fi

  if ! docker info > /dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
      systemctl start docker
    else
      DOCKERD_LOG=$(mktemp)
      echo "$DOCKER_SETUP_TAG: no Docker daemon answers and systemd does not run here: starting dockerd" \
           "(log $DOCKERD_LOG; stopped at exit)"
      dockerd > "$DOCKERD_LOG" 2>&1 &
      DOCKERD_PID=$!
    fi
    for _ in $(seq 1 150); do
      docker info > /dev/null 2>&1 && break
      sleep 0.2
    done
    if ! docker info > /dev/null 2>&1; then
      echo "$DOCKER_SETUP_TAG: the Docker daemon did not start" >&2
      [ -n "${DOCKERD_LOG:-}" ] && tail -n 20 "$DOCKERD_LOG" >&2
      return 1
    fi
  fi

  docker image inspect "$BASE_IMAGE" > /dev/null 2>&1 ||
    make_base_image docker "$BASE_IMAGE" "$DOCKER_SETUP_TAG"
}

# Stops the dockerd that docker_setup started (none: nothing to do).
docker_teardown() {
  if [ -n "$DOCKERD_PID" ]; then
    kill "$DOCKERD_PID" 2> /dev/null || true
    wait "$DOCKERD_PID" 2> /dev/null || true
    DOCKERD_PID=
  fi
}
