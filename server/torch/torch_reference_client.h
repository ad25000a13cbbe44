// kilnd's side of the verified import's libtorch half (verify::TorchReference):
// the uploaded program runs in the sandboxed worker child
// (import_worker.h, ReferenceInChildProcess) under the import's memory limit
// and what is left of the load's time, never in kilnd. Samples go to the
// child in a request file, libtorch's outputs come back as tensors
// (torch_reference_codec.h); the comparing stays in kilnd (engine/verify).
#pragma once

#include <chrono>
#include <string>

#include "engine/verify/verify.h"
#include "server/torch/import_worker.h"

namespace kiln::server {

class ChildTorchReference : public verify::TorchReference {
 public:
  // `scratch_dir` holds the request and answer files while a run lasts;
  // `deadline` bounds every run (limits.timeout_s is recomputed from it).
  ChildTorchReference(std::string worker_binary, std::string model_path, std::string scratch_dir,
                      ImportLimits limits, std::chrono::steady_clock::time_point deadline);

  absl::StatusOr<verify::ReferenceResult> Run(const verify::ReferenceRequest& request) override;

 private:
  std::string worker_binary_, model_path_, scratch_dir_;
  ImportLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
};

// In the calling process, through torch_backend.h: only for servers without
// a worker program (tests and tools that link libtorch; never kilnd).
class InProcessTorchReference : public verify::TorchReference {
 public:
  explicit InProcessTorchReference(std::string model_bytes) : bytes_(std::move(model_bytes)) {}
  absl::StatusOr<verify::ReferenceResult> Run(const verify::ReferenceRequest& request) override;

 private:
  std::string bytes_;
};

}  // namespace kiln::server
