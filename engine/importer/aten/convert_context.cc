// ConvertContext: the graph-building helpers every converter uses.
#include "engine/importer/aten/convert_context.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/common/half.h"
#include "engine/common/status_macros.h"

namespace kiln::importer {

ir::ValueId ConvertContext::Emit(const AtenCall& call, ir::OpKind op,
                                 std::vector<ir::ValueId> inputs, ir::Attributes attrs,
                                 std::string_view suffix) {
  std::string name = call.num_outputs() == 0 ? std::string()
                                             : absl::StrCat(call.OutputName(0), std::string(suffix));
  ir::NodeId id = graph_->AddNode(op, std::move(inputs), std::move(attrs), std::string(call.op()),
                                  {std::move(name)});
  return graph_->node(id).outputs[0];
}

absl::Status ConvertContext::PerturbForTest(const AtenCall& call,
                                           std::vector<ir::ValueId>& results) {
  const char* op = std::getenv("KILN_TEST_PERTURB_OP");
  if (op == nullptr || call.op() != op || results.empty() ||
      KindOf(results[0]) != ir::ValueKind::kTensor) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(ir::ValueId half, AddScalarConstant(0.5, DType::kF32, "perturb"));
  results[0] = Emit(call, ir::OpKind::kAdd, {results[0], half}, {}, ".perturbed");
  return absl::OkStatus();
}

ir::ValueId ConvertContext::EmitValue(const AtenCall& call, ir::OpKind op, ir::ValueKind kind,
                                      std::vector<ir::ValueId> inputs, ir::Attributes attrs) {
  ir::ValueId id = Emit(call, op, std::move(inputs), std::move(attrs));
  ir::Value& value = graph_->mutable_value(id);
  value.kind = kind;
  if (ir::IsScalarKind(kind)) value.type = ir::TensorType{ir::ScalarKindDType(kind), Dims{}};
  if (ir::IsScalarListKind(kind)) value.type.dtype = ir::ScalarKindDType(kind);
  return id;
}

ir::ValueId ConvertContext::MakeTensorList(const AtenCall& call, std::vector<ir::ValueId> elements) {
  ir::ValueId id =
      EmitValue(call, ir::OpKind::kListConstruct, ir::ValueKind::kTensorList, elements);
  list_elements_[id] = std::move(elements);
  return id;
}

const std::vector<ir::ValueId>* ConvertContext::ListElements(ir::ValueId list) const {
  auto it = list_elements_.find(list);
  return it == list_elements_.end() ? nullptr : &it->second;
}

ir::ValueId ConvertContext::AddConstant(Tensor value, std::string name) {
  return graph_->AddConstant(std::move(value), std::move(name));
}

void FillTensor(Tensor& t, double v) {
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kBool: t.data<bool>()[i] = v != 0; break;
      case DType::kUInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
      case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DType::kInt64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DType::kF16:
        reinterpret_cast<uint16_t*>(t.raw_data())[i] = FloatToHalf(static_cast<float>(v));
        break;
      case DType::kBF16:
        reinterpret_cast<uint16_t*>(t.raw_data())[i] = FloatToBF16(static_cast<float>(v));
        break;
      case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: t.data<double>()[i] = v; break;
      case DType::kUnknown: break;
    }
  }
}

absl::StatusOr<ir::ValueId> ConvertContext::AddScalarConstant(double v, DType dtype,
                                                              std::string name) {
  return AddFilledConstant(Dims{}, v, dtype, std::move(name));
}

absl::StatusOr<ir::ValueId> ConvertContext::AddFilledConstant(const Dims& dims, double v,
                                                              DType dtype, std::string name) {
  if (dtype == DType::kUnknown) return absl::InternalError("constant of unknown dtype");
  // Allocated, not Zeros: a constant a model folds may be larger than the
  // import's memory (torch.ones(1 << 34)), which is a status, not an abort.
  ASSIGN_OR_RETURN(Tensor value, Tensor::Allocate(dtype, dims, absl::StrCat("constant '", name, "'")));
  FillTensor(value, v);
  return graph_->AddConstant(std::move(value), std::move(name));
}

namespace {
template <typename T>
ir::ValueId ScalarOfKind(ir::Graph* g, DType dtype, T v, ir::ValueKind kind, std::string name) {
  Tensor t = Tensor::Zeros(dtype, {});
  *t.data<T>() = v;
  return g->AddConstant(std::move(t), std::move(name), kind);
}
}  // namespace

ir::ValueId ConvertContext::AddInt(int64_t v, std::string name) {
  return ScalarOfKind<int64_t>(graph_, DType::kInt64, v, ir::ValueKind::kInt, std::move(name));
}
ir::ValueId ConvertContext::AddFloat(double v, std::string name) {
  return ScalarOfKind<double>(graph_, DType::kF64, v, ir::ValueKind::kFloat, std::move(name));
}
ir::ValueId ConvertContext::AddBool(bool v, std::string name) {
  return ScalarOfKind<bool>(graph_, DType::kBool, v, ir::ValueKind::kBool, std::move(name));
}
ir::ValueId ConvertContext::AddNone(std::string name) {
  std::vector<std::string> names;
  if (!name.empty()) names.push_back(std::move(name));
  ir::NodeId n = graph_->AddNode(ir::OpKind::kNone, {}, {}, "", std::move(names));
  ir::ValueId id = graph_->node(n).outputs[0];
  graph_->mutable_value(id).kind = ir::ValueKind::kNone;
  return id;
}
ir::ValueId ConvertContext::AddNumber(const Number& n, std::string name) {
  switch (n.kind) {
    case Number::kBool: return AddBool(n.b, std::move(name));
    case Number::kInt: return AddInt(n.i, std::move(name));
    case Number::kFloat: break;
  }
  return AddFloat(n.f, std::move(name));
}
ir::ValueId ConvertContext::AddInts(const std::vector<int64_t>& values, std::string name) {
  Tensor t = Tensor::Zeros(DType::kInt64, {static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int64_t));
  return graph_->AddConstant(std::move(t), std::move(name), ir::ValueKind::kIntList);
}

}  // namespace kiln::importer
