// The Fallback kernel: runs a node's libtorch operator on Kiln tensors.
//
// Prepare finds the operator by name and overload in torch::jit's registry
// and turns the node's argument spec (see engine/importer/fallback_convert.cc)
// into a plan: per schema argument, where its value comes from and, for
// constants, the IValue. It cannot know the results' dims (libtorch decides
// them), so it asks for dynamic outputs. Eval wraps every tensor operand with
// at::from_blob (no copy; the deleter holds the Kiln tensor so a result that
// is a view of it stays valid), calls the operation, and hands the results
// back without copying when they are contiguous (the Kiln tensor holds the
// at::Tensor). An argument the schema marks as written (an in-place op) is
// cloned first, so Kiln's buffers are never changed behind the plan's back.
#include "engine/fallback/fallback.h"

#include "engine/fallback/named_arguments.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "engine/fallback/torch_extensions.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/kernels/kernel.h"

namespace kiln::fallback {
namespace {

using kernels::EvalContext;
using kernels::PrepareContext;

// How one schema argument gets its value.
struct Arg {
  enum class Kind { kInput, kList, kRunTimeList, kConstant, kNone } kind;
  int first = 0;  // kInput, kList: index into the node's inputs
  int count = 0;  // kList
  c10::IValue constant;
  c10::TypePtr type;  // the schema's type, Optional unwrapped
  bool written = false;  // the schema marks it as written (an in-place op)
};

struct Plan {
  std::shared_ptr<torch::jit::Operator> op;
  // Called through a copy: Operation::operator() is not const.
  torch::jit::Operation operation = nullptr;
  std::vector<Arg> args;
  int static_inputs = 0;  // inputs outside a run-time list
  int unpack = -1;        // a Tensor[] result split into this many outputs
  size_t num_returns = 0;
  std::string name;
};

c10::TypePtr Unwrap(const c10::TypePtr& t) {
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType();
  return t;
}

// A constant attribute as the IValue the schema type wants.
absl::StatusOr<c10::IValue> ConstantFor(const ir::Attributes& attrs, const std::string& name,
                                        const c10::TypePtr& type) {
  const auto& map = attrs.map();
  auto it = map.find(name);
  if (it == map.end()) return absl::InvalidArgumentError(absl::StrCat("missing attribute ", name));
  const ir::AttrValue& v = it->second;
  switch (type->kind()) {
    case c10::TypeKind::DeviceObjType:
      if (auto* s = std::get_if<std::string>(&v)) return c10::IValue(c10::Device(*s));
      break;
    case c10::TypeKind::ListType: {
      const c10::TypePtr element = type->castRaw<c10::ListType>()->getElementType();
      if (element->kind() == c10::TypeKind::BoolType) {
        if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
          c10::List<bool> list;
          for (int64_t b : *ints) list.push_back(b != 0);
          return c10::IValue(list);
        }
      }
      if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) return c10::IValue(*ints);
      if (auto* floats = std::get_if<std::vector<double>>(&v)) return c10::IValue(*floats);
      break;
    }
    default:
      break;
  }
  if (auto* b = std::get_if<bool>(&v)) return c10::IValue(*b);
  if (auto* i = std::get_if<int64_t>(&v)) return c10::IValue(*i);
  if (auto* f = std::get_if<double>(&v)) return c10::IValue(*f);
  if (auto* s = std::get_if<std::string>(&v)) return c10::IValue(*s);
  if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) return c10::IValue(*ints);
  if (auto* floats = std::get_if<std::vector<double>>(&v)) return c10::IValue(*floats);
  return absl::InvalidArgumentError(absl::StrCat("attribute ", name, " has an unusable type"));
}

// The spec of each schema argument, in schema order, and the attribute of
// each constant ("arg<i>"). A node of the TorchScript front gives one spec per
// schema argument; one of the torch.export front names its arguments
// ("arg_names", parallel to "args", in schema order) and leaves out those at
// their defaults, which take the schema's default here ("default").
struct PositionalSpec {
  std::vector<std::string> spec;
  std::vector<std::string> constant_attr;
};

}  // namespace

