#include "engine/cache/graph_serializer.h"

#include <cstring>
#include <map>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kiln/v1/graph.pb.h"

namespace kiln::cache {
namespace {

// The IR layout this serializer was written for (x86-64, libstdc++). A field
// added to one of these structs changes its size; until the serializer learns
// the field, graphs are not serialized (a cache miss), so a cached graph can
// never silently lose what the field carries.
struct IrLayout {
  size_t node, value, graph, tensor_type, tensor, attr_alternatives;
};
constexpr IrLayout kKnownLayout = {168, 176, 152, 48, 56, 7};

absl::Status CheckLayout() {
  const IrLayout now = {sizeof(ir::Node),  sizeof(ir::Value),
                        sizeof(ir::Graph), sizeof(ir::TensorType),
                        sizeof(Tensor),    std::variant_size_v<ir::AttrValue>};
  if (now.node == kKnownLayout.node && now.value == kKnownLayout.value &&
      now.graph == kKnownLayout.graph && now.tensor_type == kKnownLayout.tensor_type &&
      now.tensor == kKnownLayout.tensor &&
      now.attr_alternatives == kKnownLayout.attr_alternatives) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      "the graph IR changed since engine/cache/graph_serializer.cc was written (sizes of Node, "
      "Value, Graph, TensorType, Tensor and AttrValue alternatives are ",
      now.node, ", ", now.value, ", ", now.graph, ", ", now.tensor_type, ", ", now.tensor, ", ",
      now.attr_alternatives, "; the serializer knows ", kKnownLayout.node, ", ", kKnownLayout.value,
      ", ", kKnownLayout.graph, ", ", kKnownLayout.tensor_type, ", ", kKnownLayout.tensor, ", ",
      kKnownLayout.attr_alternatives, "); graphs are not cached until it learns the new fields"));
}

std::string DTypeString(DType dtype) {
  return dtype == DType::kUnknown ? std::string() : DTypeName(dtype);
}

absl::StatusOr<DType> ParseDType(const std::string& name) {
  if (name.empty()) return DType::kUnknown;
  std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype.has_value()) {
    return absl::UnimplementedError(absl::StrCat("unknown dtype '", name, "'"));
  }
  return *dtype;
}

void TypeToProto(const ir::TensorType& type, v1::TensorType* out) {
  out->set_dtype(DTypeString(type.dtype));
  out->set_has_dims(type.dims.has_value());
  if (type.dims) {
    for (int64_t d : *type.dims) out->add_dims(d);
  }
  if (type.layout != ir::Layout::kPlain) out->set_layout(ir::LayoutName(type.layout));
}

absl::StatusOr<ir::TensorType> TypeFromProto(const v1::TensorType& proto) {
  ir::TensorType type;
  ASSIGN_OR_RETURN(type.dtype, ParseDType(proto.dtype()));
  if (proto.has_dims()) type.dims = Dims(proto.dims().begin(), proto.dims().end());
  if (proto.layout() == ir::LayoutName(ir::Layout::kNHWC)) {
    type.layout = ir::Layout::kNHWC;
  } else if (!proto.layout().empty() && proto.layout() != ir::LayoutName(ir::Layout::kPlain)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown layout '", proto.layout(), "'"));
  }
  return type;
}

// Where tensors that are not stored in the message itself go when writing
// and come from when reading.
struct TensorStore {
  // Constants of the model's imported graph (source_node references).
  const ir::Graph* source = nullptr;
  std::unordered_map<const void*, ir::NodeId> source_by_data;
  // Writing with blobs: tensors moved to the blob region, by offset.
  std::map<uint64_t, Tensor>* blobs_out = nullptr;
  uint64_t blobs_end = 0;
  // Reading: the blob region in memory (and who keeps it alive), or, for the
  // read-back check right after writing, the tensors themselves.
  absl::string_view blobs_in;
  std::shared_ptr<const void> owner;
  const std::map<uint64_t, Tensor>* blobs_map = nullptr;
};

constexpr size_t kBlobAlign = 64;
constexpr size_t kMinBlobBytes = 1024;  // smaller tensors stay in the message

