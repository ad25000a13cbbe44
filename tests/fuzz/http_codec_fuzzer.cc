// libFuzzer target for what kilnd's HTTP/REST front does with a body anyone
// who reaches its port may send (server/http/json_codec.h): an infer
// request's JSON with Triton's binary tensor data extension, the bodies of
// the repository and shared-memory routes, and a load's model config. The
// bytes are either a body as sent (with or without an
// Inference-Header-Content-Length) or, so that the fuzzer reaches the checks
// behind the JSON parser's, a body built from them:
// inputs of any datatype and shape, their data nested or flat, of the right
// JSON types or not, or in the binary section with binary_data_size.
//
// Anything may fail with a status; nothing may crash, leak or read out of
// bounds (built with AddressSanitizer and UBSan). Besides, a difference
// aborts:
// - the two ways a body is read (its inputs' bytes copied into the request,
//   or left where they lie for the decoder: RawInputs) give the same verdict,
//   the same message and the same decoded tensors;
// - a request that decodes, answered with its own inputs as outputs, encodes
//   the same whether the outputs' bytes are in the response or in their
//   tensors (RawOutputs), and that answer read back as a request gives the
//   same tensors again: through the binary section exactly, through JSON
//   "data" equal as numbers (JSON writes NaN and infinities as null).
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/half.h"
#include "google/protobuf/stubs/logging.h"
#include "inference/grpc_service.pb.h"
#include "server/core/model_config.h"
#include "server/core/raw_outputs.h"
#include "server/core/request_parameters.h"
#include "server/core/tensor_codec.h"
#include "server/http/json_codec.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace {

using json = nlohmann::json;
using kiln::DType;
using kiln::runtime::NamedTensor;
namespace http = kiln::server::http;

constexpr const char* kNames[] = {"x", "y", "x", "", "\xff\xfe", "output0"};

void Check(bool ok) {
  if (!ok) std::abort();
}

bool SameTensors(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || !kiln::fuzz::SameTensor(a[i].tensor, b[i].tensor)) return false;
  }
  return true;
}

// Element `i` of a float tensor as a double; nullopt when JSON cannot carry it.
std::optional<double> FloatAt(const kiln::Tensor& t, size_t i) {
  const char* p = static_cast<const char*>(t.raw_data());
  double v = 0;
  switch (t.dtype()) {
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v = kiln::HalfToFloat(h);
      break;
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v = kiln::BF16ToFloat(h);
      break;
    }
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      v = f;
      break;
    }
    default: {
      std::memcpy(&v, p + 8 * i, 8);
      break;
    }
  }
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

bool IsFloat(DType d) {
  return d == DType::kF16 || d == DType::kBF16 || d == DType::kF32 || d == DType::kF64;
}

// `b` read back from JSON "data": floats equal as numbers where JSON can write
// them (a null stays behind where it could not, and fails to decode then),
// everything else byte for byte.
bool SameThroughJson(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const kiln::Tensor& x = a[i].tensor;
    const kiln::Tensor& y = b[i].tensor;
    if (!IsFloat(x.dtype())) {
      if (!kiln::fuzz::SameTensor(x, y)) return false;
      continue;
    }
    if (x.dtype() != y.dtype() || x.dims() != y.dims() || x.byte_size() != y.byte_size()) {
      return false;
    }
    const size_t n = x.byte_size() / kiln::DTypeSize(x.dtype());
    for (size_t k = 0; k < n; ++k) {
      const std::optional<double> u = FloatAt(x, k);
      if (u.has_value() && *u != *FloatAt(y, k)) return false;
    }
  }
  return true;
}

// An encoded answer, read back as an infer request: its "outputs" become the
// request's "inputs", its binary section the request's.
std::optional<std::vector<NamedTensor>> ReadBack(const http::EncodedResponse& answer) {
  json doc = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  Check(!doc.is_discarded() && doc.contains("outputs"));
  std::string body = json{{"inputs", doc["outputs"]}}.dump();
  std::optional<size_t> header_length;
  if (answer.header_length.has_value()) {
    Check(*answer.header_length == answer.body.size());
    header_length = body.size();
    for (absl::string_view piece : answer.binary) body.append(piece.data(), piece.size());
  }
  inference::ModelInferRequest request;
  http::OutputFormat format;
  if (!http::ParseInferRequest(body, header_length, &request, &format).ok()) return std::nullopt;
  auto decoded = kiln::server::DecodeInputs(request);
  if (!decoded.ok()) return std::nullopt;
  return *std::move(decoded);
}