absl::StatusOr<std::shared_ptr<torch::jit::Operator>> FindOperator(const std::string& name,
                                                                   const std::string& overload) {
  std::shared_ptr<torch::jit::Operator> op;
  try {
    op = torch::jit::findOperatorFor(c10::OperatorName(name, overload));
  } catch (const std::exception& e) {
    return absl::UnimplementedError(e.what());
  }
  if (op == nullptr) {
    return absl::UnimplementedError(absl::StrCat("libtorch has no operator ", name,
                                                 overload.empty() ? "" : ".", overload));
  }
  return op;
}

absl::StatusOr<std::vector<int>> MatchNamedArguments(const c10::FunctionSchema& schema,
                                                     const std::vector<std::string>& names) {
  std::vector<int> match;
  size_t used = 0;
  for (const c10::Argument& argument : schema.arguments()) {
    const auto it = std::find(names.begin(), names.end(), argument.name());
    if (it != names.end()) {
      match.push_back(static_cast<int>(it - names.begin()));
      ++used;
    } else if (argument.default_value().has_value()) {
      match.push_back(-1);
    } else {
      return absl::UnimplementedError(absl::StrCat("libtorch's ", schema.name(),
                                                   " needs argument '", argument.name(),
                                                   "', which the program does not give"));
    }
  }
  for (size_t i = 0; used != names.size() && i < names.size(); ++i) {
    if (std::find(match.begin(), match.end(), static_cast<int>(i)) == match.end()) {
      return absl::UnimplementedError(absl::StrCat("libtorch's ", c10::toString(schema),
                                                   " has no argument '", names[i], "'"));
    }
  }
  return match;
}