uint64_t AlignUp(uint64_t n) { return (n + kBlobAlign - 1) / kBlobAlign * kBlobAlign; }

// Maps the data pointer of every Constant tensor of `source` to its node.
void IndexSource(const ir::Graph* source, TensorStore& store) {
  store.source = source;
  if (source == nullptr) return;
  for (size_t n = 0; n < source->nodes().size(); ++n) {
    const ir::Node& node = source->nodes()[n];
    if (node.kind != ir::OpKind::kConstant) continue;
    const Tensor* t = node.attrs.GetTensor("value");
    if (t != nullptr && t->byte_size() > 0) {
      store.source_by_data.emplace(t->raw_data(), static_cast<ir::NodeId>(n));
    }
  }
}

void TensorToProto(const Tensor& t, TensorStore& store, v1::TensorData* out) {
  out->set_dtype(DTypeString(t.dtype()));
  for (int64_t d : t.dims()) out->add_dims(d);
  auto it =
      t.byte_size() > 0 ? store.source_by_data.find(t.raw_data()) : store.source_by_data.end();
  if (it != store.source_by_data.end()) {
    const Tensor* s = store.source->node(it->second).attrs.GetTensor("value");
    if (s->dtype() == t.dtype() && s->dims() == t.dims()) {
      out->set_source_node(it->second);
      return;
    }
  }
  if (store.blobs_out != nullptr && t.byte_size() >= kMinBlobBytes) {
    const uint64_t offset = AlignUp(store.blobs_end);
    (*store.blobs_out)[offset] = t;
    store.blobs_end = offset + t.byte_size();
    out->set_blob_offset(offset);
    return;
  }
  out->set_data(static_cast<const char*>(t.raw_data()), t.byte_size());
}

absl::StatusOr<Tensor> TensorFromProto(const v1::TensorData& proto, const TensorStore& store) {
  ASSIGN_OR_RETURN(DType dtype, ParseDType(proto.dtype()));
  Dims dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor dim ", d, " is negative"));
  }
  if (proto.storage_case() == v1::TensorData::kSourceNode) {
    const ir::Graph* source = store.source;
    const int32_t id = proto.source_node();
    if (source == nullptr || id < 0 || id >= static_cast<int32_t>(source->nodes().size()) ||
        source->node(id).kind != ir::OpKind::kConstant) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor refers to node ", id, ", which is not a constant of the model"));
    }
    const Tensor* t = source->node(id).attrs.GetTensor("value");
    if (t == nullptr || t->dtype() != dtype || t->dims() != dims) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor refers to node ", id, ", whose constant has another type"));
    }
    return *t;  // shares the bytes
  }
  if (dtype == DType::kUnknown) return absl::InvalidArgumentError("tensor without dtype");
  const uint64_t bytes = static_cast<uint64_t>(NumElements(dims)) * DTypeSize(dtype);
  if (proto.storage_case() == v1::TensorData::kBlobOffset) {
    const uint64_t offset = proto.blob_offset();
    if (store.blobs_map != nullptr) {
      auto it = store.blobs_map->find(offset);
      if (it == store.blobs_map->end() || it->second.byte_size() != bytes) {
        return absl::InvalidArgumentError(absl::StrCat("no blob at offset ", offset));
      }
      return it->second;
    }
    if (offset % kBlobAlign != 0 || offset > store.blobs_in.size() ||
        bytes > store.blobs_in.size() - offset) {
      return absl::InvalidArgumentError(absl::StrCat("blob of ", bytes, " bytes at offset ", offset,
                                                     " lies outside the ", store.blobs_in.size(),
                                                     " bytes of blobs"));
    }
    const char* data = store.blobs_in.data() + offset;
    if (store.owner != nullptr && reinterpret_cast<uintptr_t>(data) % kBlobAlign == 0) {
      // In place: the tensor keeps the whole buffer alive.
      return Tensor::Wrap(dtype, std::move(dims), const_cast<char*>(data),
                          std::const_pointer_cast<void>(store.owner));
    }
    Tensor t = Tensor::Zeros(dtype, std::move(dims));
    if (bytes > 0) std::memcpy(t.raw_data(), data, bytes);
    return t;
  }
  Tensor t = Tensor::Zeros(dtype, std::move(dims));
  if (proto.data().size() != t.byte_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor has ", proto.data().size(), " bytes, its type needs ", t.byte_size()));
  }
  if (t.byte_size() > 0) std::memcpy(t.raw_data(), proto.data().data(), t.byte_size());
  return t;
}

