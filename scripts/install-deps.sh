#!/usr/bin/env bash
# Installs the Debian bookworm packages Kiln builds, tests and serves with.
# Used by the README, `make`, .ci/run and deploy/Dockerfile; installs only what is missing.
#   install-deps.sh                  everything needed to build and test
#   install-deps.sh --runtime        only the shared libraries kilnd, kiln-torch-worker and kiln link
#                                    (the container's runtime stage)
#   install-deps.sh --print-runtime  print that runtime list (checked against `ldd kilnd` by a test)
#   install-deps.sh --torchvision    optional at run time: torchvision's operator library, which
#                                    kiln-torch-worker loads when installed (models calling torchvision::nms,
#                                    roi_align, deform_conv2d); pulls in Python and python3-torch
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ca-certificates
  libtorch-dev                           # kiln-torch-worker: importer, reference runs, fallback (PyTorch 1.13 C++)
  libgrpc++-dev protobuf-compiler-grpc   # gRPC server/client and the protoc plugin
  libprotobuf-dev protobuf-compiler      # generated message code
  libabsl-dev                            # absl::Status / StatusOr used across engine, server and client
  libopenblas-dev                        # cblas_sgemm for GEMM and im2col convolution
  libdnnl-dev                            # oneDNN: convolution, pooling and inner product in NHWC with fused post-ops
  libspdlog-dev                          # server logging
  libcpp-httplib-dev                     # kilnd's HTTP/REST endpoint (server/http/; see README, Dependencies)
  nlohmann-json3-dev                     # load `config` JSON and metadata
  libcli11-dev                           # command-line parsing for kilnd and kiln
  libyaml-cpp-dev                        # kilnd --config FILE (YAML; JSON read as YAML)
  libssl-dev                             # SHA-256 of model bytes, TLS for HTTPS, token digests (OpenSSL)
  libseccomp-dev                         # the import child's seccomp filter (server/security/sandbox.cc)
  zlib1g-dev                             # inflating deflated entries of model archives (.pt2 importer)
  libgtest-dev libgmock-dev              # unit and integration tests
  clang                                  # libFuzzer targets (tests/fuzz; skipped without clang++)
  valgrind                               # the memcheck.* tests: reads of freed memory fail every time
  python3-torch python3-torchvision python3-numpy   # test fixtures and the example model
  python3-grpcio python3-protobuf python3-grpc-tools  # the Python client example (stock grpcio)
  python3-yaml                           # the deployment-manifest test
  curl                                   # the HTTP/REST integration test drives kilnd with curl
  openssl                                # the TLS tests make a throwaway CA and certificates
)

# The runtime libraries of kilnd, kiln-torch-worker and kiln, one package per library they link directly
# (libc6, libgcc-s1 and libstdc++6 are part of every Debian base image).
RUNTIME_PACKAGES=(
  libtorch1.13 libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libopenblas0-pthread libdnnl2
  libspdlog1.10 libfmt9 libssl3 libgomp1 libstdc++6 libyaml-cpp0.7 libseccomp2 zlib1g ca-certificates
  libcpp-httplib0.11
)

case "${1:-}" in
  --print-runtime) printf '%s\n' "${RUNTIME_PACKAGES[@]}"; exit 0 ;;
  --runtime) PACKAGES=("${RUNTIME_PACKAGES[@]}") ;;
  --torchvision) PACKAGES=(python3-torchvision) ;;
  "") ;;
  *) echo "usage: $0 [--runtime|--print-runtime|--torchvision]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