namespace {

absl::StatusOr<PositionalSpec> Positional(const ir::Attributes& attrs,
                                          const c10::FunctionSchema& schema) {
  const std::vector<std::string> spec =
      absl::StrSplit(attrs.GetString("args"), ';', absl::SkipEmpty());
  const auto& arguments = schema.arguments();
  PositionalSpec out;
  if (!attrs.Has("arg_names")) {
    if (spec.size() != arguments.size()) {
      return absl::InvalidArgumentError(absl::StrCat("has ", spec.size(), " argument specs for ",
                                                     arguments.size(), " arguments"));
    }
    out.spec = spec;
    for (size_t i = 0; i < spec.size(); ++i) out.constant_attr.push_back(absl::StrCat("arg", i));
    return out;
  }
  const std::vector<std::string> names =
      absl::StrSplit(attrs.GetString("arg_names"), ';', absl::SkipEmpty());
  if (names.size() != spec.size()) {
    return absl::InvalidArgumentError(absl::StrCat("has ", spec.size(), " argument specs for ",
                                                   names.size(), " argument names"));
  }
  ASSIGN_OR_RETURN(std::vector<int> match, MatchNamedArguments(schema, names));
  // The node's inputs follow its arguments, so these must be in schema order.
  int last = -1;
  for (int i : match) {
    if (i < 0) {
      out.spec.push_back("default");
      out.constant_attr.emplace_back();
      continue;
    }
    if (i < last) {
      return absl::UnimplementedError(absl::StrCat(
          "the program gives the arguments of libtorch's ", c10::toString(schema),
          " in another order"));
    }
    last = i;
    out.spec.push_back(spec[i]);
    out.constant_attr.push_back(absl::StrCat("arg", i));
  }
  return out;
}

// The operator of a Fallback node, or Unimplemented naming it.
absl::StatusOr<std::shared_ptr<torch::jit::Operator>> OperatorOf(const ir::Attributes& attrs) {
  return FindOperator(attrs.GetString("op"), attrs.GetString("overload"));
}

absl::Status PrepareFallback(PrepareContext& ctx) {
  const ir::Attributes& attrs = ctx.node.attrs;
  auto plan = std::make_shared<Plan>();
  plan->name = attrs.GetString("op");
  absl::StatusOr<std::shared_ptr<torch::jit::Operator>> op = OperatorOf(attrs);
  if (!op.ok()) return Annotate(op.status(), kernels::NodeContext(ctx.node));
  plan->op = *std::move(op);
  plan->operation = plan->op->getOperation();
  const c10::FunctionSchema& schema = plan->op->schema();
  absl::StatusOr<PositionalSpec> positional = Positional(attrs, schema);
  if (!positional.ok()) return Annotate(positional.status(), kernels::NodeContext(ctx.node));
  const std::vector<std::string>& spec = positional->spec;
  int next = 0;
  bool runtime_list = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    const c10::Argument& schema_arg = schema.arguments()[i];
    Arg arg;
    arg.type = Unwrap(schema_arg.type());
    arg.written = schema_arg.alias_info() != nullptr && schema_arg.alias_info()->isWrite();
    if (spec[i] == "in") {
      const bool is_list = arg.type->kind() == c10::TypeKind::ListType &&
                           Unwrap(arg.type->castRaw<c10::ListType>()->getElementType())->kind() ==
                               c10::TypeKind::TensorType;
      if (is_list) {
        if (runtime_list) {
          return absl::UnimplementedError(absl::StrCat(
              kernels::NodeContext(ctx.node), "takes two tensor lists built at run time"));
        }
        runtime_list = true;
        arg.kind = Arg::Kind::kRunTimeList;
      } else {
        arg.kind = Arg::Kind::kInput;
        ++plan->static_inputs;
      }
      arg.first = next++;
    } else if (absl::StartsWith(spec[i], "list:")) {
      arg.kind = Arg::Kind::kList;
      if (!absl::SimpleAtoi(spec[i].substr(5), &arg.count)) {
        return absl::InvalidArgumentError(absl::StrCat(kernels::NodeContext(ctx.node),
                                                       "bad argument spec ", spec[i]));
      }
      arg.first = next;
      next += arg.count;
      plan->static_inputs += arg.count;
    } else if (spec[i] == "const") {
      arg.kind = Arg::Kind::kConstant;
      absl::StatusOr<c10::IValue> c = ConstantFor(attrs, positional->constant_attr[i], arg.type);
      if (!c.ok()) return Annotate(c.status(), kernels::NodeContext(ctx.node));
      arg.constant = *std::move(c);
    } else if (spec[i] == "default") {
      arg.kind = Arg::Kind::kConstant;
      arg.constant = *schema_arg.default_value();
    } else if (spec[i] == "none") {
      arg.kind = Arg::Kind::kNone;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(kernels::NodeContext(ctx.node),
                                                     "bad argument spec ", spec[i]));
    }
    plan->args.push_back(std::move(arg));
  }
  if (!runtime_list && next != static_cast<int>(ctx.inputs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(kernels::NodeContext(ctx.node), "has ",
                                                   ctx.inputs.size(), " inputs, its spec ", next));
  }
  // Inputs after a run-time list sit after its elements; Eval finds them by
  // counting from the end, so only a list in last position is supported here.
  if (runtime_list) {
    for (size_t i = 0; i < plan->args.size(); ++i) {
      if (plan->args[i].kind == Arg::Kind::kRunTimeList) {
        for (size_t j = i + 1; j < plan->args.size(); ++j) {
          if (plan->args[j].kind == Arg::Kind::kInput || plan->args[j].kind == Arg::Kind::kList) {
            return absl::UnimplementedError(
                absl::StrCat(kernels::NodeContext(ctx.node),
                             "takes operands after a tensor list built at run time"));
          }
        }
      }
    }
  }
  plan->unpack = static_cast<int>(attrs.GetInt("unpack", -1));
  plan->num_returns = schema.returns().size();
  ctx.dynamic_outputs = true;
  for (kernels::TensorInfo& out : ctx.outputs) out = kernels::TensorInfo{};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

// A Kiln tensor as an at::Tensor over the same bytes; the deleter keeps the
// Kiln storage alive for as long as libtorch holds the tensor (a view result).
absl::StatusOr<at::Tensor> ToTorch(const Tensor& t, bool clone) {
  ASSIGN_OR_RETURN(c10::ScalarType st, importer::TorchFromDType(t.dtype()));
  Tensor keep = t;
  at::Tensor out = at::from_blob(const_cast<void*>(t.raw_data()),
                                 std::vector<int64_t>(t.dims().begin(), t.dims().end()),
                                 [keep](void*) mutable { keep = Tensor(); },
                                 at::TensorOptions().dtype(st));
  return clone ? out.clone() : out;
}

