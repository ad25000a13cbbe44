// Tensors as text for `kiln infer`: inline input values on the command line,
// and small outputs printed as a table.
//
// An --input is NAME=FILE.npy or NAME=VALUES[:DTYPE][:SHAPE]:
//   x=1,2,3              three values; datatype and shape from the model's metadata
//   x=1,2,3,4:2x2        an explicit shape (dims joined by 'x')
//   x=[[1,2],[3,4]]      nested brackets give the shape, like a NumPy literal
//   n=7:INT64            an explicit datatype (Open Inference Protocol names)
// DTYPE and SHAPE may come in either order. Without them, the model's
// declared datatype is used (FP32 when it declares none) and the shape is the
// declared one when the value count fills it in exactly one way, else [N].
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/inference_client.h"
#include "engine/common/tensor.h"

namespace kiln::cli {

struct InputArg {
  std::string name;
  std::string npy_file;             // set for NAME=FILE.npy
  std::vector<std::string> values;  // inline values, in row-major order
  std::optional<Dims> nested_dims;  // from brackets
  std::optional<DType> dtype;       // from ':DTYPE'
  std::optional<Dims> shape;        // from ':SHAPE'
};

// Parses one --input argument. A value ending in ".npy" is a file. Errors
// (InvalidArgument) quote the argument and say what was expected.
absl::StatusOr<InputArg> ParseInputArg(const std::string& arg);

// Builds the tensor for an inline InputArg; `declared` is the model's
// metadata for this input (nullptr when unknown).
absl::StatusOr<Tensor> MakeInlineTensor(const InputArg& input,
                                        const client::TensorMetadata* declared);

// An FP32 tensor rounded to BF16 (nearest even): a float32 .npy for a BF16
// input, since NumPy has no bfloat16.
Tensor RoundToBF16(const Tensor& f32);

// "NAME  DTYPE  [dims]" followed by the values as a table: the last dim runs
// across (in chunks of `columns`), every other index down, one "[i, j]" row
// label per row.
std::string FormatTable(const std::string& name, const Tensor& tensor, int columns = 8);

// One line for an output too large to print: count, min, max, mean, argmax.
std::string FormatSummary(const std::string& name, const Tensor& tensor);

}  // namespace kiln::cli
