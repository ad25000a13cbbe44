# Kiln developer entry points. Every target installs missing Debian packages first.
BUILD ?= build
JOBS ?= $(shell nproc)
PORT ?= 8001
THREADS ?= 2
REPO ?= var/models
PYTHON ?= /usr/bin/python3

.PHONY: all deps configure build build-no-torch test test-zoo-pt2 serve example-model bench bench-load bench-overhead test-container test-compose clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# kilnd and kiln built without libtorch (-DKILN_WITH_TORCH=OFF): no TorchScript importer, no
# fallback, no kiln-torch-worker. Such a kilnd serves models from the compiled-graph cache with the native kernels
# (integration.repository tests that behaviour); this keeps the configuration building.
build-no-torch: deps
	@cmake -S . -B $(BUILD)-no-torch -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WITH_TORCH=OFF \
	  -DKILN_BUILD_TESTS=OFF > /dev/null
	@cmake --build $(BUILD)-no-torch -j $(JOBS) --target kilnd kiln
	@test ! -e $(BUILD)-no-torch/bin/kiln-torch-worker
	@$(BUILD)-no-torch/bin/kilnd --help > /dev/null

# The whole torchvision zoo through a real kilnd against libtorch (tests/parity/run_zoo.py).
# Generates about 3.5 GB of models under $(BUILD)/parity/zoo on first use. ZOO_CONFIG is a load
# config for every upload: make test-zoo ZOO_CONFIG='{"accumulation": "float64"}'.
test-zoo: build
	@KILN_ZOO_CONFIG='$(ZOO_CONFIG)' cmake --build $(BUILD) --target parity_zoo

# The same zoo as torch.export (.pt2) archives with a dynamic batch, written by torch 2.14 in the
# Debian sid chroot of the pt2 tests (tests/pt2/make_pt2_zoo.py, under $(BUILD)/pt2/zoo; models
# already written are kept), each matched against torch at batch 1 and 2 through a real kilnd
# (tests/pt2/run_pt2_zoo.py). ZOO_ONLY="resnet18 vgg11" runs just those.
test-zoo-pt2: build
	@KILN_PT2_GENERATOR=$(CURDIR)/tests/pt2/make_pt2_zoo.py KILN_PT2_ONLY='$(ZOO_ONLY)' \
	  scripts/make-pt2-fixtures.sh $(abspath $(BUILD))/pt2/sid $(abspath $(BUILD))/pt2/zoo
	@$(PYTHON) tests/pt2/run_pt2_zoo.py --bin $(BUILD)/bin --models $(BUILD)/pt2/zoo \
	  $(if $(ZOO_ONLY),--only $(shell echo $(ZOO_ONLY) | tr ' ' ','))

# The bundled example: a traced torchvision resnet18 (random weights), generated, never committed.
example-model: deps
	@test -f $(REPO)/resnet18/1/model.pt || $(PYTHON) scripts/make-example-model.py $(REPO)

serve: build example-model
	$(BUILD)/bin/kilnd --host 127.0.0.1 --port $(PORT) --model-repository $(REPO) \
	  --cache-dir var/cache --threads $(THREADS) --log-level info

# Kiln in process, Kiln through kilnd, libtorch (its best setting per model) and ONNX Runtime 1.21,
# side by side in one run, interleaved call by call (tests/bench/peer_bench.py). Needs root: ONNX
# Runtime runs in a Debian trixie chroot made on first use and cached, with the models, under
# $(BUILD)/peers. The pt2 column is Kiln on each model's torch.export archive (written with torch 2.14
# in the sid chroot the .pt2 tests use, $(BUILD)/pt2/sid). A quick subset: make bench BENCH_ARGS='--models resnet18 --batch 1 --rounds 5'
bench: build
	$(PYTHON) tests/bench/peer_bench.py --bin $(BUILD)/bin --work $(BUILD)/peers \
	  --export-chroot $(BUILD)/pt2/sid --threads $(THREADS) $(BENCH_ARGS)

# What kilnd adds to a batch-1 request over Kiln in process, through gRPC and through its local
# socket, both with the input in shared memory (tests/bench/overhead_bench.py; issue 14's 0.3 ms / 3%
# figure): 60 interleaved rounds per model, about 3 minutes; models shared with make bench.
bench-overhead: build
	$(PYTHON) tests/bench/overhead_bench.py --bin $(BUILD)/bin --work $(BUILD)/peers \
	  --threads $(THREADS) $(OVERHEAD_ARGS)

# Closed-loop clients on loopback at concurrency 1, 4, 16 and 64 against an MLP, mobilenet_v2 and a
# small BERT-shaped encoder, without and with dynamic batching (tests/bench/load_bench.py): requests/s,
# p50/p90/p99, errors; three interleaved rounds of 2 s per point, the figures from their medians. About 5
# minutes; models cached under $(BUILD)/bench-load. A quicker run: make bench-load LOAD_ARGS='--models mlp --rounds 1'
bench-load: build
	$(PYTHON) tests/bench/load_bench.py --bin $(BUILD)/bin --work $(BUILD)/bench-load \
	  --threads $(THREADS) $(LOAD_ARGS)

# Builds the container image with Podman, runs it, uploads and infers through it.
test-container: deps
	BUILD=$(BUILD) scripts/test-container.sh

# Runs deploy/compose.yaml with podman-compose (COMPOSE_ENGINE=docker: Docker and docker-compose), the image
# made from this build's binaries: health check, curl upload and inference (against PyTorch), metrics, the
# named volumes across down / up.
COMPOSE_ENGINE ?= podman
test-compose: configure
	@cmake --build $(BUILD) -j $(JOBS) --target kilnd kiln kiln-torch-worker
	BUILD=$(BUILD) COMPOSE_ENGINE=$(COMPOSE_ENGINE) scripts/test-compose.sh

clean:
	rm -rf $(BUILD)
