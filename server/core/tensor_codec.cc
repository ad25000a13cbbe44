// Decoding follows the protocol's rules (see proto/inference/grpc_service.proto):
//  1. raw_input_contents[i] belongs to inputs[i]; when any raw content is sent,
//     every input must be raw and none may carry typed contents (Triton rejects
//     the mix the same way).
//  2. Typed data must sit in the one field of its datatype: fp32_contents for
//     FP32, int_contents for INT8/16/32 (widened), uint_contents for UINT8, ...
//     FP16 and BF16 have no typed field.
//  3. Counts are checked against the shape before anything is allocated, with
//     overflow-checked arithmetic, so a hostile shape cannot make us allocate.
#include "server/core/tensor_codec.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/common/status_macros.h"
#include "server/core/input_buffer_pool.h"
#include "server/core/request_parameters.h"

namespace kiln::server {
namespace {

using InputTensor = inference::ModelInferRequest::InferInputTensor;
using inference::InferTensorContents;

absl::Status InputError(const std::string& name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("input '", name, "': ", what));
}

// The element count of `shape`, rejecting negative dims and counts whose byte
// size would not fit in int64.
absl::StatusOr<Dims> DecodeShape(const InputTensor& input, size_t element_size) {
  Dims dims(input.shape().begin(), input.shape().end());
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return InputError(input.name(),
                        absl::StrCat("shape ", DimsToString(dims), " has a negative dimension"));
    }
    if (__builtin_mul_overflow(count, d, &count)) {
      return InputError(input.name(), absl::StrCat("shape ", DimsToString(dims), " is too large"));
    }
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(element_size), &bytes)) {
    return InputError(input.name(), absl::StrCat("shape ", DimsToString(dims), " is too large"));
  }
  return dims;
}

// Name and element count of every typed field, to find which ones carry data.
struct FieldCount {
  absl::string_view field;
  int size;
};

std::vector<FieldCount> FieldCounts(const InferTensorContents& c) {
  return {
      {"bool_contents", c.bool_contents_size()},     {"int_contents", c.int_contents_size()},
      {"int64_contents", c.int64_contents_size()},   {"uint_contents", c.uint_contents_size()},
      {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
      {"fp64_contents", c.fp64_contents_size()},     {"bytes_contents", c.bytes_contents_size()}};
}

bool HasTypedData(const InputTensor& input) {
  if (!input.has_contents()) return false;
  for (const FieldCount& f : FieldCounts(input.contents())) {
    if (f.size > 0) return true;
  }
  return false;
}

// The typed field that carries `dtype`; empty for FP16/BF16, which have none.
absl::string_view TypedField(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool_contents";
    case DType::kUInt8:
      return "uint_contents";
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      return "int_contents";
    case DType::kInt64:
      return "int64_contents";
    case DType::kF32:
      return "fp32_contents";
    case DType::kF64:
      return "fp64_contents";
    default:
      return "";
  }
}

// Copies `src` into a new tensor of element type T, rejecting values that do
// not fit T (8/16-bit integers travel widened to 32 bits).
template <typename T, typename Src>
absl::StatusOr<Tensor> CopyTyped(const InputTensor& input, DType dtype, Dims dims,
                                 const google::protobuf::RepeatedField<Src>& src) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, std::move(dims),
                                               absl::StrCat("input '", input.name(), "'")));
  T* out = t.data<T>();
  for (int i = 0; i < src.size(); ++i) {
    const Src v = src.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) < sizeof(Src)) {
      if (v < static_cast<Src>(std::numeric_limits<T>::min()) ||
          v > static_cast<Src>(std::numeric_limits<T>::max())) {
        return InputError(input.name(),
                          absl::StrCat("value ", v, " at index ", i, " is out of range for ",
                                       std::string(DTypeName(dtype))));
      }
    }
    out[i] = static_cast<T>(v);
  }
  return t;
}

absl::StatusOr<Tensor> DecodeTyped(const InputTensor& input, DType dtype, Dims dims) {
  const absl::string_view expected_field = TypedField(dtype);
  if (expected_field.empty()) {
    return InputError(input.name(), absl::StrCat(std::string(DTypeName(dtype)),
                                                 " data must be sent in raw_input_contents"
                                                 " (the protocol has no typed field for it)"));
  }
  const int64_t expected = NumElements(dims);
  const InferTensorContents& c = input.contents();
  for (const FieldCount& f : FieldCounts(c)) {
    if (f.size > 0 && f.field != expected_field) {
      return InputError(input.name(), absl::StrCat("datatype ", std::string(DTypeName(dtype)),
                                                   " expects ", expected_field, ", got ", f.field));
    }
    if (f.field == expected_field && f.size != expected) {
      return InputError(input.name(),
                        absl::StrCat("shape ", DimsToString(dims), " needs ", expected,
                                     " values in ", expected_field, ", got ", f.size));
    }
  }
  switch (dtype) {
    case DType::kBool:
      return CopyTyped<bool>(input, dtype, std::move(dims), c.bool_contents());
    case DType::kUInt8:
      return CopyTyped<uint8_t>(input, dtype, std::move(dims), c.uint_contents());
    case DType::kInt8:
      return CopyTyped<int8_t>(input, dtype, std::move(dims), c.int_contents());
    case DType::kInt16:
      return CopyTyped<int16_t>(input, dtype, std::move(dims), c.int_contents());
    case DType::kInt32:
      return CopyTyped<int32_t>(input, dtype, std::move(dims), c.int_contents());
    case DType::kInt64:
      return CopyTyped<int64_t>(input, dtype, std::move(dims), c.int64_contents());
    case DType::kF32:
      return CopyTyped<float>(input, dtype, std::move(dims), c.fp32_contents());
    case DType::kF64:
      return CopyTyped<double>(input, dtype, std::move(dims), c.fp64_contents());
    default:
      break;
  }
  return absl::InternalError(absl::StrCat("no typed decoder for ", std::string(DTypeName(dtype))));
}

