#include "server/core/import_checks.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/exported_program_importer.h"
#include "server/core/model_repository.h"
#include "server/torch/torch_backend.h"

namespace kiln::server {

absl::Status CheckStrict(const ir::Graph& graph, const ModelConfig& config) {
  if (!config.strict) return absl::OkStatus();
  const std::vector<std::string> ops = torch::FallbackOps(graph);
  if (ops.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("unsupported ops: ", absl::StrJoin(ops, ", "),
                                               " (the config is strict, so they may not run "
                                               "through the libtorch fallback)"));
}

namespace {

// A verified import stopped by the bounds of its runs (RunOptions): the
// load's deadline, the server stopping, the per-request memory limit.
bool IsRunBound(const absl::Status& s) {
  return absl::IsDeadlineExceeded(s) || absl::IsCancelled(s) || absl::IsResourceExhausted(s);
}

// The reference of a torch.export archive: the program evaluated node by
// node through libtorch's operators in kiln-torch-worker
// (engine/fallback/export_reference.h). A .pt2 serves without libtorch, so
// where the worker cannot run, verification is skipped saying so instead of
// failing the load.
class ExportReference : public verify::TorchReference {
 public:
  explicit ExportReference(verify::TorchReference& inner) : inner_(inner) {}
  absl::StatusOr<verify::ReferenceResult> Run(const verify::ReferenceRequest& request) override {
    absl::StatusOr<verify::ReferenceResult> result = inner_.Run(request);
    if (!absl::IsFailedPrecondition(result.status())) return result;
    verify::ReferenceResult skipped;
    skipped.unavailable = absl::StrCat("it runs in libtorch, which this kilnd cannot run (",
                                       result.status().message(), ")");
    return skipped;
  }

 private:
  verify::TorchReference& inner_;
};

// The archive's sample inputs as the model's inputs, in order: positional
// ones first, then keyword ones by name, checked as a request's inputs are
// (Model::MatchInputs). Why not, when they do not fit.
absl::StatusOr<std::vector<runtime::RunValue>> SampleValues(
    const runtime::Model& model, const std::vector<std::pair<std::string, Tensor>>& samples) {
  std::vector<runtime::NamedTensor> named;
  size_t position = 0;
  for (const auto& [name, t] : samples) {
    if (!name.empty()) {
      named.push_back({name, t});
      continue;
    }
    if (position >= model.inputs().size()) {
      return absl::InvalidArgumentError("more samples than inputs");
    }
    named.push_back({model.inputs()[position++].name, t});
  }
  for (const runtime::TensorSpec& in : model.inputs()) {
    if (!in.list.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.list, "' is a tensor list"));
    }
  }
  ASSIGN_OR_RETURN(runtime::MatchedInputs matched, model.MatchInputs(named));
  return std::move(matched.args);
}

}  // namespace