std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string out;
  for (absl::string_view p : pieces) out.append(p.data(), p.size());
  return out;
}

// The inputs answered as outputs, in both output formats and both ways of
// holding the outputs' bytes.
void RoundTrip(const std::vector<NamedTensor>& inputs) {
  for (const bool binary : {true, false}) {
    http::OutputFormat format;
    format.binary_default = binary;
    inference::ModelInferResponse copied;
    copied.set_model_name("m");
    kiln::server::EncodeOutputs(inputs, &copied);
    inference::ModelInferResponse held;
    held.set_model_name("m");
    kiln::server::RawOutputs raw;
    Check(kiln::server::EncodeOutputs(inputs, inference::ModelInferRequest(), nullptr, &held, &raw)
              .ok());
    auto a = http::EncodeInferResponse(copied, format);
    auto b = http::EncodeInferResponse(held, format, &raw);
    Check(a.ok() == b.ok());
    if (!a.ok()) {
      Check(a.status() == b.status());
      continue;  // BYTES has no JSON encoding of an output
    }
    Check(a->body == b->body && a->header_length == b->header_length &&
          Joined(a->binary) == Joined(b->binary));
    std::optional<std::vector<NamedTensor>> back = ReadBack(*a);
    if (binary) {
      Check(back.has_value() && SameTensors(inputs, *back));
    } else {
      bool finite = true;
      for (const NamedTensor& t : inputs) {
        if (!IsFloat(t.tensor.dtype())) continue;
        const size_t n = t.tensor.byte_size() / kiln::DTypeSize(t.tensor.dtype());
        for (size_t k = 0; k < n && finite; ++k) finite = FloatAt(t.tensor, k).has_value();
      }
      // A null where JSON could not write the number does not read back.
      Check(back.has_value() == finite);
      if (finite) Check(SameThroughJson(inputs, *back));
    }
  }
}

void CheckBody(absl::string_view body, std::optional<size_t> header_length) {
  inference::ModelInferRequest copied;
  http::OutputFormat copied_format;
  const absl::Status a = http::ParseInferRequest(body, header_length, &copied, &copied_format);
  inference::ModelInferRequest held;
  http::OutputFormat held_format;
  kiln::server::RawInputs raw;
  const absl::Status b = http::ParseInferRequest(body, header_length, &held, &held_format, &raw);
  Check(a == b);
  if (!a.ok()) return;
  (void)kiln::server::ParseInferParameters(copied);
  (void)kiln::server::RequestedOutputs(copied);
  auto x = kiln::server::DecodeInputs(copied);
  auto y = kiln::server::DecodeInputs(held, nullptr, &raw);
  Check(x.status() == y.status());
  if (!x.ok()) return;
  Check(SameTensors(*x, *y));
  RoundTrip(*x);
}

// The other routes' bodies, and a load's model config (the "config"
// parameter, or config.json): only that they never crash.
void OtherBodies(absl::string_view body) {
  (void)kiln::server::ParseModelConfig(body);
  inference::RepositoryIndexRequest index;
  (void)http::ParseRepositoryIndexRequest(body, &index);
  google::protobuf::Map<std::string, inference::ModelRepositoryParameter> params;
  (void)http::ParseRepositoryParameters(body, &params);
  inference::SystemSharedMemoryRegisterRequest shm;
  (void)http::ParseSharedMemoryRegister(body, &shm);
}

// One JSON value of the kind "data" holds, or a wrong one.
json Element(FuzzedDataProvider& in, int depth) {
  switch (in.ConsumeIntegralInRange(0, 9)) {
    case 0: return in.ConsumeBool();
    case 1: return in.ConsumeIntegral<int64_t>();
    case 2: return in.ConsumeIntegral<uint64_t>();
    case 3: return in.ConsumeFloatingPoint<double>();
    case 4: return in.ConsumeIntegralInRange<int>(-300, 300);
    case 5: return in.ConsumeRandomLengthString(8);
    case 6: return nullptr;
    case 7: {
      json list = json::array();
      if (depth < 4) {
        for (int n = in.ConsumeIntegralInRange(0, 3); n > 0; --n) list.push_back(Element(in, depth + 1));
      }
      return list;
    }
    case 8: return json::object();
    default: return in.ConsumeProbability<double>();
  }
}

