#!/usr/bin/env bash
# Builds the Kiln image with Podman and checks it for real: start the container, upload a model through
# it with the host's `kiln` CLI, run an inference, compare with libtorch's output, stop.
# Prints the image size and the time from `podman run` to the first successful inference.
#
# Works on a Debian bookworm machine without a container registry (scripts/podman-setup.sh: podman with
# runc, cgroupfs and modest default ulimits, and the bookworm base image made locally with debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
IMAGE=${IMAGE:-localhost/kiln:latest}
PORT=${PORT:-18001}
PYTHON=/usr/bin/python3

PODMAN_SETUP_TAG=test-container
source scripts/podman-setup.sh
podman_setup

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
