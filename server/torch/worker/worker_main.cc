// kiln-torch-worker: the one program that links libtorch. kilnd starts it
// (fork + exec, server/torch/import_worker.h, StartWorkerProcess) for each piece of
// work that runs libtorch on an untrusted file, one role per process:
//   kiln-torch-worker --import-worker ...    a TorchScript import, or the
//       verified import's reference run (import_worker.h, ImportWorkerMain)
//   kiln-torch-worker --fallback-worker ...  a model's libtorch fallback ops
//       (torch/fallback_worker.h, FallbackWorkerMain)
// libtorch and torchvision's operators load before the worker limits its
// address space and enters its sandbox (server/security/sandbox.h), which then opens
// no file.
//
// libtorch's warnings (TORCH_WARN: deprecations, fallback ops' own notices)
// would go straight to stderr; they go through spdlog instead, one event per
// line, which kilnd reads back into its own log. libtorch keeps the handler
// per thread: every role runs libtorch on the main thread, where it is set.
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "engine/fallback/torch_extensions.h"
#include "server/torch/import_worker.h"
#include "server/torch/fallback_worker.h"

namespace {

class LogWarnings : public c10::WarningHandler {
 public:
  void process(const c10::SourceLocation& where, const std::string& msg,
               const bool verbatim) override {
    if (verbatim) {
      spdlog::warn("libtorch: {}", msg);
    } else {
      spdlog::warn("libtorch: {} ({}:{})", msg, where.file, where.line);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  if (role != "--import-worker" && role != "--fallback-worker") {
    std::fprintf(stderr,
                 "kiln-torch-worker runs libtorch for kilnd, which starts it:\n"
                 "  kiln-torch-worker --import-worker MODEL_FILE KEY MEMORY_BYTES "
                 "SANDBOX_ROOT|off NAMESPACES JOB\n"
                 "  kiln-torch-worker --fallback-worker MEMORY_BYTES SANDBOX_ROOT|off "
                 "NAMESPACES THREADS\n");
    return 2;
  }
  static LogWarnings warnings;
  c10::Warning::set_warning_handler(&warnings);
  // Before any import or sandbox: a model may call torchvision's operators.
  kiln::fallback::LoadTorchVisionOps();
  if (role == "--import-worker") return kiln::server::ImportWorkerMain(argc, argv);
  return kiln::server::FallbackWorkerMain(argc, argv);
}