// "data" for `shape`: nested as the shape (as clients often send it) or flat.
json Data(FuzzedDataProvider& in, const std::vector<int64_t>& shape, size_t dim, bool nested) {
  json list = json::array();
  const int64_t n = dim < shape.size() ? shape[dim] : 0;
  if (dim + 1 < shape.size() && nested) {
    for (int64_t i = 0; i < n && i < 8; ++i) {
      list.push_back(Data(in, shape, dim + 1, nested));
    }
    return list;
  }
  int64_t count = n < 0 || n > 8 ? 0 : n;
  if (!nested) {
    count = 1;
    for (int64_t d : shape) count = d < 0 || d > 8 ? 0 : count * d;
  }
  if (in.ConsumeIntegralInRange(0, 7) == 0) count += in.ConsumeIntegralInRange(-1, 1);
  for (int64_t i = 0; i < count && i < 512; ++i) list.push_back(Element(in, 0));
  return list;
}

json Parameters(FuzzedDataProvider& in) {
  json params = json::object();
  constexpr const char* kKeys[] = {"binary_data", "binary_data_output", "binary_data_size",
                                   "timeout",     "priority",           "profile",
                                   "shared_memory_region", "classification"};
  for (int n = in.ConsumeIntegralInRange(0, 2); n > 0; --n) {
    params[in.PickValueInArray(kKeys)] = Element(in, 3);
  }
  return params;
}

// The words of a model config (server/core/model_config.cc), as keys and
// as string values.
constexpr const char* kConfigWords[] = {
    "inputs", "outputs", "name", "datatype", "dims", "version_policy", "latest", "all",
    "specific", "num_versions", "versions", "strict", "verify", "enabled", "tolerance",
    "on_mismatch", "fail", "fallback", "on_first_use", "dry_run", "accumulation", "precision",
    "max_batch_size", "dynamic_batching", "preferred_batch_size", "max_queue_delay_microseconds",
    "preserve_ordering", "default_queue_policy", "max_queue_size", "default_timeout_microseconds",
    "timeout_action", "allow_timeout_override", "adaptive_batch_size", "allowed_batch_sizes",
    "model_warmup", "batch_size", "count", "input", "data_type", "zero_data", "random_data",
    "input_data_file", "samples", "timeout", "FP32", "INT64", "TYPE_FP32", "bf16", "fp32",
    "REJECT", "DELAY", "x"};

// A model config's shape: objects keyed by the config's words, nested.
json ConfigValue(FuzzedDataProvider& in, int depth) {
  const int kind = in.ConsumeIntegralInRange(0, depth < 4 ? 5 : 3);
  switch (kind) {
    case 0: return in.PickValueInArray(kConfigWords);
    case 1: return in.ConsumeIntegralInRange<int64_t>(-2, 70);
    case 2:
    case 3: return Element(in, 3);
    case 4: {
      json list = json::array();
      for (int n = in.ConsumeIntegralInRange(0, 3); n > 0; --n) {
        list.push_back(ConfigValue(in, depth + 1));
      }
      return list;
    }
    default: {
      json object = json::object();
      for (int n = in.ConsumeIntegralInRange(0, 4); n > 0; --n) {
        object[in.PickValueInArray(kConfigWords)] = ConfigValue(in, depth + 1);
      }
      return object;
    }
  }
}

