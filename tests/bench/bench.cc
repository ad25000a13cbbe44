// kiln-bench: the native side of `make bench` (tests/bench/peer_bench.py drives it).
//
//   kiln-bench --worker kiln  --model M.pt|M.pt2 --threads N [--precision bf16] [--pin-threads M]
//   kiln-bench --worker torch --model M.pt --threads N [--blas-threads B]
//   kiln-bench --worker kilnd --server HOST:PORT --model NAME [--shared-memory] [--local-socket P]
//   kiln-bench --sgemm-peak --threads N
//
// A worker loads one TorchScript file once, prints "ready", then answers commands on stdin, one
// per line, so a coordinator can interleave several engines (each in its own process: its own
// thread pools and its own peak RSS) call by call:
//   input DTYPE D0,D1,... PATH   the input from now on: raw little-endian bytes (f32 or i64)
//   run                          one call, timed; prints the elapsed milliseconds
//   save PATH                    one call; writes the first output as raw float32, prints "ok"
//   profile PATH                 (kiln worker) one call under Kiln's profiler; writes its table
// Errors print "error: ..." and exit 1.
//
// The kiln worker runs the model on Kiln's engine only (kiln::runtime::Model, no libtorch
// fallback): libtorch only reads the TorchScript file in the importer, as kilnd's import child
// does, and the peak RSS is reset after that (/proc/self/clear_refs), so VmHWM is the serving
// engine's. The torch worker runs the frozen module (torch::jit::freeze) with ATen's OpenMP pool at
// --threads and OpenBLAS at --blas-threads; libgomp's wait policy comes from OMP_WAIT_POLICY.
//
// The kilnd worker is a client: each call is one ModelInfer of the served model NAME over gRPC through
// Kiln's C++ client library (client/inference_client.h), timed here like the in-process engines, so
// the kilnd column carries transport and serving but no interpreter's overhead. --local-socket sends
// the calls over kilnd's local socket instead (proto/local/local_wire.h).
//
// --sgemm-peak prints the machine's single-precision GEMM rate at --threads: a large square
// cblas_sgemm through OpenBLAS and, when libdnnl.so.2 loads, oneDNN's dnnl_sgemm (best of a few).
#include <ATen/Parallel.h>
#include <cblas.h>
#include <dlfcn.h>
#include <unistd.h>
#include <torch/script.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "client/inference_client.h"
#include "client/shared_memory.h"
#include "engine/importer/export/exported_program_importer.h"
#include "engine/importer/import.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/kernels/thread_binding.h"
#include "engine/runtime/model.h"
#include "engine/runtime/profiler.h"

extern "C" void openblas_set_num_threads(int);

namespace {

[[noreturn]] void Fail(const std::string& message) {
  std::printf("error: %s\n", message.c_str());
  std::fflush(stdout);
  std::exit(1);
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Fail("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The input of the current batch size: raw bytes, with dtype and shape.
struct Input {
  bool is_int64 = false;
  std::vector<int64_t> shape;
  std::string bytes;
};

Input ParseInput(std::istringstream& args) {
  Input in;
  std::string dtype, dims, path;
  args >> dtype >> dims >> path;
  if (dtype != "f32" && dtype != "i64") Fail("input dtype must be f32 or i64, got " + dtype);
  in.is_int64 = dtype == "i64";
  std::stringstream ds(dims);
  for (std::string d; std::getline(ds, d, ',');) in.shape.push_back(std::stoll(d));
  in.bytes = ReadFile(path);
  int64_t n = in.is_int64 ? 8 : 4;
  for (int64_t d : in.shape) n *= d;
  if (n != static_cast<int64_t>(in.bytes.size())) Fail("input size does not match its shape");
  return in;
}

void WriteFloats(const std::string& path, const float* data, int64_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), n * sizeof(float));
  if (!f) Fail("cannot write " + path);
}

// One engine behind the worker protocol.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual void SetInput(Input input) = 0;
  virtual void Run() = 0;
  virtual void Save(const std::string& path) = 0;
  // One call under Kiln's profiler, its table written to `path`; false where
  // the engine has no profiler.
  virtual bool Profile(const std::string& path) { return false; }
};

