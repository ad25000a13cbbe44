#include "server/core/model_warmup.h"

#include <cstring>
#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"
#include "engine/verify/sample_tensor.h"
#include "server/scheduler/batch_planner.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

// Triton keeps warm-up data files in the model directory's "warmup" folder.
constexpr char kWarmupDir[] = "warmup";

std::string Where(const WarmupSample& sample, const WarmupInput& input) {
  return absl::StrCat("model_warmup sample '", sample.name, "', input '", input.name, "'");
}

// The file of `input`, which must resolve (symlinks followed) inside the
// model's warmup folder: the config checked the spelling, this the target.
absl::StatusOr<std::string> ReadSampleFile(const std::string& model_dir, const std::string& file,
                                           const std::string& where) {
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::path(model_dir) / kWarmupDir, ec);
  const fs::path path = ec ? fs::path() : fs::weakly_canonical(dir / file, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cannot resolve input_data_file '", file, "': ", ec.message()));
  }
  const fs::path relative = path.lexically_relative(dir);
  if (relative.empty() || *relative.begin() == "..") {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": input_data_file '", file, "' resolves outside the model's ", kWarmupDir,
        " directory"));
  }
  if (!fs::is_regular_file(path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": input_data_file '", file, "' is not a file in the model's ", kWarmupDir,
        " directory"));
  }
  return cache::ReadFileToString(path.string());
}

absl::StatusOr<Tensor> MakeInput(const WarmupSample& sample, const WarmupInput& input,
                                 const ModelConfig& config, const std::string& model_dir,
                                 const runtime::RunOptions& run, std::mt19937_64& rng) {
  const std::string where = Where(sample, input);
  Dims dims;
  // Triton's dims leave out the batch dim of a model that batches.
  if (config.max_batch_size > 0) dims.push_back(sample.batch_size);
  dims.insert(dims.end(), input.dims.begin(), input.dims.end());
  switch (input.source) {
    case WarmupInput::Source::kRandom:
      return verify::SampleTensor(input.dtype, dims, rng, where, run.memory);
    case WarmupInput::Source::kZero:
      return Tensor::Allocate(input.dtype, dims, where, run.memory);
    case WarmupInput::Source::kFile: {
      ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(input.dtype, dims, where, run.memory));
      ASSIGN_OR_RETURN(std::string bytes, ReadSampleFile(model_dir, input.file, where));
      if (bytes.size() != t.byte_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": input_data_file '", input.file, "' holds ", bytes.size(),
            " bytes, the sample's shape and data_type need ", t.byte_size()));
      }
      if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
      return t;
    }
  }
  return absl::InternalError("unknown warm-up source");
}

// `t` with `rows` rows on dim 0, its own rows repeated in turn.
absl::StatusOr<Tensor> WithRows(const Tensor& t, int64_t rows, const std::string& where,
                                const runtime::RunOptions& run) {
  Dims dims = t.dims();
  dims[0] = rows;
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), dims, where, run.memory));
  const size_t row_bytes = t.dim(0) > 0 ? t.byte_size() / static_cast<size_t>(t.dim(0)) : 0;
  CopyRowsCycling(t.raw_data(), t.dim(0), row_bytes, rows, out.raw_data());
  return out;
}

}  // namespace

absl::StatusOr<uint64_t> RunWarmup(const runtime::Model& model, const ModelConfig& config,
                                   const std::string& model_dir, const runtime::RunOptions& run) {
  uint64_t runs = 0;
  std::mt19937_64 rng(0);  // the same random samples at every load
  for (const WarmupSample& sample : config.warmup) {
    std::vector<runtime::NamedTensor> inputs;
    for (const WarmupInput& input : sample.inputs) {
      ASSIGN_OR_RETURN(Tensor t, MakeInput(sample, input, config, model_dir, run, rng));
      inputs.push_back({input.name, std::move(t)});
    }
    for (uint64_t i = 0; i < sample.count; ++i) {
      absl::StatusOr<std::vector<runtime::NamedTensor>> outputs = model.Infer(inputs, {}, run);
      if (!outputs.ok()) {
        return absl::Status(outputs.status().code(),
                            absl::StrCat("model_warmup sample '", sample.name,
                                         "' failed: ", outputs.status().message()));
      }
      ++runs;
    }
    // A model that batches runs its joined batches at its allowed sizes
    // (batch_planner.h): each is compiled here too, on the sample's rows, so
    // that no batch pays a compile either.
    if (config.dynamic_batching.has_value() && config.max_batch_size > 0 &&
        sample.batch_size > 0) {
      const std::vector<int64_t> sizes = AllowedBatchSizes(
          config.dynamic_batching->allowed_batch_sizes,
          config.dynamic_batching->preferred_batch_size,
          BatchRowsBound(model.inputs(), config.max_batch_size));
      for (int64_t size : sizes) {
        if (size == sample.batch_size) continue;
        std::vector<runtime::NamedTensor> batch;
        for (const runtime::NamedTensor& input : inputs) {
          ASSIGN_OR_RETURN(Tensor t, WithRows(input.tensor, size, input.name, run));
          batch.push_back({input.name, std::move(t)});
        }
        absl::StatusOr<std::vector<runtime::NamedTensor>> outputs = model.Infer(batch, {}, run);
        if (!outputs.ok()) {
          return absl::Status(outputs.status().code(),
                              absl::StrCat("model_warmup sample '", sample.name, "' at batch size ",
                                           size, " (an allowed batch size) failed: ",
                                           outputs.status().message()));
        }
        ++runs;
      }
    }
  }
  return runs;
}

}  // namespace kiln::server