// Kernels may rely on bools being exactly 0 or 1; raw bytes can be anything.
void NormalizeBools(Tensor& t) {
  if (t.dtype() != DType::kBool) return;
  uint8_t* p = t.data<uint8_t>();
  for (size_t i = 0; i < t.byte_size(); ++i) p[i] = p[i] != 0;
}

// Allocated, never assumed: whatever a client sends, a failure is a status.
// Uninitialized: the caller writes every byte.
absl::StatusOr<Tensor> AllocateInput(const InputTensor& input, DType dtype, Dims dims) {
  return InputBufferPool::ForRequests().Allocate(dtype, std::move(dims),
                                                 absl::StrCat("input '", input.name(), "'"));
}

// `raw` is one raw_input_contents entry: the concatenation of its pieces.
absl::StatusOr<Tensor> DecodeRaw(const InputTensor& input, DType dtype, Dims dims,
                                 absl::Span<const absl::string_view> raw) {
  const size_t expected = static_cast<size_t>(NumElements(dims)) * DTypeSize(dtype);
  size_t got = 0;
  for (absl::string_view piece : raw) got += piece.size();
  if (got != expected) {
    return InputError(input.name(),
                      absl::StrCat("raw_input_contents holds ", got, " bytes, expected ",
                                   expected, " (shape ", DimsToString(dims), " x ",
                                   DTypeSize(dtype), "-byte ", std::string(DTypeName(dtype)), ")"));
  }
  ASSIGN_OR_RETURN(Tensor t, AllocateInput(input, dtype, std::move(dims)));
  uint8_t* to = static_cast<uint8_t*>(t.raw_data());
  for (absl::string_view piece : raw) {
    if (piece.empty()) continue;
    std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
  NormalizeBools(t);
  return t;
}

using Params = google::protobuf::Map<std::string, inference::InferParameter>;

constexpr char kRegionParam[] = "shared_memory_region";

uint64_t CountParam(const Params& params, const char* name) {
  auto it = params.find(name);
  return it == params.end() ? 0 : CountParameter(it->second);
}

// Where the bytes a tensor's shared-memory parameters name lie: their region
// and offset in it, checked to hold `expected` bytes (`at_least`: or more).
absl::StatusOr<uint64_t> SharedMemoryRange(const Params& params, const SharedMemoryRegistry* shm,
                                           uint64_t expected, bool at_least,
                                           const std::string& what,
                                           std::shared_ptr<const SharedMemoryRegion>* region) {
  const std::string& name = params.at(kRegionParam).string_param();
  if (shm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": this endpoint takes no shared-memory tensors"));
  }
  ASSIGN_OR_RETURN(*region, shm->Find(name));
  if (params.find("shared_memory_byte_size") == params.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shared_memory_region needs shared_memory_byte_size"));
  }
  const uint64_t size = CountParam(params, "shared_memory_byte_size");
  if (at_least ? size < expected : size != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shared_memory_byte_size is ", size, ", the tensor needs ", expected));
  }
  const uint64_t offset = CountParam(params, "shared_memory_offset");
  RETURN_IF_ERROR((*region)->CheckRange(offset, size, what));
  return offset;
}

bool InSharedMemory(const Params& params) { return params.find(kRegionParam) != params.end(); }

}  // namespace