// An engine that takes Kiln tensors: the input wraps the bytes read (no
// copy); Run and Save call Infer, which each engine defines.
class KilnTensorEngine : public Engine {
 public:
  void SetInput(Input input) override {
    input_ = std::move(input);
    tensor_ = kiln::Tensor::Wrap(input_.is_int64 ? kiln::DType::kInt64 : kiln::DType::kF32,
                                 input_.shape, input_.bytes.data());
  }
  void Run() override { Infer(); }
  void Save(const std::string& path) override {
    kiln::Tensor out = Infer();
    if (out.dtype() != kiln::DType::kF32) Fail("output is not float32");
    WriteFloats(path, out.data<float>(), out.num_elements());
  }

 protected:
  virtual kiln::Tensor Infer() = 0;
  Input input_;
  kiln::Tensor tensor_;
};

class KilnEngine : public KilnTensorEngine {
 public:
  KilnEngine(const std::string& path, int threads, kiln::Precision precision,
             const std::vector<std::string>& disabled_passes) {
    // The format from the file's content, as kilnd tells it: a torch.export archive through
    // the export front, anything else as TorchScript.
    // The file's bytes are freed before the peak is reset below.
    auto graph = [&] {
      const std::string bytes = ReadFile(path);
      const kiln::importer::ModelFormat format = kiln::importer::DetectFormat(bytes);
      return format == kiln::importer::ModelFormat::kExportedProgram ||
                     format == kiln::importer::ModelFormat::kLegacyExportedProgram
                 ? kiln::importer::ImportExportedProgram(bytes)
                 : kiln::importer::ImportTorchScript(bytes);
    }();
    if (!graph.ok()) Fail("import: " + std::string(graph.status().message()));
    // From here on only Kiln's engine holds memory: count the peak from now.
    std::ofstream("/proc/self/clear_refs") << "5";
    kiln::runtime::ModelOptions opts;
    opts.compile.num_threads = threads;
    opts.compile.precision = precision;
    opts.compile.disabled_passes = disabled_passes;
    auto model = kiln::runtime::Model::Create(*std::move(graph), opts);
    if (!model.ok()) Fail(std::string(model.status().message()));
    model_ = *std::move(model);
  }
 private:
  kiln::Tensor Infer() override { return Infer({}); }
  kiln::Tensor Infer(const kiln::runtime::RunOptions& run) {
    auto out = model_->Infer({{model_->inputs()[0].name, tensor_}}, {}, run);
    if (!out.ok()) Fail(std::string(out.status().message()));
    return (*out)[0].tensor;
  }
  bool Profile(const std::string& path) override {
    kiln::runtime::Profiler profiler;
    kiln::runtime::RunOptions run;
    run.observer = &profiler;
    Infer(run);
    std::ofstream out(path);
    kiln::kernels::TensorInfo in;
    in.dtype = tensor_.dtype();
    in.dims = kiln::Dims(input_.shape.begin(), input_.shape.end());
    if (auto exe = model_->GetExecutable({in}); exe.ok()) {
      out << "arena (planned tensors and kernels' workspace): "
          << (*exe)->arena_bytes() / 1e6 << " MB\n";
    }
    out << profiler.Finish().FormatTable();
    return true;
  }
  std::unique_ptr<kiln::runtime::Model> model_;
};

class TorchEngine : public Engine {
 public:
  explicit TorchEngine(const std::string& path) {
    torch::jit::Module module = torch::jit::load(path);
    module.eval();
    module_ = torch::jit::freeze(module);
  }
  void SetInput(Input input) override {
    input_ = std::move(input);
    tensor_ = torch::from_blob(input_.bytes.data(), input_.shape,
                               input_.is_int64 ? torch::kInt64 : torch::kFloat32);
  }
  void Run() override { Infer(); }
  void Save(const std::string& path) override {
    at::Tensor out = Infer().contiguous();
    WriteFloats(path, out.data_ptr<float>(), out.numel());
  }

