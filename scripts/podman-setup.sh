# Sourced by the container tests (scripts/test-container.sh, scripts/test-compose.sh): makes Podman work on a
# Debian bookworm machine without a container registry. It installs podman (and the packages named in
# PODMAN_EXTRA_PACKAGES), runc and debootstrap, selects runc with the cgroupfs manager and modest default
# ulimits (the defaults fail on hosts where root may not raise RLIMIT_NOFILE), and makes the bookworm base
# image, $BASE_IMAGE, locally with debootstrap from the Debian mirror apt already uses.
# The caller sets `set -euo pipefail`; messages are prefixed with $PODMAN_SETUP_TAG.

source "$(dirname "${BASH_SOURCE[0]}")/base-image.sh"

BASE_IMAGE=localhost/bookworm-base:1
PODMAN_SETUP_TAG=${PODMAN_SETUP_TAG:-podman-setup}

podman_setup() {
  local need=() p
  for p in podman runc debootstrap ${PODMAN_EXTRA_PACKAGES:-}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
  fi

  local conf=/etc/containers/containers.conf
  if ! grep -q 'runtime = "runc"' "$conf" 2>/dev/null; then
    mkdir -p /etc/containers
    cat > "$conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  fi

  podman image exists "$BASE_IMAGE" || make_base_image podman "$BASE_IMAGE" "$PODMAN_SETUP_TAG"
}
