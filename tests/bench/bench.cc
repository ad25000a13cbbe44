// Side-by-side latency of Kiln's engine and libtorch on the same TorchScript
// files, in one process, with the same thread count.
//
// Both engines run the same input, interleaved (Kiln, pause, libtorch, pause)
// after a warm-up, so machine noise hits both alike; the figure to read is the
// ratio of medians, not the absolute times. Thread pools are set explicitly:
// ATen's OpenMP pool and OpenBLAS's pthread pool both get --threads.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "engine/fallback/fallback.h"
#include "engine/importer/torchscript_importer.h"
#include "engine/runtime/model.h"

extern "C" void openblas_set_num_threads(int);

namespace {

struct Case {
  std::string name;
  std::vector<int64_t> shape;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Now() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int RunCase(const std::string& dir, const Case& c, int threads, int iters, double pause_ms) {
  const std::string path = dir + "/" + c.name + ".pt";
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "%-14s missing %s\n", c.name.c_str(), path.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();

  auto graph = kiln::importer::ImportTorchScript(bytes);
  if (!graph.ok()) {
    std::fprintf(stderr, "%-14s import failed: %s\n", c.name.c_str(),
                 std::string(graph.status().message()).c_str());
    return 1;
  }
  kiln::runtime::ModelOptions opts;
  opts.compile.num_threads = threads;
  auto model = kiln::runtime::Model::Create(*std::move(graph), opts);
  if (!model.ok()) {
    std::fprintf(stderr, "%-14s %s\n", c.name.c_str(), std::string(model.status().message()).c_str());
    return 1;
  }

  torch::NoGradGuard no_grad;
  torch::jit::Module module = torch::jit::load(path);
  module.eval();
  torch::jit::Module frozen = torch::jit::freeze(module);

  torch::manual_seed(0);
  at::Tensor input = torch::rand(c.shape);
  kiln::Tensor kin = kiln::Tensor::Wrap(kiln::DType::kF32, c.shape, input.data_ptr<float>());
  const std::string in_name = (*model)->inputs()[0].name;

  auto run_kiln = [&] {
    auto out = (*model)->Infer({{in_name, kin}}, {});
    if (!out.ok()) {
      std::fprintf(stderr, "kiln: %s\n", std::string(out.status().message()).c_str());
      std::exit(1);
    }
    return (*out)[0].tensor;
  };
  auto run_torch = [&] { return frozen.forward({input}).toTensor(); };

  // Warm-up, and a parity check so a fast wrong answer cannot pass unnoticed.
  kiln::Tensor k = run_kiln();
  at::Tensor t = run_torch().contiguous();
  double max_diff = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(k.data<float>()[i]) - t.data_ptr<float>()[i]));
  }
  for (int i = 0; i < 3; ++i) {
    run_kiln();
    run_torch();
  }
  std::vector<double> kt, tt;
  for (int i = 0; i < iters; ++i) {
    double t0 = Now();
    run_kiln();
    kt.push_back(Now() - t0);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms));
    t0 = Now();
    run_torch();
    tt.push_back(Now() - t0);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms));
  }
  const double km = Median(kt), tm = Median(tt);
  std::printf("%-14s %10.3f %10.3f %8.2f %12.2e\n", c.name.c_str(), km, tm, km / tm, max_diff);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Kiln vs libtorch latency, same process, same threads"};
  std::string dir = "build/fixtures";
  int threads = 1, iters = 30;
  double pause_ms = 5;
  std::vector<std::string> only;
  app.add_option("--fixtures", dir, "directory with the fixture .pt files");
  app.add_option("--threads", threads, "threads for both engines (ATen OpenMP and OpenBLAS)");
  app.add_option("--iters", iters, "timed iterations per engine");
  app.add_option("--pause-ms", pause_ms, "gap between timed calls");
  app.add_option("--model", only, "only these models");
  CLI11_PARSE(app, argc, argv);

  at::set_num_threads(threads);
  openblas_set_num_threads(threads);
  kiln::fallback::InstallFallbackKernel(threads);

  const std::vector<Case> cases = {
      {"mlp", {1, 16}},
      {"resnet18", {1, 3, 224, 224}},
      {"mobilenet_v2", {1, 3, 224, 224}},
      {"shufflenet_v2_x0_5", {1, 3, 224, 224}},  // shapes computed at run time, folded
      {"shufflenet_v2_x1_0", {1, 3, 224, 224}},
      {"control_flow", {4, 8}},  // scripted if/for/while; select and stack fall back
  };
  std::printf("threads=%d iters=%d (batch 1, median ms)\n", threads, iters);
  std::printf("%-14s %10s %10s %8s %12s\n", "model", "kiln_ms", "torch_ms", "ratio", "max_abs_diff");
  int rc = 0;
  for (const Case& c : cases) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    rc |= RunCase(dir, c, threads, iters, pause_ms);
  }
  return rc;
}
