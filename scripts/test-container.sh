#!/usr/bin/env bash
# Builds the Kiln image with Podman and checks it for real: start the container, upload a model through
# it with the host's `kiln` CLI, run an inference, compare with libtorch's output, stop.
# Prints the image size and the time from `podman run` to the first successful inference.
#
# Works on a Debian bookworm machine without a container registry: it installs podman and runc, selects
# runc with the cgroupfs manager and modest default ulimits (the defaults fail on hosts where root may
# not raise RLIMIT_NOFILE), and makes the bookworm base image locally with debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
IMAGE=${IMAGE:-localhost/kiln:latest}
BASE_IMAGE=localhost/bookworm-base:1
PORT=${PORT:-18001}
PYTHON=/usr/bin/python3

need=()
for p in podman runc debootstrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

conf=/etc/containers/containers.conf
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

if ! podman image exists "$BASE_IMAGE"; then
  rootfs=$(mktemp -d)
  echo "test-container: making $BASE_IMAGE with debootstrap (about two minutes)"
  # The Debian mirror this machine's apt already uses, as apt itself reports it (the repository of its
  # bookworm main index), so the base image comes from the same place as every other package.
  mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Codename: bookworm' 'Origin: Debian' \
             'Component: main' 2> /dev/null | head -n 1)
  if [ -z "$mirror" ]; then
    echo "test-container: apt knows no Debian bookworm repository (run apt-get update?)" >&2
    exit 1
  fi
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > /dev/null
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" > /dev/null
  rm -rf "$rootfs"
fi

echo "test-container: building $IMAGE"
podman build --network host --build-arg BASE="$BASE_IMAGE" -f deploy/Dockerfile -t "$IMAGE" .
size=$(podman image inspect "$IMAGE" --format '{{.Size}}')

# The model and the expected output come from the test fixtures (libtorch's output for the same file).
make -s build BUILD="$BUILD" > /dev/null
fx="$BUILD/fixtures"
name=podman-kiln-test
podman rm -f "$name" > /dev/null 2>&1 || true
trap 'podman rm -f "$name" > /dev/null 2>&1 || true' EXIT

start=$(date +%s.%N)
podman run -d --name "$name" -p "127.0.0.1:$PORT:8001" "$IMAGE" --threads 2 > /dev/null
export KILN_SERVER="127.0.0.1:$PORT"
for _ in $(seq 1 300); do
  "$BUILD/bin/kiln" health > /dev/null 2>&1 && break
  sleep 0.2
done
"$BUILD/bin/kiln" upload "$fx/resnet18.pt" --name resnet18 > /dev/null
out=$(mktemp -d)
"$BUILD/bin/kiln" infer resnet18 --input "x=$fx/resnet18.input.x.npy" --output-dir "$out" > /dev/null
ready=$(date +%s.%N)
$PYTHON - "$out/output0.npy" "$fx/resnet18.output0.npy" <<'PY'
import sys, numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
rel = float(np.abs(got - want).max() / np.abs(want).max())
assert rel <= 1e-4, f"container output differs from libtorch: relative error {rel}"
print(f"test-container: output matches libtorch (relative error {rel:.2e})")
PY
podman stop -t 30 "$name" > /dev/null
code=$(podman inspect "$name" --format '{{.State.ExitCode}}')
[ "$code" = "0" ] || { echo "test-container: kilnd exited with $code"; podman logs "$name"; exit 1; }
echo "test-container: image size $((size / 1024 / 1024)) MiB"
echo "test-container: podman run to first inference (upload included) $($PYTHON -c "print(round($ready - $start, 2))") s"
echo "test-container: passed"
