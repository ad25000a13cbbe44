// Emits a Fallback node for a torch node Kiln does not translate natively:
// the operator runs through libtorch's registry at run time
// (engine/fallback/fallback_kernel.cc). The node records
//   op, overload   the operator's name ("aten::cumsum", "")
//   schema         its schema, for messages and the printed graph
//   args           per schema argument, ';'-separated: "in" (the next ir
//                  input), "list:N" (the next N ir inputs form a list; an
//                  absent input is a None element), "const" (attribute
//                  "arg<i>"), "none"
//   arg<i>         constant arguments (bool, int, float, str, int[], float[])
//   unpack         for a Tensor[] result that is only unpacked: its length
// so the IR stays free of libtorch types.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/ir/fallback_twin.h"
#include "engine/importer/torchscript/translator.h"

namespace kiln::importer {
namespace {

using torch::jit::Value;

// Encodes a constant argument as an attribute; false when it has no ir form.
bool EncodeConstant(const c10::IValue& c, const std::string& name, ir::Attributes& attrs) {
  if (c.isBool()) {
    attrs.SetBool(name, c.toBool());
  } else if (c.isInt()) {
    attrs.SetInt(name, c.toInt());
  } else if (c.isDouble()) {
    attrs.SetFloat(name, c.toDouble());
  } else if (c.isString()) {
    attrs.SetString(name, c.toStringRef());
  } else if (c.isIntList()) {
    attrs.SetInts(name, c.toIntVector());
  } else if (c.isDoubleList()) {
    attrs.SetFloats(name, c.toDoubleVector());
  } else if (c.isBoolList()) {
    std::vector<int64_t> v;
    for (bool b : c.toBoolList()) v.push_back(b ? 1 : 0);
    attrs.SetInts(name, std::move(v));
  } else if (c.isDevice()) {
    attrs.SetString(name, c.toDevice().str());
  } else {
    return false;
  }
  return true;
}

bool IsListOfTensors(const c10::TypePtr& type) {
  auto list = type->cast<c10::ListType>();
  if (list == nullptr) return false;
  c10::TypePtr element = list->getElementType();
  if (auto opt = element->cast<c10::OptionalType>()) element = opt->getElementType();
  return element->kind() == c10::TypeKind::TensorType;
}

// What a Fallback node for `node` takes and gives.
struct FallbackSpec {
  ir::Attributes attrs;
  std::vector<ir::ValueId> inputs;
  int unpack = -1;
  std::vector<ir::ValueKind> kinds;  // per output unless unpack >= 0
  int num_outputs = 0;
};

absl::StatusOr<FallbackSpec> SpecFor(const TorchNode& node, ImportContext& ctx) {
  FallbackSpec out;
  ir::Attributes& attrs = out.attrs;
  std::vector<ir::ValueId>& inputs = out.inputs;
  const c10::FunctionSchema* schema = node.maybeSchema();
  if (schema == nullptr) {
    return ctx.Unimplemented(node, "has no operator schema, so it cannot run through libtorch");
  }
  const auto& args = schema->arguments();
  if (args.size() != node.inputs().size() || schema->is_vararg()) {
    return ctx.Unimplemented(node, "its inputs do not match its schema");
  }
  attrs.SetString("op", schema->name());
  attrs.SetString("overload", schema->overload_name());
  attrs.SetString("schema", c10::toString(*schema));
  std::vector<std::string> spec;
  for (size_t i = 0; i < args.size(); ++i) {
    const Value* v = node.inputs()[i];
    const std::string attr = absl::StrCat("arg", i);
    std::optional<c10::IValue> c = ctx.ConstantOf(v);
    if (c.has_value() && !c->isTensor() && !c->isTensorList() && !c->isList()) {
      if (c->isNone()) {
        spec.push_back("none");
      } else if (EncodeConstant(*c, attr, attrs)) {
        spec.push_back("const");
      } else {
        return ctx.Unimplemented(node, absl::StrCat("argument '", args[i].name(), "' is a ",
                                                    c->tagKind(),
                                                    " constant, which Kiln cannot pass to libtorch"));
      }
      continue;
    }
    if (c.has_value() && c->isList() && !c->isTensorList()) {
      if (!EncodeConstant(*c, attr, attrs)) {
        return ctx.Unimplemented(node, absl::StrCat("argument '", args[i].name(),
                                                    "' is a list constant Kiln cannot pass"));
      }
      spec.push_back("const");
      continue;
    }
    if (IsListOfTensors(args[i].type())) {
      // Literal lists pass their elements (None elements as absent inputs).
      const Value* list = v;
      if (!ctx.Bound(list).has_value() && list->node()->kind() == c10::prim::ListConstruct) {
        for (const Value* element : list->node()->inputs()) {
          std::optional<c10::IValue> ec = ctx.ConstantOf(element);
          if (ec.has_value() && ec->isNone()) {
            inputs.push_back(ir::kNoValue);
            continue;
          }
          ASSIGN_OR_RETURN(ir::ValueId id,
                           ctx.ValueFor(element, absl::StrCat(ctx.Where(node), args[i].name(), ": ")));
          inputs.push_back(id);
        }
        spec.push_back(absl::StrCat("list:", list->node()->inputs().size()));
        continue;
      }
      if (std::optional<ir::ValueId> bound = ctx.Bound(list);
          bound && ctx.KindOf(*bound) == ir::ValueKind::kTensorList &&
          ctx.ListElements(*bound) == nullptr) {
        inputs.push_back(*bound);  // a list built at run time: passed whole
        spec.push_back("in");
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<ir::ValueId> elements, ctx.TensorListInput(node, i));
      inputs.insert(inputs.end(), elements.begin(), elements.end());
      spec.push_back(absl::StrCat("list:", elements.size()));
      continue;
    }
    ASSIGN_OR_RETURN(ir::ValueId id,
                     ctx.AnyValue(v, absl::StrCat(ctx.Where(node), args[i].name(), ": ")));
    if (ctx.KindOf(id) == ir::ValueKind::kNone) {
      spec.push_back("none");
      continue;
    }
    inputs.push_back(id);
    spec.push_back("in");
  }
  attrs.SetString("args", absl::StrJoin(spec, ";"));

  // Results: one ir output per schema return, except a Tensor[] that every
  // user unpacks (chunk, split, unbind), which becomes that many tensors.
  const auto& returns = schema->returns();
  if (returns.size() != node.outputs().size()) {
    return ctx.Unimplemented(node, "its outputs do not match its schema");
  }
  int unpack = -1;
  std::vector<ir::ValueKind> kinds;
  for (size_t r = 0; r < returns.size(); ++r) {
    const c10::TypePtr& type = returns[r].type();
    if (IsListOfTensors(type)) {
      if (returns.size() != 1) {
        return ctx.Unimplemented(node, "returns a tensor list among other results");
      }
      for (const torch::jit::Use& use : node.output(0)->uses()) {
        if (use.user->kind() != c10::prim::ListUnpack ||
            (unpack >= 0 && unpack != static_cast<int>(use.user->outputs().size()))) {
          return ctx.Unimplemented(
              node, "returns a tensor list whose length is only known at run time");
        }
        unpack = static_cast<int>(use.user->outputs().size());
      }
      if (unpack < 0) unpack = 0;
      continue;
    }
    std::optional<ir::ValueKind> kind = KindOfType(type);
    if (!kind.has_value() || *kind == ir::ValueKind::kTensorList ||
        ir::IsScalarListKind(*kind) || *kind == ir::ValueKind::kNone) {
      return ctx.Unimplemented(node, absl::StrCat("returns a ", type->repr_str(),
                                                  ", which Kiln cannot hold"));
    }
    kinds.push_back(*kind);
  }
  out.num_outputs = unpack >= 0 ? unpack : static_cast<int>(returns.size());
  if (unpack >= 0) attrs.SetInt("unpack", unpack);
  out.unpack = unpack;
  out.kinds = std::move(kinds);
  return out;
}

}  // namespace

ConvertResult ConvertFallback(const TorchNode& node, ImportContext& ctx) {
  ASSIGN_OR_RETURN(FallbackSpec spec, SpecFor(node, ctx));
  const int num_outputs = spec.num_outputs;
  const int unpack = spec.unpack;
  const std::vector<ir::ValueKind>& kinds = spec.kinds;
  std::vector<std::string> names;
  for (int o = 0; o < num_outputs; ++o) {
    names.push_back(unpack >= 0 ? absl::StrCat(node.output(0)->debugName(), ".", o)
                                : node.outputs()[o]->debugName());
  }
  ir::Graph& g = ctx.graph();
  ir::NodeId id = g.AddNodeWithOutputs(ir::OpKind::kFallback, std::move(spec.inputs),
                                       num_outputs, std::move(spec.attrs),
                                       node.kind().toQualString(),
                                       std::move(names));
  std::vector<ir::ValueId> outs = g.node(id).outputs;
  if (unpack >= 0) return std::vector<ir::ValueId>{ctx.MakeTensorList(node, outs)};
  for (size_t o = 0; o < outs.size(); ++o) {
    ir::Value& value = g.mutable_value(outs[o]);
    value.kind = kinds[o];
    if (ir::IsScalarKind(kinds[o])) value.type = ir::TensorType{ir::ScalarKindDType(kinds[o]), Dims{}};
  }
  return outs;
}

void AddFallbackTwin(const TorchNode& node, const std::vector<ir::ValueId>& results,
                     ImportContext& ctx) {
  if (results.empty()) return;
  // Only values the native translation already bound: the twin must add
  // nothing to the graph.
  for (const Value* v : node.inputs()) {
    if (v->type()->cast<c10::TensorType>() != nullptr && !ctx.Bound(v).has_value()) return;
  }
  ir::Graph& g = ctx.graph();
  const ir::NodeId producer = g.value(results[0]).producer;
  if (producer == ir::kNoNode) return;
  {
    const ir::Node& native = g.node(producer);
    if (native.outputs != results || native.kind == ir::OpKind::kFallback ||
        native.attrs.Has("fallback.inputs") ||
        native.source_op != node.kind().toQualString()) {
      return;
    }
  }
  absl::StatusOr<FallbackSpec> spec = SpecFor(node, ctx);
  if (!spec.ok() || spec->unpack >= 0 ||
      spec->num_outputs != static_cast<int>(results.size())) {
    return;
  }
  // Taken only now: SpecFor may add nodes (an RNN's weights, the elements of a
  // list it binds), which moves the graph's nodes; a reference taken before
  // would read freed memory (and crashed kiln-parity at times).
  ir::Node& native = g.mutable_node(producer);
  std::vector<int64_t> positions;
  for (ir::ValueId in : spec->inputs) {
    if (in == ir::kNoValue) {  // a None element of a list (x[:, i])
      positions.push_back(-1);
      continue;
    }
    auto it = std::find(native.inputs.begin(), native.inputs.end(), in);
    if (it == native.inputs.end()) return;
    positions.push_back(it - native.inputs.begin());
  }
  ir::AddFallbackTwin(native, spec->attrs, positions);
}

}  // namespace kiln::importer
