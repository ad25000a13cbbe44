// Verified import: before a model is served, run Kiln's imported graph and
// libtorch on the same sample inputs and compare every output. Past the
// tolerance, compare every intermediate value the two share (the outputs of
// forward()'s top-level torch nodes) and name the first node whose outputs
// diverge. Optionally, rebuild the model with each diverging op forced onto
// the libtorch fallback until it matches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/runtime/model.h"

namespace kiln::fallback {

struct VerifyOptions {
  // Float outputs pass when max|kiln - libtorch| <= tolerance * max|libtorch|
  // + 1e-6 (for BF16 and FP16 outputs, at least four units in the last place
  // of the type); integer and bool outputs must be equal.
  //
  // Two float32 computations of a deep network differ by their rounding
  // alone (the accumulation order of their convolutions) by about 1e-4 of the
  // output's magnitude: libtorch differs so from itself with oneDNN on and
  // off on fcn_resnet50. So a float output past the tolerance is judged
  // against libtorch's float64 result for the same model and samples: it
  // passes when Kiln is within the tolerance of that, or at most
  // kFloat64Margin times as far from it as libtorch's own float32 result. A
  // conversion bug puts Kiln far from both. (Two float32 GEMM orders alone
  // put resnet18's output 1.6e-6 and 1.0e-6 of its magnitude from float64:
  // oneDNN's blocked matmul against libtorch's; a margin of 2 still leaves
  // every conversion bug orders of magnitude out.)
  double tolerance = 1e-4;
  static constexpr double kFloat64Margin = 2.0;
  // Sample input shapes and dtypes by input name, overriding the model's
  // contract (needed where the contract leaves dims open that the model
  // fixes, e.g. a ViT's 224x224 image).
  std::vector<runtime::TensorSpec> samples;
  uint64_t seed = 0;
  // On divergence, re-import with the diverging op forced onto the fallback
  // (at most this many ops) instead of failing.
  int fallback_on_mismatch = 0;
  // Bounds Kiln's runs of the samples (the load's deadline, the memory
  // limit), which come before libtorch's; the samples count against its
  // memory. Past them, verification fails with their status.
  runtime::RunOptions run;
};

struct OutputCheck {
  std::string name;
  double max_abs_diff = 0;
  double max_abs_ref = 0;
  bool passed = true;
  std::string problem;  // a dtype or shape mismatch, when there is one
  // Set when the float64 reference judged the output (it was past the
  // tolerance): the relative distances max|x - ref64| / max|ref64| of Kiln's
  // and of libtorch's float32 results from libtorch's float64 result.
  std::optional<double> kiln_vs_float64, libtorch_vs_float64;
};

struct VerifyReport {
  // Verification did not run (no sample could be made, or libtorch rejected
  // the sample); the reason says why. Not a failure.
  bool skipped = false;
  std::string skip_reason;
  std::vector<OutputCheck> outputs;
  bool passed = true;
  // The first diverging node, as "node 12 (aten::gelu) output %x: max |diff|
  // 0.31 (max |ref| 2.1)", and its kind; empty when all outputs passed.
  std::string divergence;
  std::string divergent_op;
  // Why the float64 reference could not judge, when it was needed but the
  // model does not run in float64 (a float32 dtype written into its code).
  std::string float64_problem;
  // Ops the model now runs through the fallback to pass (fallback_on_mismatch).
  std::vector<std::string> forced_fallback;
  // The sample inputs as "x=FP32[1, 3, 224, 224]".
  std::string samples;

  // One line: "passed: output0 max |diff| 1.2e-06" / "FAILED: ..." / "skipped: ...".
  std::string Summary() const;
};

// Builds the model to serve from an import (the server's own steps: names
// from the config, contract, executable cache).
using ModelBuilder = std::function<absl::StatusOr<std::unique_ptr<runtime::Model>>(ir::Graph)>;

struct VerifiedModel {
  std::unique_ptr<runtime::Model> model;  // the one to serve
  VerifyReport report;
};

// Verifies `model` (imported from `model_bytes` with `import`) against
// libtorch. When it diverges and options.fallback_on_mismatch allows, the
// file is imported again with the diverging op forced onto the fallback,
// rebuilt with `build`, and verified again. Fails with InvalidArgument naming
// the first diverging node when the model (still) diverges; a skipped
// verification is not a failure. libtorch errors are caught.
absl::StatusOr<VerifiedModel> VerifyModel(std::string_view model_bytes,
                                          const importer::ImportOptions& import,
                                          std::unique_ptr<runtime::Model> model,
                                          const ModelBuilder& build,
                                          const VerifyOptions& options);

// One verification, without the fallback retries: the report (passed or not).
absl::StatusOr<VerifyReport> VerifyOnce(std::string_view model_bytes,
                                        const importer::ImportOptions& import,
                                        const runtime::Model& model,
                                        const VerifyOptions& options);

}  // namespace kiln::fallback