// A body built from the fuzzer's bytes, and its header length.
std::pair<std::string, std::optional<size_t>> Build(FuzzedDataProvider& in) {
  json doc = json::object();
  std::string binary;
  json inputs = json::array();
  for (int n = in.ConsumeIntegralInRange(0, 3); n > 0; --n) {
    json t = json::object();
    t["name"] = in.PickValueInArray(kNames);
    const char* datatype = in.PickValueInArray(kiln::fuzz::kDatatypes);
    t["datatype"] = datatype;
    std::vector<int64_t> shape;
    for (int rank = in.ConsumeIntegralInRange(0, 3); rank > 0; --rank) {
      shape.push_back(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 4)
                                       : in.ConsumeIntegral<int64_t>());
    }
    t["shape"] = shape;
    if (in.ConsumeBool()) {
      // Binary: about the right size, sometimes not.
      const std::optional<DType> dtype = kiln::DTypeFromName(datatype);
      int64_t count = 1;
      for (int64_t d : shape) count = d < 0 || d > 8 ? 0 : count * d;
      size_t size = dtype.has_value() ? count * kiln::DTypeSize(*dtype) : 0;
      if (in.ConsumeIntegralInRange(0, 3) == 0) size = in.ConsumeIntegralInRange<size_t>(0, 64);
      if (std::string(datatype) == "BYTES") {
        // Length-prefixed strings, as the wire carries them.
        std::string bytes;
        for (int64_t k = 0; k < count && k < 16; ++k) {
          const std::string s = in.ConsumeRandomLengthString(8);
          const uint32_t len = in.ConsumeIntegralInRange(0, 5) == 0 ? in.ConsumeIntegral<uint32_t>()
                                                                     : s.size();
          bytes.append(reinterpret_cast<const char*>(&len), 4);
          bytes += s;
        }
        size = bytes.size();
        binary += bytes;
      } else {
        std::string bytes = in.ConsumeBytesAsString(size);
        size = bytes.size();
        binary += bytes;
      }
      json params = in.ConsumeBool() ? Parameters(in) : json::object();
      params["binary_data_size"] = in.ConsumeIntegralInRange(0, 15) == 0
                                       ? json(in.ConsumeIntegral<int64_t>())
                                       : json(size);
      t["parameters"] = params;
    } else {
      t["data"] = Data(in, shape, 0, in.ConsumeBool());
      if (in.ConsumeIntegralInRange(0, 7) == 0) t["parameters"] = Parameters(in);
    }
    inputs.push_back(std::move(t));
  }
  doc["inputs"] = std::move(inputs);
  if (in.ConsumeBool()) doc["id"] = in.ConsumeRandomLengthString(8);
  if (in.ConsumeBool()) doc["parameters"] = Parameters(in);
  if (in.ConsumeBool()) {
    json outputs = json::array();
    for (int n = in.ConsumeIntegralInRange(0, 2); n > 0; --n) {
      json o = {{"name", in.PickValueInArray(kNames)}};
      if (in.ConsumeBool()) o["parameters"] = Parameters(in);
      outputs.push_back(std::move(o));
    }
    doc["outputs"] = std::move(outputs);
  }
  if (in.ConsumeIntegralInRange(0, 15) == 0) doc["unexpected"] = 1;
  std::string body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  std::optional<size_t> header_length;
  if (!binary.empty() || in.ConsumeBool()) header_length = body.size();
  if (header_length.has_value() && in.ConsumeIntegralInRange(0, 7) == 0) {
    *header_length += in.ConsumeIntegralInRange<int>(-2, 2);
  }
  body += binary;
  return {body, header_length};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // protobuf logs every string field that is not UTF-8; the fuzzer sends many.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const char* bytes = reinterpret_cast<const char*>(data);
  switch (data[0] % 3) {
    case 0: {  // a body as sent, its header length from the next byte
      const absl::string_view body(bytes + 2, size - 2);
      std::optional<size_t> header_length;
      if (data[1] != 0xff) header_length = data[1] % 2 == 0 ? body.size() : data[1] / 2;
      CheckBody(body, header_length);
      break;
    }
    case 1:
      if (data[1] % 2 == 0) {
        OtherBodies(absl::string_view(bytes + 2, size - 2));
      } else {  // a config-shaped body
        FuzzedDataProvider in(data + 2, size - 2);
        json config = json::object();
        for (int n = in.ConsumeIntegralInRange(0, 6); n > 0; --n) {
          config[in.PickValueInArray(kConfigWords)] = ConfigValue(in, 0);
        }
        OtherBodies(config.dump(-1, ' ', false, json::error_handler_t::replace));
      }
      break;
    default: {
      FuzzedDataProvider in(data + 1, size - 1);
      auto [body, header_length] = Build(in);
      CheckBody(body, header_length);
      break;
    }
  }
  return 0;
}