absl::Status AttrToProto(const ir::AttrValue& value, TensorStore& store, v1::AttrValue* out) {
  // if constexpr over the alternatives: a type added to AttrValue falls through
  // to Unimplemented instead of failing to compile or being dropped.
  return std::visit(
      [&](const auto& x) -> absl::Status {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          out->set_b(x);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out->set_i(x);
        } else if constexpr (std::is_same_v<T, double>) {
          out->set_f(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out->set_s(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t v : x) out->mutable_ints()->add_values(v);
          if (x.empty()) out->mutable_ints();  // an empty list is still a list
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double v : x) out->mutable_floats()->add_values(v);
          if (x.empty()) out->mutable_floats();
        } else if constexpr (std::is_same_v<T, Tensor>) {
          TensorToProto(x, store, out->mutable_tensor());
        } else {
          return absl::UnimplementedError("attribute of a type the serializer does not know");
        }
        return absl::OkStatus();
      },
      value);
}

absl::Status AttrFromProto(const std::string& name, const v1::AttrValue& proto,
                           const TensorStore& store, ir::Attributes& attrs) {
  switch (proto.value_case()) {
    case v1::AttrValue::kB:
      attrs.SetBool(name, proto.b());
      return absl::OkStatus();
    case v1::AttrValue::kI:
      attrs.SetInt(name, proto.i());
      return absl::OkStatus();
    case v1::AttrValue::kF:
      attrs.SetFloat(name, proto.f());
      return absl::OkStatus();
    case v1::AttrValue::kS:
      attrs.SetString(name, proto.s());
      return absl::OkStatus();
    case v1::AttrValue::kInts:
      attrs.SetInts(name, {proto.ints().values().begin(), proto.ints().values().end()});
      return absl::OkStatus();
    case v1::AttrValue::kFloats:
      attrs.SetFloats(name, {proto.floats().values().begin(), proto.floats().values().end()});
      return absl::OkStatus();
    case v1::AttrValue::kTensor: {
      ASSIGN_OR_RETURN(Tensor t, TensorFromProto(proto.tensor(), store));
      attrs.SetTensor(name, std::move(t));
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError(absl::StrCat("attribute '", name, "' has no value"));
  }
}

bool ValidId(int32_t id, size_t count) { return id >= 0 && static_cast<size_t>(id) < count; }

// The value kinds this serializer was written for; ValueKind has no list of
// its own, and a kind added later must read as unknown, not as a wrong one.
constexpr ir::ValueKind kKnownValueKinds[] = {
    ir::ValueKind::kTensor,   ir::ValueKind::kInt,        ir::ValueKind::kFloat,
    ir::ValueKind::kBool,     ir::ValueKind::kIntList,    ir::ValueKind::kFloatList,
    ir::ValueKind::kBoolList, ir::ValueKind::kTensorList, ir::ValueKind::kNone,
};

bool KnownValueKind(ir::ValueKind kind) {
  for (ir::ValueKind k : kKnownValueKinds) {
    if (k == kind) return true;
  }
  return false;
}

absl::StatusOr<ir::ValueKind> ParseValueKind(const std::string& name) {
  if (name.empty()) return ir::ValueKind::kTensor;
  for (ir::ValueKind k : kKnownValueKinds) {
    if (ir::ValueKindName(k) == name) return k;
  }
  return absl::UnimplementedError(absl::StrCat("unknown value kind '", name, "'"));
}

absl::StatusOr<ir::Graph> FromProto(const v1::Graph& proto, const TensorStore& store);

absl::Status ToProto(const ir::Graph& graph, v1::Graph* out, TensorStore& store) {
  RETURN_IF_ERROR(CheckLayout());
  out->Clear();
  for (size_t i = 0; i < graph.values().size(); ++i) {
    const ir::Value& v = graph.values()[i];
    if (!KnownValueKind(v.kind)) {
      return absl::UnimplementedError(absl::StrCat("value %", i, " has a kind ('",
                                                   ir::ValueKindName(v.kind),
                                                   "') the serializer does not know"));
    }
    v1::Value* pv = out->add_values();
    pv->set_name(v.name);
    TypeToProto(v.type, pv->mutable_type());
    pv->set_producer(v.producer);
    pv->set_kind(ir::ValueKindName(v.kind));
    pv->set_optional(v.optional);
    if (v.default_value.has_value()) {
      TensorToProto(*v.default_value, store, pv->mutable_default_value());
    }
    for (const ir::DimRange& r : v.dim_ranges) {
      v1::DimRange* pr = pv->add_dim_ranges();
      pr->set_dim(r.dim);
      pr->set_min(r.min);
      pr->set_max(r.max);
      pr->set_symbol(r.symbol);
    }
  }
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const ir::Node& node = graph.nodes()[n];
    v1::Node* pn = out->add_nodes();
    pn->set_op(ir::OpName(node.kind));
    for (ir::ValueId v : node.inputs) pn->add_inputs(v);
    for (ir::ValueId v : node.outputs) pn->add_outputs(v);
    for (const auto& [name, value] : node.attrs.map()) {
      v1::Attribute* attr = pn->add_attrs();
      attr->set_name(name);
      absl::Status s = AttrToProto(value, store, attr->mutable_value());
      if (!s.ok()) return Annotate(s, absl::StrCat("node ", n, " attribute '", name, "': "));
    }
    pn->set_source_op(node.source_op);
    pn->set_block(node.block);
    for (ir::BlockId b : node.blocks) pn->add_blocks(b);
  }
  for (const ir::Block& block : graph.blocks()) {
    v1::Block* pb = out->add_blocks();
    pb->set_owner(block.owner);
    for (ir::ValueId v : block.params) pb->add_params(v);
    for (ir::NodeId n : block.nodes) pb->add_nodes(n);
    for (ir::ValueId v : block.results) pb->add_results(v);
  }
  for (ir::ValueId v : graph.inputs()) out->add_inputs(v);
  for (ir::ValueId v : graph.outputs()) out->add_outputs(v);
  for (const std::string& name : graph.output_names()) out->add_output_names(name);
  // Read it back: anything the replay cannot reproduce, or that
  // StructurallyEqual sees differently, makes the graph uncacheable.
  TensorStore reader;
  reader.source = store.source;
  reader.blobs_map = store.blobs_out;
  absl::StatusOr<ir::Graph> back = FromProto(*out, reader);
  if (!back.ok()) {
    return absl::UnimplementedError(
        absl::StrCat("graph does not read back: ", back.status().message()));
  }
  if (!ir::StructurallyEqual(graph, *back)) {
    return absl::UnimplementedError("graph does not read back structurally equal");
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::Graph> FromProto(const v1::Graph& proto, const TensorStore& store) {
  const size_t num_values = static_cast<size_t>(proto.values_size());
  const size_t num_nodes = static_cast<size_t>(proto.nodes_size());
  const size_t num_blocks = static_cast<size_t>(proto.blocks_size());
  if (num_blocks < 1) return absl::InvalidArgumentError("graph has no main block");
  std::vector<bool> is_input(num_values, false);
  for (int32_t v : proto.inputs()) {
    if (!ValidId(v, num_values)) return absl::InvalidArgumentError("graph input out of range");
    is_input[v] = true;
  }

  // Stage 1, ids. Values were created in id order, by AddInput, AddBlockParam
  // or as one of a node's outputs, nodes in id order. Replaying that sequence
  // (everything in the main block for now) reproduces every value and node
  // id; a graph numbered some other way is refused.
  ir::Graph g;
  auto add_node = [&](size_t n) -> absl::Status {
    const v1::Node& pn = proto.nodes(static_cast<int>(n));
    std::optional<ir::OpKind> kind = ir::OpKindFromName(pn.op());
    if (!kind.has_value()) {
      return absl::UnimplementedError(absl::StrCat("node ", n, ": unknown op '", pn.op(), "'"));
    }
    std::vector<ir::ValueId> inputs;
    for (int32_t v : pn.inputs()) {
      if (v != ir::kNoValue && !ValidId(v, num_values)) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", n, ": input id ", v, " out of range"));
      }
      inputs.push_back(v);
    }
    ir::Attributes attrs;
    for (const v1::Attribute& a : pn.attrs()) {
      absl::Status s = AttrFromProto(a.name(), a.value(), store, attrs);
      if (!s.ok()) return Annotate(s, absl::StrCat("node ", n, ": "));
    }
    std::vector<std::string> names;
    for (int32_t v : pn.outputs()) {
      if (!ValidId(v, num_values)) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", n, ": output id ", v, " out of range"));
      }
      names.push_back(proto.values(v).name());
    }
    const ir::NodeId id = g.AddNodeWithOutputs(*kind, std::move(inputs), pn.outputs_size(),
                                               std::move(attrs), pn.source_op(), std::move(names));
    const ir::Node& made = g.node(id);
    for (int i = 0; i < pn.outputs_size(); ++i) {
      if (made.outputs[i] != pn.outputs(i)) {
        return absl::UnimplementedError(
            absl::StrCat("node ", n, ": value numbering cannot be reproduced (output ", i, " is %",
                         pn.outputs(i), ", replaying gives %", made.outputs[i], ")"));
      }
    }
    return absl::OkStatus();
  };
  size_t v = 0;
  size_t next_node = 0;
  while (v < num_values || next_node < num_nodes) {
    // Nodes without outputs create no values; they come in node order.
    if (next_node < num_nodes && proto.nodes(static_cast<int>(next_node)).outputs_size() == 0) {
      RETURN_IF_ERROR(add_node(next_node++));
      continue;
    }
    if (v >= num_values) {
      return absl::InvalidArgumentError(absl::StrCat("node ", next_node, " has no output values"));
    }
    const v1::Value& pv = proto.values(static_cast<int>(v));
    if (pv.producer() == ir::kNoNode) {
      ASSIGN_OR_RETURN(ir::TensorType type, TypeFromProto(pv.type()));
      // A block parameter goes to the main block for now; stage 2 moves it.
      const ir::ValueId id = is_input[v]
                                 ? g.AddInput(pv.name(), std::move(type))
                                 : g.AddBlockParam(ir::kMainBlock, pv.name(), std::move(type));
      if (static_cast<size_t>(id) != v) {
        return absl::UnimplementedError("value numbering cannot be reproduced");
      }
      ++v;
      continue;
    }
    if (static_cast<size_t>(pv.producer()) != next_node || next_node >= num_nodes) {
      return absl::UnimplementedError(
          absl::StrCat("value %", v, " is made by node ", pv.producer(), " but node ", next_node,
                       " comes next: the graph's numbering cannot be replayed"));
    }
    RETURN_IF_ERROR(add_node(next_node++));
    v = g.values().size();
  }
  if (g.values().size() != num_values) {
    return absl::InvalidArgumentError("value count does not match the nodes' outputs");
  }
  if (std::vector<ir::ValueId>(proto.inputs().begin(), proto.inputs().end()) != g.inputs()) {
    return absl::UnimplementedError("graph inputs are not in creation order");
  }

  // Stage 2, blocks: create them, then set every membership as recorded.
  for (size_t b = 1; b < num_blocks; ++b) {
    const int32_t owner = proto.blocks(static_cast<int>(b)).owner();
    if (!ValidId(owner, num_nodes)) {
      return absl::InvalidArgumentError(absl::StrCat("block ", b, " has no valid owner"));
    }
    g.AddBlock(owner);
  }
  auto ids = [](const auto& list, size_t count,
                const char* what) -> absl::StatusOr<std::vector<int32_t>> {
    std::vector<int32_t> out(list.begin(), list.end());
    for (int32_t id : out) {
      if (!ValidId(id, count))
        return absl::InvalidArgumentError(absl::StrCat(what, " id out of range"));
    }
    return out;
  };
  for (size_t b = 0; b < num_blocks; ++b) {
    const v1::Block& pb = proto.blocks(static_cast<int>(b));
    ir::Block& block = g.mutable_block(static_cast<ir::BlockId>(b));
    block.owner = b == 0 ? ir::kNoNode : pb.owner();
    ASSIGN_OR_RETURN(block.params, ids(pb.params(), num_values, "block parameter"));
    ASSIGN_OR_RETURN(block.nodes, ids(pb.nodes(), num_nodes, "block node"));
    ASSIGN_OR_RETURN(block.results, ids(pb.results(), num_values, "block result"));
  }
  for (size_t n = 0; n < num_nodes; ++n) {
    const v1::Node& pn = proto.nodes(static_cast<int>(n));
    ir::Node& node = g.mutable_node(static_cast<ir::NodeId>(n));
    if (!ValidId(pn.block(), num_blocks)) {
      return absl::InvalidArgumentError(absl::StrCat("node ", n, ": block out of range"));
    }
    node.block = pn.block();
    ASSIGN_OR_RETURN(node.blocks, ids(pn.blocks(), num_blocks, "sub-block"));
  }

  // Stage 3, what the replay could not set: names, types, kinds.
  for (size_t i = 0; i < num_values; ++i) {
    const v1::Value& pv = proto.values(static_cast<int>(i));
    ir::Value& value = g.mutable_value(static_cast<ir::ValueId>(i));
    if (value.producer != pv.producer()) {
      return absl::InvalidArgumentError(absl::StrCat("value %", i, " has the wrong producer"));
    }
    ASSIGN_OR_RETURN(value.type, TypeFromProto(pv.type()));
    ASSIGN_OR_RETURN(value.kind, ParseValueKind(pv.kind()));
    value.name = pv.name();
    value.optional = pv.optional();
    if (pv.has_default_value()) {
      ASSIGN_OR_RETURN(Tensor d, TensorFromProto(pv.default_value(), store));
      value.default_value = std::move(d);
    }
    for (const v1::DimRange& pr : pv.dim_ranges()) {
      if (pr.dim() < 0 || pr.min() > pr.max()) {
        return absl::InvalidArgumentError(absl::StrCat("value %", i, " has a malformed dim range"));
      }
      value.dim_ranges.push_back(ir::DimRange{pr.dim(), pr.min(), pr.max(), pr.symbol()});
    }
  }
  if (proto.outputs_size() != proto.output_names_size()) {
    return absl::InvalidArgumentError("graph outputs and output names differ in count");
  }
  for (int i = 0; i < proto.outputs_size(); ++i) {
    if (!ValidId(proto.outputs(i), num_values)) {
      return absl::InvalidArgumentError(absl::StrCat("graph output ", i, " out of range"));
    }
    g.AddOutput(proto.outputs(i), proto.output_names(i));
  }
  RETURN_IF_ERROR(ir::VerifyGraph(g));
  return g;
}

}  // namespace