 private:
  at::Tensor Infer() {
    torch::NoGradGuard no_grad;
    return module_.forward({tensor_}).toTensor();
  }
  torch::jit::Module module_;
  Input input_;
  at::Tensor tensor_;
};

class KilndEngine : public KilnTensorEngine {
 public:
  KilndEngine(const std::string& server, const std::string& name, bool shared_memory,
              const std::string& local_socket)
      : name_(name), shared_memory_(shared_memory) {
    kiln::client::ClientOptions options;
    options.local_socket = local_socket;
    auto client = kiln::client::InferenceClient::Connect(server, options);
    if (!client.ok()) Fail(std::string(client.status().message()));
    client_ = *std::move(client);
    auto metadata = client_->Metadata(name_);
    if (!metadata.ok()) Fail(std::string(metadata.status().message()));
    if (metadata->inputs.empty()) Fail("the model has no inputs");
    input_name_ = metadata->inputs[0].name;
  }
  ~KilndEngine() override {
    if (buffer_) (void)client_->UnregisterSystemSharedMemory(region_);
  }
  // --shared-memory: the input is written once into a shared-memory object
  // registered with kilnd (the system shared-memory extension); each call
  // then names it instead of sending its bytes.
  void SetInput(Input input) override {
    KilnTensorEngine::SetInput(std::move(input));
    if (!shared_memory_) return;
    if (buffer_) {
      (void)client_->UnregisterSystemSharedMemory(region_);
      buffer_.reset();
    }
    region_ = "kiln-bench-" + std::to_string(getpid());
    auto buffer = kiln::client::SharedMemoryBuffer::Create("/" + region_, tensor_.byte_size());
    if (!buffer.ok()) Fail(std::string(buffer.status().message()));
    buffer_ = *std::move(buffer);
    std::memcpy(buffer_->data(), tensor_.raw_data(), tensor_.byte_size());
    absl::Status registered =
        client_->RegisterSystemSharedMemory(region_, buffer_->key(), 0, buffer_->size());
    if (!registered.ok()) Fail(std::string(registered.message()));
  }

 private:
  kiln::Tensor Infer() override {
    auto out = shared_memory_
                   ? client_->InferFromSharedMemory(
                         name_, {{input_name_, tensor_.dtype(), tensor_.dims(), region_, 0}})
                   : client_->Infer(name_, {{input_name_, tensor_}});
    if (!out.ok()) Fail(std::string(out.status().message()));
    return (*out)[0].tensor;
  }
  std::string name_, input_name_;
  bool shared_memory_;
  std::string region_;
  std::unique_ptr<kiln::client::SharedMemoryBuffer> buffer_;
  std::unique_ptr<kiln::client::InferenceClient> client_;
};

int ServeWorker(Engine& engine) {
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream args(line);
    std::string command;
    args >> command;
    if (command == "input") {
      engine.SetInput(ParseInput(args));
      std::printf("ok\n");
    } else if (command == "run") {
      const double t0 = NowMs();
      engine.Run();
      std::printf("%.4f\n", NowMs() - t0);
    } else if (command == "save") {
      std::string path;
      args >> path;
      engine.Save(path);
      std::printf("ok\n");
    } else if (command == "profile") {
      std::string path;
      args >> path;
      if (!engine.Profile(path)) Fail("this worker has no profiler");
      std::printf("ok\n");
    } else {
      Fail("unknown command: " + line);
    }
    std::fflush(stdout);
  }
  return 0;
}

// Best-of-`reps` GFLOP/s of a square n x n x n sgemm through `gemm`.
template <typename Gemm>
double SgemmRate(int n, int reps, Gemm gemm) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  gemm(n, a.data(), b.data(), c.data());  // warm-up: thread pools, page faults
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = NowMs();
    gemm(n, a.data(), b.data(), c.data());
    best = std::min(best, NowMs() - t0);
  }
  return 2.0 * n * n * n / (best * 1e6);
}