absl::StatusOr<Tensor> FromTorch(const at::Tensor& result) {
  if (!result.defined()) return absl::InvalidArgumentError("libtorch returned an undefined tensor");
  at::Tensor t = result.is_cpu() ? result : result.cpu();
  if (!t.is_contiguous() || t.storage_offset() != 0 || t.is_conj() || t.is_neg()) {
    t = t.contiguous().clone();
  }
  ASSIGN_OR_RETURN(DType dtype, importer::DTypeFromTorch(t.scalar_type()));
  auto holder = std::make_shared<at::Tensor>(t);
  Dims dims(t.sizes().begin(), t.sizes().end());
  return Tensor::Wrap(dtype, std::move(dims), holder->data_ptr(), holder);
}

// An operand that is a scalar or scalar list at run time, as the schema type wants it.
absl::StatusOr<c10::IValue> ScalarOperand(const Tensor& t, const c10::TypePtr& type) {
  ASSIGN_OR_RETURN(at::Tensor tt, ToTorch(t, /*clone=*/false));
  switch (type->kind()) {
    case c10::TypeKind::IntType:
      return c10::IValue(tt.item<int64_t>());
    case c10::TypeKind::FloatType:
      return c10::IValue(tt.item<double>());
    case c10::TypeKind::BoolType:
      return c10::IValue(tt.item<bool>());
    case c10::TypeKind::NumberType:
      return c10::IValue(tt.item());
    case c10::TypeKind::ListType: {
      c10::TypeKind element = type->castRaw<c10::ListType>()->getElementType()->kind();
      if (element == c10::TypeKind::VarType || element == c10::TypeKind::AnyType) {
        // A generic list (aten::len's List[t]): its elements are what the
        // value holds, an int list for a shape.
        element = tt.scalar_type() == at::kBool        ? c10::TypeKind::BoolType
                  : at::isFloatingType(tt.scalar_type()) ? c10::TypeKind::FloatType
                                                         : c10::TypeKind::IntType;
      }
      if (element == c10::TypeKind::IntType) {
        at::Tensor l = tt.to(at::kLong).contiguous();
        return c10::IValue(std::vector<int64_t>(l.data_ptr<int64_t>(),
                                                l.data_ptr<int64_t>() + l.numel()));
      }
      if (element == c10::TypeKind::FloatType) {
        at::Tensor l = tt.to(at::kDouble).contiguous();
        return c10::IValue(
            std::vector<double>(l.data_ptr<double>(), l.data_ptr<double>() + l.numel()));
      }
      if (element == c10::TypeKind::BoolType) {
        c10::List<bool> list;
        at::Tensor l = tt.to(at::kBool).contiguous();
        for (int64_t k = 0; k < l.numel(); ++k) list.push_back(l.data_ptr<bool>()[k]);
        return c10::IValue(list);
      }
      break;
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot pass a tensor as ", type->repr_str()));
}

absl::Status EvalFallbackImpl(EvalContext& ctx) {
  const Plan& plan = *static_cast<const Plan*>(ctx.state);
  c10::InferenceMode inference;
  torch::jit::Stack stack;
  const int list_length = static_cast<int>(ctx.inputs.size()) - plan.static_inputs;
  for (const Arg& arg : plan.args) {
    switch (arg.kind) {
      case Arg::Kind::kNone:
        stack.emplace_back();
        break;
      case Arg::Kind::kConstant:
        stack.push_back(arg.constant);
        break;
      case Arg::Kind::kInput: {
        const Tensor* t = ctx.inputs[arg.first];
        if (t == nullptr) {
          stack.emplace_back();
        } else if (arg.type->kind() == c10::TypeKind::TensorType) {
          ASSIGN_OR_RETURN(at::Tensor tt, ToTorch(*t, arg.written));
          stack.emplace_back(std::move(tt));
        } else {
          ASSIGN_OR_RETURN(c10::IValue v, ScalarOperand(*t, arg.type));
          stack.push_back(std::move(v));
        }
        break;
      }
      case Arg::Kind::kList:
      case Arg::Kind::kRunTimeList: {
        const int count = arg.kind == Arg::Kind::kList ? arg.count : list_length;
        const c10::TypePtr element = arg.type->castRaw<c10::ListType>()->getElementType();
        if (element->kind() == c10::TypeKind::OptionalType) {
          c10::List<c10::optional<at::Tensor>> list;
          for (int k = 0; k < count; ++k) {
            const Tensor* t = ctx.inputs[arg.first + k];
            if (t == nullptr) {
              list.push_back(c10::nullopt);
            } else {
              ASSIGN_OR_RETURN(at::Tensor tt, ToTorch(*t, false));
              list.push_back(std::move(tt));
            }
          }
          stack.emplace_back(std::move(list));
        } else {
          std::vector<at::Tensor> list;
          for (int k = 0; k < count; ++k) {
            const Tensor* t = ctx.inputs[arg.first + k];
            if (t == nullptr) return absl::InvalidArgumentError("a tensor list element is None");
            ASSIGN_OR_RETURN(at::Tensor tt, ToTorch(*t, false));
            list.push_back(std::move(tt));
          }
          stack.emplace_back(std::move(list));
        }
        break;
      }
    }
  }
  torch::jit::Operation operation = plan.operation;
  operation(stack);
  if (stack.size() != plan.num_returns) {
    return absl::InternalError(absl::StrCat(plan.name, " returned ", stack.size(),
                                            " values, its schema says ", plan.num_returns));
  }
  size_t out = 0;
  for (const c10::IValue& v : stack) {
    if (plan.unpack >= 0) {
      const std::vector<at::Tensor> list = v.toTensorVector();
      if (static_cast<int>(list.size()) != plan.unpack) {
        return absl::InvalidArgumentError(absl::StrCat(plan.name, " returned ", list.size(),
                                                       " tensors, the model unpacks ",
                                                       plan.unpack));
      }
      for (const at::Tensor& t : list) {
        ASSIGN_OR_RETURN(*ctx.outputs[out++], FromTorch(t));
      }
      continue;
    }
    if (out >= ctx.outputs.size()) break;
    if (v.isTensor() && !v.toTensor().defined()) {
      // An optional result the op did not compute (_native_multi_head_attention's
      // weights without need_weights), which no op of libtorch's would take:
      // an empty tensor, so that the op's other results reach the model.
      *ctx.outputs[out++] = Tensor::Zeros(DType::kF32, {0});
    } else if (v.isTensor()) {
      ASSIGN_OR_RETURN(*ctx.outputs[out++], FromTorch(v.toTensor()));
    } else if (std::optional<Tensor> scalar = importer::ScalarTensor(v)) {
      *ctx.outputs[out++] = *std::move(scalar);
    } else {
      return absl::UnimplementedError(absl::StrCat(plan.name, " returned a ", v.tagKind()));
    }
  }
  return absl::OkStatus();
}

absl::Status EvalFallback(EvalContext& ctx) {
  try {
    absl::Status s = EvalFallbackImpl(ctx);
    if (!s.ok()) return Annotate(s, kernels::NodeContext(ctx.node));
    return s;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(kernels::NodeContext(ctx.node),
                                                   "libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernels::NodeContext(ctx.node), "libtorch: ", e.what()));
  }
}

absl::Status PrepareFallbackGuarded(PrepareContext& ctx) {
  try {
    return PrepareFallback(ctx);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernels::NodeContext(ctx.node), "libtorch: ", e.what()));
  }
}

}  // namespace

kernels::KernelDef LibtorchFallbackKernel(int num_threads) {
  static std::once_flag once;
  std::call_once(once, [] { LoadTorchVisionOps(); });  // torchvision::nms and the like
  if (num_threads > 0) at::set_num_threads(num_threads);
  return kernels::KernelDef{ir::OpKind::kFallback, DType::kUnknown, PrepareFallbackGuarded,
                            EvalFallback};
}

void InstallFallbackKernel(int num_threads) {
  static std::once_flag once;
  std::call_once(once, [num_threads] {
    kernels::InstallKernel(LibtorchFallbackKernel(num_threads));
  });
  if (num_threads > 0) at::set_num_threads(num_threads);
}

absl::Status CheckFallbackNode(const ir::Node& node) {
  absl::StatusOr<std::shared_ptr<torch::jit::Operator>> op = OperatorOf(node.attrs);
  if (!op.ok()) return op.status();
  return Positional(node.attrs, (*op)->schema()).status();
}

}  // namespace kiln::fallback
