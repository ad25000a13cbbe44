#!/usr/bin/env bash
# Runs deploy/compose.yaml for real with podman-compose (COMPOSE_ENGINE=podman, the default) or with Docker and
# docker-compose (COMPOSE_ENGINE=docker) and checks what it promises: kilnd from the image
# with its HTTP, gRPC and metrics ports, the health check, a model uploaded and inferred with curl (the
# answer compared with PyTorch's), the metrics port, the named volumes holding the model repository and
# the compiled-graph cache, and a `down` / `up` that serves the model again from those volumes (loaded from
# the cache, not imported again). Then `down -v`. Prints the time from `up` to ready, both times.
#
# The image is built from the binaries `make build` made (`--target prebuilt`: nothing is compiled in the
# image; TARGET=compiled compiles them in it). Works on a Debian bookworm machine without a container
# registry (scripts/podman-setup.sh, scripts/docker-setup.sh). The host ports are 18000-18002 unless KILN_HTTP_PORT,
# KILN_GRPC_PORT or KILN_METRICS_PORT say otherwise, so that a kilnd on 8000-8002 is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
TARGET=${TARGET:-prebuilt}
PROJECT=${PROJECT:-kiln-compose-test}
PYTHON=/usr/bin/python3
MODEL=compose_mlp
export KILN_IMAGE=${KILN_IMAGE:-localhost/kiln:latest}
export KILN_HTTP_PORT=${KILN_HTTP_PORT:-18000}
export KILN_GRPC_PORT=${KILN_GRPC_PORT:-18001}
export KILN_METRICS_PORT=${KILN_METRICS_PORT:-18002}
http=http://127.0.0.1:$KILN_HTTP_PORT
ENGINE=${COMPOSE_ENGINE:-podman}
tag="test-compose ($ENGINE)"

# What differs between the engines: the CLI, the compose tool, and how the health check is read (podman runs
# it on its schedule only through systemd timers, which a host without systemd lacks, so `podman healthcheck
# run` runs it now; Docker's daemon runs it every `interval` itself).
case "$ENGINE" in
  podman)
    engine=podman
    compose=(podman-compose -p "$PROJECT" -f deploy/compose.yaml)
    PODMAN_SETUP_TAG=$tag
    PODMAN_EXTRA_PACKAGES="podman-compose curl"
    source scripts/podman-setup.sh
    podman_setup
    engine_teardown() { :; }
    healthy() { podman healthcheck run "$1" > /dev/null 2>&1; }
    ;;
  docker)
    engine=docker
    compose=(docker-compose -p "$PROJECT" -f deploy/compose.yaml)
    DOCKER_SETUP_TAG=$tag
    DOCKER_EXTRA_PACKAGES="curl"
    source scripts/docker-setup.sh
    docker_setup
    engine_teardown() { docker_teardown; }
    healthy() { [ "$(docker inspect "$1" --format '{{.State.Health.Status}}' 2> /dev/null)" = healthy ]; }
    ;;
  *)
    echo "test-compose: COMPOSE_ENGINE is '$ENGINE': podman or docker" >&2
    exit 2
    ;;
esac
volume_exists() { "$engine" volume inspect "$1" > /dev/null 2>&1; }

if [ "$TARGET" = prebuilt ]; then
  # The build context passes build/bin's three binaries only (.containerignore).
  [ "$(realpath -m "$BUILD")" = "$(realpath -m build)" ] ||
    { echo "$tag: the image's prebuilt stage copies build/bin, not $BUILD/bin (or TARGET=compiled)" >&2; exit 1; }
  for b in kilnd kiln kiln-torch-worker; do
    [ -x "build/bin/$b" ] || { echo "$tag: build/bin/$b is missing: run make build" >&2; exit 1; }
  done
fi
echo "$tag: building $KILN_IMAGE (--target $TARGET)"
"$engine" build -q --network host --build-arg BASE="$BASE_IMAGE" --target "$TARGET" -f deploy/Dockerfile \
  -t "$KILN_IMAGE" . > /dev/null
echo "$tag: image size $(($("$engine" image inspect "$KILN_IMAGE" --format '{{.Size}}') / 1024 / 1024)) MiB"

# What an earlier run left is removed first, and all of it at exit.
compose_clean() {
  "${compose[@]}" down -v -t 30 > /dev/null 2>&1 || true
  "$engine" volume rm -f "${PROJECT}_models" "${PROJECT}_cache" > /dev/null 2>&1 || true
  "$engine" network rm "${PROJECT}_default" > /dev/null 2>&1 || true  # podman-compose 1.0 keeps it
}
compose_clean
work=$(mktemp -d)
trap 'compose_clean; rm -rf "$work"; engine_teardown' EXIT