int SgemmPeak(int threads) {
  const int n = 2048, reps = 5;
  openblas_set_num_threads(threads);
  const double openblas = SgemmRate(n, reps, [](int n, const float* a, const float* b, float* c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  });
  std::printf("openblas %.1f\n", openblas);
  using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                            const float*, int64_t, float, float*, int64_t);
  void* dnnl = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  auto dnnl_sgemm = dnnl ? reinterpret_cast<DnnlSgemm>(dlsym(dnnl, "dnnl_sgemm")) : nullptr;
  if (dnnl_sgemm) {
    const double onednn = SgemmRate(n, reps, [&](int n, const float* a, const float* b, float* c) {
      if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != 0) Fail("dnnl_sgemm");
    });
    std::printf("onednn %.1f\n", onednn);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // As kilnd and the kiln CLI: gRPC's locks are not to pay Debian's debug-built
  // Abseil deadlock detection in a timed client (server/app/main.cc says why).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"Kiln's benchmark worker (driven by tests/bench/peer_bench.py)"};
  std::string worker, model, server, local_socket;
  int threads = 1, blas_threads = 0;
  bool sgemm_peak = false, shared_memory = false;
  std::string precision = "fp32";
  app.add_option("--worker", worker, "serve one model with this engine")
      ->check(CLI::IsMember({"kiln", "torch", "kilnd"}));
  app.add_option("--model", model, "the TorchScript file (kilnd: the served model's name)");
  app.add_option("--server", server, "kilnd's address, host:port (--worker kilnd)");
  app.add_option("--threads", threads, "threads of the engine");
  app.add_option("--blas-threads", blas_threads, "OpenBLAS threads of the torch worker (default: --threads)");
  app.add_option("--precision", precision, "the kiln worker's plan precision")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  std::vector<std::string> disabled_passes;
  app.add_option("--disable-pass", disabled_passes,
                 "the kiln worker compiles without this pass (repeatable): what a pass wins");
  app.add_flag("--shared-memory", shared_memory,
               "kilnd worker: pass the input through a registered shared-memory region");
  app.add_option("--local-socket", local_socket,
                 "kilnd worker: infer over kilnd's local socket at this path instead of gRPC");
  app.add_flag("--sgemm-peak", sgemm_peak, "print the sgemm GFLOP/s at --threads and exit");
  std::string pin_threads = "auto";
  app.add_option("--pin-threads", pin_threads,
                 "kiln worker: pin its team of --threads threads to CPUs, as kilnd's "
                 "--pin-threads does (default auto, as kilnd's)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // OpenBLAS's pthread pool explicitly, as kilnd does; Kiln sizes its OpenMP team per call from
  // its compile options, libtorch's is set here for the torch worker and the sgemm peak.
  openblas_set_num_threads(threads);
  if (sgemm_peak) {
    at::set_num_threads(threads);
    return SgemmPeak(threads);
  }
  if (worker.empty() || model.empty()) Fail("--worker and --model are needed (or --sgemm-peak)");
  std::unique_ptr<Engine> engine;
  if (worker == "kiln") {
    // The team kilnd's compute thread would have: the one compute thread's CPUs.
    const auto plan = kiln::kernels::PlanTeamCpus(
        1, threads, *kiln::kernels::ParseThreadPinning(pin_threads), kiln::kernels::AllowedCpus(),
        kiln::kernels::CpuQuotaCores());
    if (absl::Status pinned = kiln::kernels::PinTeam(plan[0]); !pinned.ok())
      Fail(std::string(pinned.message()));
    engine = std::make_unique<KilnEngine>(model, threads, *kiln::ParsePrecision(precision),
                                          disabled_passes);
  } else if (worker == "kilnd") {
    engine = std::make_unique<KilndEngine>(server, model, shared_memory, local_socket);
  } else {
    at::set_num_threads(threads);
    openblas_set_num_threads(blas_threads > 0 ? blas_threads : threads);
    engine = std::make_unique<TorchEngine>(model);
  }
  return ServeWorker(*engine);
}