absl::Status GraphToProto(const ir::Graph& graph, v1::Graph* out, const ir::Graph* source) {
  TensorStore store;
  IndexSource(source, store);
  return ToProto(graph, out, store);
}

absl::StatusOr<ir::Graph> GraphFromProto(const v1::Graph& proto, const ir::Graph* source) {
  TensorStore store;
  store.source = source;
  return FromProto(proto, store);
}

absl::StatusOr<SerializedGraph> SerializeGraph(const ir::Graph& graph) {
  std::map<uint64_t, Tensor> blobs;
  TensorStore store;
  store.blobs_out = &blobs;
  v1::Graph proto;
  RETURN_IF_ERROR(ToProto(graph, &proto, store));
  std::string message;
  if (!proto.SerializeToString(&message)) {
    // Protobuf messages stop at 2 GiB (the blobs do not count).
    return absl::UnimplementedError(
        absl::StrCat("graph too large to serialize (", proto.ByteSizeLong(), " bytes)"));
  }
  SerializedGraph out;
  out.head_.resize(8);
  for (int i = 0; i < 8; ++i) out.head_[i] = static_cast<char>((message.size() >> (8 * i)) & 0xff);
  out.head_ += message;
  out.head_.resize(AlignUp(out.head_.size()), '\0');
  out.zeros_.assign(kBlobAlign, '\0');
  for (auto& [offset, tensor] : blobs) {
    out.offsets_.push_back(offset);
    out.blobs_.push_back(tensor);
  }
  out.size_ = out.head_.size() + store.blobs_end;
  return out;
}