# A TorchScript model, an input, and PyTorch's output for it.
$PYTHON - "$work" <<'PY'
import json, sys, torch
torch.manual_seed(0)
model = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)))
model.save(f"{sys.argv[1]}/model.pt")
x = torch.rand(2, 8)
json.dump({"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                       "data": x.flatten().tolist()}]}, open(f"{sys.argv[1]}/request.json", "w"))
json.dump(model(x).detach().flatten().tolist(), open(f"{sys.argv[1]}/expected.json", "w"))
PY

cid() {
  "$engine" ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=kiln"
}

# Ready: the compose file's own health check passes in the container and HTTP readiness answers 200
# through the published port. Prints the seconds since $1.
wait_ready() {
  local start=$1 id=
  for _ in $(seq 1 600); do
    id=$(cid)
    if [ -n "$id" ] && healthy "$id" &&
       curl -sf "$http/v2/health/ready" > /dev/null 2>&1; then
      $PYTHON -c "import time; print(round(time.time() - $start, 2))"
      return 0
    fi
    sleep 0.2
  done
  echo "$tag: kilnd was not ready after two minutes" >&2
  [ -n "$id" ] && "$engine" logs "$id" >&2
  return 1
}

infer_and_compare() {
  curl -sS --fail-with-body -X POST -H 'Content-Type: application/json' --data-binary @"$work/request.json" \
    "$http/v2/models/$MODEL/infer" > "$work/response.json" || { cat "$work/response.json" >&2; return 1; }
  $PYTHON - "$work" "$1" <<'PY'
import json, sys
got = json.load(open(f"{sys.argv[1]}/response.json"))["outputs"][0]["data"]
want = json.load(open(f"{sys.argv[1]}/expected.json"))
assert len(got) == len(want), (len(got), len(want))
rel = max(abs(g - w) for g, w in zip(got, want)) / max(abs(w) for w in want)
assert rel <= 1e-5, f"kilnd's output differs from PyTorch's: relative error {rel}"
print(f"test-compose: {sys.argv[2]}: curl inference matches PyTorch (relative error {rel:.1e})")
PY
}

metric() {  # metric NAME LABELS: the value of the sample NAME{LABELS} on the metrics port
  curl -sf "http://127.0.0.1:$KILN_METRICS_PORT/metrics" | awk -v s="$1{$2}" '$1 == s { print $2 }'
}

echo "$tag: ${compose[*]} up -d"
start=$($PYTHON -c "import time; print(time.time())")
"${compose[@]}" up -d > "$work/up.log" 2>&1 || { cat "$work/up.log"; exit 1; }
first=$(wait_ready "$start")
health=$("$engine" inspect "$(cid)" --format '{{.State.Health.Status}}')
[ "$health" = healthy ] || { echo "$tag: health status '$health', not healthy" >&2; exit 1; }
echo "$tag: up to ready (health check passing, status $health) $first s"

curl -sS --fail-with-body -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$work/model.pt" \
  "$http/v2/repository/models/$MODEL/load" > "$work/load.json" || { cat "$work/load.json" >&2; exit 1; }
infer_and_compare "after upload"
# gRPC answers on its published port too (the standard health service, through the host's kiln CLI).
if [ -x "$BUILD/bin/kiln" ]; then
  KILN_SERVER="127.0.0.1:$KILN_GRPC_PORT" "$BUILD/bin/kiln" health > /dev/null
  echo "$tag: gRPC port answers (kiln health)"
fi
ok=$(metric nv_inference_request_success "model=\"$MODEL\",version=\"1\"")
[ "$ok" = 1 ] || { echo "$tag: nv_inference_request_success for $MODEL is '$ok', not 1" >&2; exit 1; }
echo "$tag: metrics port: nv_inference_request_success{model=\"$MODEL\"} $ok"

for v in models cache; do
  volume_exists "${PROJECT}_$v" || { echo "$tag: no volume ${PROJECT}_$v" >&2; exit 1; }
done
models=$("$engine" volume inspect "${PROJECT}_models" --format '{{.Mountpoint}}')
cache=$("$engine" volume inspect "${PROJECT}_cache" --format '{{.Mountpoint}}')
cmp -s "$work/model.pt" "$(find "$models/$MODEL" -name model.pt | head -n 1)" ||
  { echo "$tag: the models volume does not hold the upload:" >&2; find "$models" >&2; exit 1; }
[ -n "$(find "$cache" -type f)" ] || { echo "$tag: the cache volume is empty" >&2; exit 1; }
echo "$tag: volumes ${PROJECT}_models (holds $MODEL) and ${PROJECT}_cache ($(du -sh "$cache" | cut -f1)) exist"

# down (the container goes, the volumes stay) and up: the model is served again from the volumes.
"${compose[@]}" down -t 30 > /dev/null 2>&1
[ -z "$(cid)" ] || { echo "$tag: the container survived down" >&2; exit 1; }
start=$($PYTHON -c "import time; print(time.time())")
"${compose[@]}" up -d > "$work/up.log" 2>&1 || { cat "$work/up.log"; exit 1; }
second=$(wait_ready "$start")
echo "$tag: down, up to ready (model from the volumes) $second s"
curl -sf "$http/v2/models/$MODEL/ready" > /dev/null || { echo "$tag: $MODEL is not ready after up" >&2; exit 1; }
infer_and_compare "after down and up"
hits=$(metric kiln_plan_cache_disk_hits_total 'kind="graph"')
[ "${hits%%.*}" -ge 1 ] 2>/dev/null ||
  { echo "$tag: the model was not loaded from the cache volume (graph hits '$hits')" >&2; exit 1; }
echo "$tag: graph loaded from the cache volume (kiln_plan_cache_disk_hits_total{kind=\"graph\"} $hits)"

# SIGTERM drains and exits 0 (stop first: down removes the container and its exit code).
id=$(cid)
"${compose[@]}" stop -t 30 > /dev/null 2>&1
code=$("$engine" inspect "$id" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || { echo "$tag: kilnd exited with $code" >&2; "$engine" logs "$id" >&2; exit 1; }
"${compose[@]}" down -v -t 30 > /dev/null 2>&1
for v in models cache; do
  ! volume_exists "${PROJECT}_$v" || { echo "$tag: down -v left ${PROJECT}_$v" >&2; exit 1; }
done
echo "$tag: stopped (exit 0), down -v removed the volumes"
echo "$tag: passed"
