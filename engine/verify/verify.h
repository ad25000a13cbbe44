// Verified import: before a model is served, run Kiln's imported graph and
// libtorch on the same sample inputs and compare every output. Past the
// tolerance, compare every intermediate value the two share (the outputs of
// forward()'s top-level torch nodes) and name the first node whose outputs
// diverge. Optionally, rebuild the model with each diverging op forced onto
// the libtorch fallback until it matches.
//
// This is the comparing half, and it needs no libtorch: the libtorch half
// (running the uploaded program on the samples) sits behind TorchReference,
// which kilnd implements by running the program in the sandboxed worker
// process (server/torch/torch_reference_client.h) and tests in process
// (engine/fallback/torch_reference.h). Only plain tensors cross: the samples
// go there, libtorch's outputs (and, when asked, its float64 outputs and the
// traced intermediate values) come back. Nothing calls back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/importer/import.h"
#include "engine/runtime/model.h"

namespace kiln::verify {

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
  // A request's own values, one per graph input (a tensor, or None for an
  // optional input left out), run instead of samples drawn from the contract:
  // verification on first use of a signature (no List[Tensor] inputs).
  std::optional<std::vector<runtime::RunValue>> values;
  // What `values` are, shown before them in the report ("the archive's
  // sample inputs"); empty: nothing.
  std::string values_source;
  // Kiln's outputs for `values`, from the plan that answered the request:
  // judged instead of compiling and running the same signature a second
  // time (the time and the second arena of a first use).
  std::optional<std::vector<runtime::RunValue>> kiln_outputs;
  // On divergence, re-import with the diverging op forced onto the fallback
  // (at most this many ops) instead of failing.
  int fallback_on_mismatch = 0;
  // Bounds Kiln's runs of the samples (the load's deadline, the memory
  // limit), which come before libtorch's; the samples count against its
  // memory. Past them, verification fails with their status.
  runtime::RunOptions run;
  // How Kiln's side compiles the samples' plan: the served model's precision
  // (a bf16 plan is judged as served, with its own tolerance).
  runtime::CompileOptions compile;
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
  // The sample inputs as "x=FP32[1, 3, 224, 224]", and their signature
  // (graph input order).
  std::string samples;
  std::vector<kernels::TensorInfo> signature;
  // libtorch's results for the samples, as ReferenceResult::outputs.
  std::vector<std::vector<Tensor>> reference_outputs;

  // One line: "passed: output0 max |diff| 1.2e-06" / "FAILED: ..." / "skipped: ...".
  std::string Summary() const;
};

// ------------------------------------------------------------ the libtorch half

// One argument of forward(): a tensor, a list of tensors, or an int, float
// or bool (a 0-dim INT64, FP64 or BOOL tensor with `scalar` set).
struct ReferenceInput {
  runtime::RunValue value;
  bool scalar = false;
};

struct ReferenceRequest {
  std::vector<ReferenceInput> inputs;
  // Also run the program in float64 (its parameters, buffers and float
  // inputs converted): the arbitration of VerifyOptions::tolerance.
  bool float64 = false;
  // Also import the program again with `import` and an import trace, and
  // return libtorch's value of every traced node output (TraceValue).
  bool trace = false;
  importer::ImportOptions import;
};

// One value of forward()'s top level, as libtorch computed it, and the ir
// value that stands for it in `ReferenceResult::trace_graph`.
struct TraceValue {
  int32_t value = -1;       // ir::ValueId in trace_graph
  std::string where;        // "node 12 (aten::gelu) output %x"
  std::string op;           // "aten::gelu"
  std::optional<Tensor> ref;  // none: not a tensor (not compared)
};

struct ReferenceResult {
  // Non-empty when libtorch rejected the samples (a fixed image size, a
  // value range): verification is skipped with this reason.
  std::string rejected;
  // Non-empty when there is no reference at all (no libtorch to run it; a
  // torch.export program with a node libtorch 1.13 cannot evaluate):
  // verification is skipped with this reason.
  std::string unavailable;
  // forward()'s results, each flattened: a tensor gives one, a list its
  // elements, an int/float/bool a 0-dim INT64/FP64/BOOL tensor, None none.
  std::vector<std::vector<Tensor>> outputs;
  // request.float64: the float64 run's results flattened in one list, or why
  // there are none.
  std::vector<Tensor> float64_outputs;
  std::string float64_problem;
  // request.trace: the re-imported graph and the traced values, in graph
  // order, or why there are none.
  std::optional<ir::Graph> trace_graph;
  std::vector<TraceValue> trace;
  std::string trace_problem;
};

// Runs the uploaded program through libtorch. Fails with InvalidArgument when
// libtorch fails on it (other than rejecting the samples), with
// ResourceExhausted or DeadlineExceeded when it runs past its limits.
class TorchReference {
 public:
  virtual ~TorchReference() = default;
  virtual absl::StatusOr<ReferenceResult> Run(const ReferenceRequest& request) = 0;
};

// ------------------------------------------------------------ verification

// Builds the model to serve from the file imported again with `import`
// (its force_fallback set): the server's own steps.
using ModelRebuilder = std::function<absl::StatusOr<std::unique_ptr<runtime::Model>>(
    const importer::ImportOptions& import)>;

struct VerifiedModel {
  std::unique_ptr<runtime::Model> model;  // the one to serve
  VerifyReport report;
};

// One verification of `model` (imported with `import`) against `reference`,
// without the fallback retries: the report (passed or not).
absl::StatusOr<VerifyReport> VerifyOnce(TorchReference& reference,
                                        const importer::ImportOptions& import,
                                        const runtime::Model& model,
                                        const VerifyOptions& options);

// Continues a verification whose `report` (of `import`) diverged: while it
// diverges and options.fallback_on_mismatch allows, rebuilds the model by
// `rebuild` with the diverging op forced onto the fallback and verifies it
// again. Returns the last model built (null when none was) and its report,
// passed or not.
absl::StatusOr<VerifiedModel> RepairWithFallback(TorchReference& reference,
                                                 const importer::ImportOptions& import,
                                                 VerifyReport report,
                                                 const ModelRebuilder& rebuild,
                                                 const VerifyOptions& options);

// Verifies `model`. When it diverges and options.fallback_on_mismatch allows,
// the model is rebuilt by `rebuild` with the diverging op forced onto the
// fallback and verified again. Fails with InvalidArgument naming the first
// diverging node when the model (still) diverges; a skipped verification is
// not a failure.
absl::StatusOr<VerifiedModel> VerifyModel(TorchReference& reference,
                                          const importer::ImportOptions& import,
                                          std::unique_ptr<runtime::Model> model,
                                          const ModelRebuilder& rebuild,
                                          const VerifyOptions& options);

}  // namespace kiln::verify