std::vector<absl::string_view> SerializedGraph::Pieces() const {
  std::vector<absl::string_view> pieces = {head_};
  uint64_t at = 0;  // within the blob region
  for (size_t i = 0; i < blobs_.size(); ++i) {
    if (offsets_[i] > at) pieces.push_back(absl::string_view(zeros_).substr(0, offsets_[i] - at));
    pieces.push_back(
        absl::string_view(static_cast<const char*>(blobs_[i].raw_data()), blobs_[i].byte_size()));
    at = offsets_[i] + blobs_[i].byte_size();
  }
  return pieces;
}

std::string ToString(const SerializedGraph& serialized) {
  std::string out;
  out.reserve(serialized.size());
  for (absl::string_view piece : serialized.Pieces()) out.append(piece.data(), piece.size());
  return out;
}

absl::StatusOr<ir::Graph> ParseGraph(absl::string_view bytes, std::shared_ptr<const void> owner) {
  if (bytes.size() < 8) return absl::InvalidArgumentError("serialized graph is too short");
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i)
    size |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (size > bytes.size() - 8 || size > static_cast<uint64_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("serialized graph's message size is out of range");
  }
  v1::Graph proto;
  if (!proto.ParseFromArray(bytes.data() + 8, static_cast<int>(size))) {
    return absl::InvalidArgumentError("serialized graph does not parse");
  }
  TensorStore store;
  const uint64_t blobs_at = std::min<uint64_t>(AlignUp(8 + size), bytes.size());
  store.blobs_in = bytes.substr(blobs_at);
  store.owner = std::move(owner);
  return FromProto(proto, store);
}