absl::StatusOr<std::unique_ptr<runtime::Model>> CheckImport(
    const std::string& label, const std::string& model_path, const ModelConfig& config,
    std::unique_ptr<runtime::Model> model, verify::TorchReference& reference,
    const verify::ModelRebuilder& rebuild, bool verify, const runtime::RunOptions& run,
    std::string* verified_signature) {
  const std::vector<std::string> fallback_ops = torch::FallbackOps(model->graph());
  if (!fallback_ops.empty()) {
    spdlog::info("{}: ops running through the libtorch fallback: {}", label,
                 absl::StrJoin(fallback_ops, ", "));
  }
  std::string verify_text = "disabled by the load config";
  if (config.verify.enabled && !verify) {
    verify_text = "skipped: graph read from the disk cache (verified when first imported)";
  }
  verify::VerifyReport report;
  // Told from the zip's directory: reading the whole file here held a
  // second copy of the model's bytes through the verification.
  const bool exported = IsExportArchiveFile(model_path);
  if (config.verify.enabled && verify) {
    verify::VerifyOptions options;
    options.tolerance = config.precision == Precision::kBf16
                            ? std::max(config.verify.tolerance, kBf16Tolerance)
                            : config.verify.tolerance;
    // Kiln's side of the comparison runs the plan the model serves.
    options.compile.precision = config.precision;
    options.samples = config.verify.inputs;
    // An input of open dtype takes what a request brings; the sample, unless
    // the config gives one, uses PyTorch's default dtype.
    for (const runtime::TensorSpec& in : model->inputs()) {
      if (in.dtype != DType::kUnknown) continue;
      bool given = false;
      for (runtime::TensorSpec& sample : options.samples) {
        if (sample.name != in.name) continue;
        given = true;
        if (sample.dtype == DType::kUnknown) sample.dtype = DType::kF32;
      }
      if (!given) options.samples.push_back(runtime::TensorSpec{in.name, DType::kF32});
    }
    options.fallback_on_mismatch = config.verify.fallback_on_mismatch ? 4 : 0;
    options.run = run;
    ExportReference export_reference(reference);
    if (exported && config.verify.inputs.empty()) {
      // The archive's own sample inputs (what the program was exported with:
      // real token ids, masks, images) rather than samples made up from the
      // contract, where they fit it; shapes the config gives win.
      // Read here by the importer's own reader (which runs nothing, as the
      // import itself), not by a libtorch worker: a process start less.
      absl::StatusOr<std::shared_ptr<const MappedFile>> file = MappedFile::Open(model_path);
      absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> samples =
          file.ok() ? importer::ExportedProgramSampleInputs(
                          std::string_view((*file)->data(), (*file)->size()))
                    : file.status();
      if (samples.ok()) {
        absl::StatusOr<std::vector<runtime::RunValue>> values = SampleValues(*model, *samples);
        if (values.ok()) {
          options.values = *std::move(values);
          options.values_source = "the archive's sample inputs";
        } else {
          spdlog::info("{}: the archive's sample inputs do not fit the model ({}); verifying on "
                       "samples made from its contract",
                       label, std::string(values.status().message()));
        }
      }
    }
    absl::StatusOr<verify::VerifiedModel> verified =
        verify::VerifyModel(exported ? export_reference : reference, config.import,
                            std::move(model), rebuild, options);
    if (!verified.ok()) {
      spdlog::warn("{}: {}", label, std::string(verified.status().message()));
      if (IsRunBound(verified.status())) {
        return Annotate(verified.status(), "verified import: ");
      }
      return verified.status();
    }
    model = std::move(verified->model);
    report = std::move(verified->report);
    verify_text = report.Summary();
    if (exported) {
      absl::StrAppend(&verify_text, " (reference: the ExportedProgram evaluated node by node "
                                    "through libtorch 1.13's operators)");
    }
    if (verified_signature != nullptr && !report.skipped && report.passed) {
      *verified_signature = runtime::SignatureKey(report.signature);
    }
    spdlog::info("{}: verified import {}", label, verify_text);
  }
  model->set_property("fallback_ops", absl::StrJoin(torch::FallbackOps(model->graph()), ","));
  model->set_property("accumulation",
                      config.accumulate_float64
                          ? "float64 (float32 convolutions, matmuls and linear layers accumulate "
                            "in double)"
                          : "float32");
  std::string precision = config.precision == Precision::kBf16
                              ? "bf16 (convolutions and linear layers: bfloat16 operands, float32 "
                                "accumulation; see verify.max_abs_diff.*)"
                              : "fp32";
  if (!config.precision_note.empty()) {
    absl::StrAppend(&precision, " [", config.precision_note, "]");
    spdlog::info("{}: precision {}", label, precision);
  }
  model->set_property("precision", precision);
  model->set_property("verify", verify_text);
  for (const verify::OutputCheck& o : report.outputs) {
    model->set_property(absl::StrCat("verify.max_abs_diff.", o.name),
                        absl::StrFormat("%.3g", o.max_abs_diff));
  }
  if (!report.forced_fallback.empty()) {
    model->set_property("verify.fallback_ops", absl::StrJoin(report.forced_fallback, ","));
  }
  return model;
}

}  // namespace kiln::server
