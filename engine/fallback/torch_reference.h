// The libtorch half of the verified import (engine/verify/verify.h): runs the
// uploaded TorchScript program on the samples through libtorch's interpreter
// (torch::jit::Code on the frozen, inlined graph the importer translates, so
// every torch value has a Kiln counterpart) and hands back plain tensors.
// The worker process runs it inside its sandbox (kilnd never does);
// LocalTorchReference runs it in the calling process, for tests and tools.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/verify/verify.h"

namespace kiln::fallback {

// Runs `request` on the program in `model_bytes`. libtorch's exceptions are
// caught: the samples' rejection becomes ReferenceResult::rejected, a
// failure of the float64 or traced run its float64_problem or
// trace_problem, any other InvalidArgument.
absl::StatusOr<verify::ReferenceResult> RunReference(std::string_view model_bytes,
                                                     const verify::ReferenceRequest& request);

class LocalTorchReference : public verify::TorchReference {
 public:
  explicit LocalTorchReference(std::string model_bytes) : bytes_(std::move(model_bytes)) {}
  absl::StatusOr<verify::ReferenceResult> Run(const verify::ReferenceRequest& request) override {
    return RunReference(bytes_, request);
  }

 private:
  std::string bytes_;
};

}  // namespace kiln::fallback