absl::StatusOr<std::vector<runtime::NamedTensor>> DecodeInputs(
    const inference::ModelInferRequest& request, const SharedMemoryRegistry* shared_memory,
    const RawInputs* raw_outside) {
  int in_memory = 0;
  for (const InputTensor& input : request.inputs()) in_memory += InSharedMemory(input.parameters());
  // The raw entries: left outside the message by its reader, or in it.
  const bool outside = raw_outside != nullptr && !raw_outside->entries.empty();
  const int raw_count = outside ? static_cast<int>(raw_outside->entries.size())
                                : request.raw_input_contents_size();
  if (outside && request.raw_input_contents_size() > 0) {
    return absl::InvalidArgumentError(
        "raw_input_contents given both in the message and beside it");  // a front's bug
  }
  // Entry i as its pieces: views beside the message, or the one string in it
  // (held in `in_message` for as long as the span is used).
  absl::string_view in_message;
  auto raw_entry = [&](int i) -> absl::Span<const absl::string_view> {
    if (outside) return raw_outside->entries[i];
    in_message = request.raw_input_contents(i);
    return absl::MakeConstSpan(&in_message, 1);
  };
  const bool raw = raw_count > 0;
  if (raw && raw_count != request.inputs_size() - in_memory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", request.inputs_size() - in_memory,
        " raw_input_contents entries (one per input not in shared memory), got ", raw_count));
  }
  int next_raw = 0;
  std::vector<runtime::NamedTensor> tensors;
  tensors.reserve(request.inputs_size());
  for (int i = 0; i < request.inputs_size(); ++i) {
    const InputTensor& input = request.inputs(i);
    const std::optional<DType> dtype = DTypeFromName(input.datatype());
    if (!dtype.has_value()) {
      return InputError(input.name(),
                        absl::StrCat("unsupported datatype '", input.datatype(), "'"));
    }
    ASSIGN_OR_RETURN(Dims dims, DecodeShape(input, DTypeSize(*dtype)));
    Tensor tensor;
    if (InSharedMemory(input.parameters())) {
      if (HasTypedData(input)) {
        return InputError(input.name(), "contents must not be set for a shared-memory input");
      }
      const uint64_t bytes = static_cast<uint64_t>(NumElements(dims)) * DTypeSize(*dtype);
      const std::string what = absl::StrCat("input '", input.name(), "'");
      std::shared_ptr<const SharedMemoryRegion> region;
      ASSIGN_OR_RETURN(const uint64_t offset,
                       SharedMemoryRange(input.parameters(), shared_memory, bytes, false, what,
                                         &region));
      // Copied: the client may write the region while the model runs.
      ASSIGN_OR_RETURN(tensor, AllocateInput(input, *dtype, std::move(dims)));
      RETURN_IF_ERROR(region->Read(offset, tensor.raw_data(), bytes, what));
      NormalizeBools(tensor);
    } else if (raw) {
      if (HasTypedData(input)) {
        return InputError(input.name(), "contents must not be set when raw_input_contents is used");
      }
      ASSIGN_OR_RETURN(tensor, DecodeRaw(input, *dtype, std::move(dims), raw_entry(next_raw++)));
    } else {
      ASSIGN_OR_RETURN(tensor, DecodeTyped(input, *dtype, std::move(dims)));
    }
    tensors.push_back({input.name(), std::move(tensor)});
  }
  return tensors;
}

std::vector<std::string> RequestedOutputs(const inference::ModelInferRequest& request) {
  std::vector<std::string> names;
  names.reserve(request.outputs_size());
  for (const auto& output : request.outputs()) names.push_back(output.name());
  return names;
}

absl::Status EncodeOutputs(const std::vector<runtime::NamedTensor>& outputs,
                           const inference::ModelInferRequest& request,
                           const SharedMemoryRegistry* shared_memory,
                           inference::ModelInferResponse* response,
                           RawOutputs* raw_outputs) {
  // Where each output goes: the socket, or a checked range of a region (its
  // offset there).
  std::vector<uint64_t> offsets(outputs.size(), 0);
  std::vector<const Params*> target_params(outputs.size(), nullptr);
  std::vector<std::shared_ptr<const SharedMemoryRegion>> regions(outputs.size());
  for (const auto& requested : request.outputs()) {
    if (!InSharedMemory(requested.parameters())) continue;
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (outputs[o].name != requested.name()) continue;
      ASSIGN_OR_RETURN(offsets[o],
                       SharedMemoryRange(requested.parameters(), shared_memory,
                                         outputs[o].tensor.byte_size(), true,
                                         absl::StrCat("output '", requested.name(), "'"),
                                         &regions[o]));
      target_params[o] = &requested.parameters();
    }
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const runtime::NamedTensor& output = outputs[o];
    auto* meta = response->add_outputs();
    meta->set_name(output.name);
    meta->set_datatype(std::string(DTypeName(output.tensor.dtype())));
    for (int64_t d : output.tensor.dims()) meta->add_shape(d);
    // The bytes' entry (empty for an output in shared memory): handed over
    // as the tensor, or copied into the message.
    if (raw_outputs != nullptr) {
      raw_outputs->entries.push_back(regions[o] == nullptr ? std::optional<Tensor>(output.tensor)
                                                           : std::nullopt);
    } else if (regions[o] == nullptr) {
      response->add_raw_output_contents()->assign(
          static_cast<const char*>(output.tensor.raw_data()), output.tensor.byte_size());
    } else {
      response->add_raw_output_contents();
    }
    if (regions[o] != nullptr) {
      RETURN_IF_ERROR(regions[o]->Write(offsets[o], output.tensor.raw_data(),
                                        output.tensor.byte_size(),
                                        absl::StrCat("output '", output.name, "'")));
      for (const char* p : {kRegionParam, "shared_memory_byte_size", "shared_memory_offset"}) {
        auto it = target_params[o]->find(p);
        if (it != target_params[o]->end()) (*meta->mutable_parameters())[p] = it->second;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::server
