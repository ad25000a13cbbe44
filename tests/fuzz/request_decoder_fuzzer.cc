// libFuzzer target for what kilnd does first with a ModelInfer request: read
// the message (server/core/infer_request_reader.h), check its parameters
// (server/core/request_parameters.h) and decode its tensors
// (server/core/tensor_codec.h). The bytes are either a serialized
// ModelInferRequest, as a client sends it, or, so that the fuzzer reaches the
// decoder's checks instead of stopping at protobuf's, a request built from
// them: datatype, shape, contents raw or typed, parameters. Anything is
// allowed to fail with a status; nothing may crash, leak or read out of
// bounds (built with AddressSanitizer and UBSan). Serialized bytes are read
// the way kilnd reads them, cut into pieces as gRPC's slices would be, and
// the result must be protobuf's own: the same verdict, the same message, the
// same decoded inputs or the same error (a difference aborts).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "inference/grpc_service.pb.h"
#include "server/core/infer_request_reader.h"
#include "server/core/request_parameters.h"
#include "server/core/tensor_codec.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace {

constexpr const char* kParameters[] = {"profile",  "timeout",  "priority", "binary_data",
                                       "binary_data_size", "shared_memory_region",
                                       "classification", "x\n"};

void AddParameter(FuzzedDataProvider& in,
                  google::protobuf::Map<std::string, inference::InferParameter>* params) {
  inference::InferParameter& p = (*params)[in.PickValueInArray(kParameters)];
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0: p.set_bool_param(in.ConsumeBool()); break;
    case 1: p.set_int64_param(in.ConsumeIntegral<int64_t>()); break;
    case 2: p.set_uint64_param(in.ConsumeIntegral<uint64_t>()); break;
    case 3: p.set_double_param(in.ConsumeFloatingPoint<double>()); break;
    default: p.set_string_param(in.ConsumeRandomLengthString(16)); break;
  }
}

void Build(FuzzedDataProvider& in, inference::ModelInferRequest& request) {
  request.set_model_name("m");
  const int inputs = in.ConsumeIntegralInRange(0, 3);
  const bool raw = in.ConsumeBool();
  for (int i = 0; i < inputs; ++i) {
    auto* t = request.add_inputs();
    t->set_name(in.ConsumeBool() ? "x" : in.ConsumeRandomLengthString(8));
    t->set_datatype(in.PickValueInArray(kiln::fuzz::kDatatypes));
    const int rank = in.ConsumeIntegralInRange(0, 5);
    for (int d = 0; d < rank; ++d) {
      // Mostly small dims, sometimes hostile ones (negative, huge, overflowing).
      t->add_shape(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 8)
                                    : in.ConsumeIntegral<int64_t>());
    }
    if (in.ConsumeBool()) AddParameter(in, t->mutable_parameters());
    if (raw) {
      request.add_raw_input_contents(in.ConsumeRandomLengthString(256));
    } else {
      auto* c = t->mutable_contents();
      const int n = in.ConsumeIntegralInRange(0, 16);
      for (int k = 0; k < n; ++k) {
        switch (in.ConsumeIntegralInRange(0, 7)) {
          case 0: c->add_bool_contents(in.ConsumeBool()); break;
          case 1: c->add_int_contents(in.ConsumeIntegral<int32_t>()); break;
          case 2: c->add_int64_contents(in.ConsumeIntegral<int64_t>()); break;
          case 3: c->add_uint_contents(in.ConsumeIntegral<uint32_t>()); break;
          case 4: c->add_uint64_contents(in.ConsumeIntegral<uint64_t>()); break;
          case 5: c->add_fp32_contents(in.ConsumeFloatingPoint<float>()); break;
          case 6: c->add_fp64_contents(in.ConsumeFloatingPoint<double>()); break;
          default: c->add_bytes_contents(in.ConsumeRandomLengthString(8)); break;
        }
      }
    }
  }
  // A stray raw content, or one too many.
  if (in.ConsumeBool()) request.add_raw_input_contents(in.ConsumeRandomLengthString(16));
  if (in.ConsumeBool()) AddParameter(in, request.mutable_parameters());
  if (in.ConsumeBool()) {
    auto* o = request.add_outputs();
    o->set_name("output0");
    if (in.ConsumeBool()) AddParameter(in, o->mutable_parameters());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // protobuf logs every string field that is not UTF-8; the fuzzer sends many.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

// The serialized bytes, cut every `every` bytes, read as kilnd reads them and
// by protobuf alone: both must agree on everything.
void ReadLikeProtobuf(const char* bytes, size_t size, size_t every) {
  std::vector<absl::string_view> pieces;
  for (size_t at = 0; at < size; at += every) {
    pieces.emplace_back(bytes + at, std::min(every, size - at));
  }
  inference::ModelInferRequest read;
  kiln::server::RawInputs raw;
  const bool read_ok = kiln::server::ReadInferRequest(pieces, &read, &raw);
  inference::ModelInferRequest parsed;
  const bool parsed_ok = parsed.ParseFromArray(bytes, static_cast<int>(size));
  if (read_ok != parsed_ok) std::abort();
  if (!read_ok) return;
  (void)kiln::server::ParseInferParameters(read);
  auto mine = kiln::server::DecodeInputs(read, nullptr, &raw);
  auto theirs = kiln::server::DecodeInputs(parsed);
  if (mine.status() != theirs.status()) std::abort();
  if (mine.ok()) {
    if (mine->size() != theirs->size()) std::abort();
    for (size_t i = 0; i < mine->size(); ++i) {
      if (!kiln::fuzz::SameTensor((*mine)[i].tensor, (*theirs)[i].tensor)) std::abort();
    }
    (void)kiln::server::RequestedOutputs(read);
  }
  for (const auto& entry : raw.entries) {
    std::string joined;
    for (absl::string_view piece : entry) joined.append(piece.data(), piece.size());
    read.add_raw_input_contents(joined);
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(read, parsed)) std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest request;
  if (size > 1 && data[0] % 2 == 0) {
    ReadLikeProtobuf(reinterpret_cast<const char*>(data) + 2, size - 2, 1 + data[1] % 64);
    return 0;
  } else {
    FuzzedDataProvider in(data, size);
    in.ConsumeIntegral<uint8_t>();
    Build(in, request);
    // The built request through the reader too, as its bytes would arrive.
    const std::string bytes = request.SerializeAsString();
    ReadLikeProtobuf(bytes.data(), bytes.size(), 1 + size % 7);
  }
  (void)kiln::server::ParseInferParameters(request);
  auto inputs = kiln::server::DecodeInputs(request);
  if (inputs.ok()) (void)kiln::server::RequestedOutputs(request);
  return 0;
}