absl::Status NodeToProto(const ir::Node& node, v1::Node* out) {
  TensorStore store;  // tensors inline
  out->set_op(ir::OpName(node.kind));
  for (size_t i = 0; i < node.inputs.size(); ++i) out->add_inputs(static_cast<int32_t>(i));
  for (size_t i = 0; i < node.outputs.size(); ++i) out->add_outputs(static_cast<int32_t>(i));
  for (const auto& [name, value] : node.attrs.map()) {
    v1::Attribute* attr = out->add_attrs();
    attr->set_name(name);
    absl::Status s = AttrToProto(value, store, attr->mutable_value());
    if (!s.ok()) return Annotate(s, absl::StrCat("attribute '", name, "': "));
  }
  out->set_source_op(node.source_op);
  return absl::OkStatus();
}

absl::StatusOr<ir::Node> NodeFromProto(const v1::Node& proto) {
  std::optional<ir::OpKind> kind = ir::OpKindFromName(proto.op());
  if (!kind.has_value()) {
    return absl::UnimplementedError(absl::StrCat("unknown op '", proto.op(), "'"));
  }
  ir::Node node{*kind, {}, {}, {}, proto.source_op()};
  for (int i = 0; i < proto.inputs_size(); ++i) node.inputs.push_back(i);
  for (int i = 0; i < proto.outputs_size(); ++i) node.outputs.push_back(i);
  TensorStore store;
  for (const v1::Attribute& a : proto.attrs()) {
    RETURN_IF_ERROR(AttrFromProto(a.name(), a.value(), store, node.attrs));
  }
  return node;
}

}  // namespace kiln::cache
