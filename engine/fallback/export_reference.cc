#include "engine/fallback/export_reference.h"

#include "engine/fallback/named_arguments.h"

#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/export_call.h"
#include "engine/importer/export/exported_program_importer.h"
#include "engine/importer/export/program_importer.h"

namespace kiln::fallback {
namespace {

using importer::export_internal::Field;
using importer::export_internal::json;
using verify::ReferenceRequest;
using verify::ReferenceResult;

// What stops the evaluation: a node libtorch 1.13 cannot run (the reference
// is then skipped, naming it), or a malformed program.
struct CannotEvaluate {
  std::string why;
  bool located = false;  // `why` names the node
};

// Loops of while_loop run no more than this (a hostile or buggy condition).
constexpr int64_t kMaxIterations = 1000000;

class Evaluator {
 public:
  // With `trace`, a copy of every tensor a top-level node outputs is kept
  // there by its name (taken at once: a later in-place op may change it).
  Evaluator(bool float64, std::unordered_map<std::string, at::Tensor>* trace)
      : float64_(float64), trace_(trace) {}

  void Bind(const std::string& name, c10::IValue v) { env_[name] = std::move(v); }
  c10::IValue Get(const std::string& name) const {
    auto it = env_.find(name);
    if (it == env_.end()) throw CannotEvaluate{absl::StrCat("'", name, "' is used before it is set")};
    return it->second;
  }

  // Runs `nodes` in order.
  void Nodes(const json& nodes, int depth) {
    if (!nodes.is_array()) throw CannotEvaluate{"a graph has no node list"};
    if (depth > importer::export_internal::kMaxSubgraphDepth) throw CannotEvaluate{"subgraphs nest too deep"};
    for (const json& node : nodes) {
      try {
        Node(node, depth);
        if (trace_ != nullptr && depth == 0) KeepOutputs(node);
      } catch (CannotEvaluate& e) {
        if (!e.located) {
          const json& name = Field(node, "name");
          e.why = absl::StrCat("node '", name.is_string() ? name.get<std::string>() : "?", "' (",
                               Field(node, "target").is_string() ? node["target"].get<std::string>()
                                                                 : "?",
                               "): ", e.why);
          e.located = true;
        }
        throw;
      }
    }
  }

 private:
  void KeepOutputs(const json& node) {
    const json& outputs = Field(node, "outputs");
    if (!outputs.is_array()) return;
    for (const json& out : outputs) {
      const json& name = Field(Field(out, "as_tensor"), "name");
      if (!name.is_string()) continue;
      auto it = env_.find(name.get<std::string>());
      if (it != env_.end() && it->second.isTensor()) {
        (*trace_)[it->first] = it->second.toTensor().clone();
      }
    }
  }

  static std::string Target(const json& node) {
    const json& t = Field(node, "target");
    if (!t.is_string()) throw CannotEvaluate{"a node has no target"};
    return t.get<std::string>();
  }

  // {"as_name": n} or {"as_int": k} (a symbolic int or bool, or a literal).
  c10::IValue Sym(const json& s) const {
    if (!s.is_object() || s.size() != 1) throw CannotEvaluate{"a malformed symbolic value"};
    const std::string kind = s.begin().key();
    const json& v = s.begin().value();
    if (kind == "as_name" && v.is_string()) return Get(v.get<std::string>());
    if (kind == "as_int" && v.is_number_integer()) return c10::IValue(v.get<int64_t>());
    if (kind == "as_float" && importer::ExportFloat(v).has_value()) {
      return c10::IValue(*importer::ExportFloat(v));
    }
    if (kind == "as_bool" && v.is_boolean()) return c10::IValue(v.get<bool>());
    throw CannotEvaluate{absl::StrCat("a symbolic value '", kind, "'")};
  }

  at::Tensor TensorNamed(const json& t) const {
    const json& name = Field(t, "name");
    if (!name.is_string()) throw CannotEvaluate{"a tensor argument without a name"};
    c10::IValue v = Get(name.get<std::string>());
    if (!v.isTensor()) throw CannotEvaluate{absl::StrCat("'", name.get<std::string>(), "' is not a tensor")};
    return v.toTensor();
  }

  // A Python number where libtorch 1.13's schema wants a tensor (torch 2.x
  // records x * 2.0 as mul.Tensor with a float): a 0-dim tensor marked as a
  // wrapped number, which type promotion treats as the number it was.
  static c10::IValue Wrapped(const c10::IValue& number) {
    at::Tensor t = number.isDouble() ? at::scalar_tensor(number.toDouble(), at::kDouble)
                   : number.isBool() ? at::scalar_tensor(number.toBool(), at::kBool)
                                     : at::scalar_tensor(number.toInt(), at::kLong);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  }

  // An argument as the IValue libtorch's schema type `type` takes.
  c10::IValue Argument(const json& arg, const c10::TypePtr& type) const {
    c10::IValue v = ArgumentValue(arg, type);
    c10::TypePtr t = type;
    if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
    if (t->kind() == c10::TypeKind::TensorType && (v.isDouble() || v.isInt() || v.isBool())) {
      return Wrapped(v);
    }
    return v;
  }

  c10::IValue ArgumentValue(const json& arg, const c10::TypePtr& type) const {
    if (!arg.is_object() || arg.size() != 1) throw CannotEvaluate{"a malformed argument"};
    const std::string kind = arg.begin().key();
    const json& v = arg.begin().value();
    c10::TypePtr t = type;
    if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
    if (kind == "as_none") return c10::IValue();
    if (kind == "as_tensor") return TensorNamed(v);
    if (kind == "as_tensors") {
      c10::List<at::Tensor> list;
      for (const json& e : v) list.push_back(TensorNamed(e));
      return list;
    }
    if (kind == "as_optional_tensors") {
      c10::List<c10::optional<at::Tensor>> list;
      for (const json& e : v) {
        const json& tensor = Field(e, "as_tensor");
        list.push_back(tensor.is_object() ? c10::optional<at::Tensor>(TensorNamed(tensor))
                                          : c10::optional<at::Tensor>());
      }
      return list;
    }
    if (kind == "as_int" && v.is_number_integer()) {
      if (t->kind() == c10::TypeKind::FloatType) return c10::IValue(static_cast<double>(v.get<int64_t>()));
      return c10::IValue(v.get<int64_t>());
    }
    if (kind == "as_float" && importer::ExportFloat(v).has_value()) {
      return c10::IValue(*importer::ExportFloat(v));
    }
    if (kind == "as_bool" && v.is_boolean()) return c10::IValue(v.get<bool>());
    if (kind == "as_string" && v.is_string()) return c10::IValue(v.get<std::string>());
    if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") return Sym(v);
    if ((kind == "as_ints" || kind == "as_sym_ints") && v.is_array()) {
      std::vector<int64_t> ints;
      for (const json& e : v) {
        const c10::IValue x = e.is_number_integer() ? c10::IValue(e.get<int64_t>()) : Sym(e);
        if (!x.isInt()) throw CannotEvaluate{"an int list holding another kind"};
        ints.push_back(x.toInt());
      }
      return ints;
    }
    if (kind == "as_floats" && v.is_array()) return v.get<std::vector<double>>();
    if (kind == "as_bools" && v.is_array()) {
      c10::List<bool> list;
      for (const json& e : v) list.push_back(e.get<bool>());
      return list;
    }
    if ((kind == "as_scalar_type" || kind == "as_memory_format") && v.is_number_integer()) {
      std::optional<int64_t> c10 = kind == "as_scalar_type"
                                       ? importer::C10ScalarTypeFromExport(v.get<int64_t>())
                                       : importer::C10MemoryFormatFromExport(v.get<int64_t>());
      if (c10.has_value()) return c10::IValue(*c10);
    }
    if (kind == "as_layout" && v == 7) return c10::IValue(int64_t{0});  // strided
    if (kind == "as_device") return c10::IValue(c10::Device(c10::kCPU));
    throw CannotEvaluate{absl::StrCat("an argument '", kind, "'")};
  }

  // Binds `results` to the node's outputs.
  void BindOutputs(const json& node, const std::vector<c10::IValue>& results) {
    const json& outputs = Field(node, "outputs");
    if (!outputs.is_array()) throw CannotEvaluate{"a node has no outputs list"};
    std::vector<c10::IValue> flat = results;
    // A control-flow node's results, flattened, name one output each (or the
    // elements of a single "as_tensors").
    if (outputs.size() == 1 && outputs[0].contains("as_tensors") && results.size() != 1) {
      c10::List<at::Tensor> list;
      for (const c10::IValue& r : results) list.push_back(r.toTensor());
      flat = {c10::IValue(list)};
    }
    if (flat.size() < outputs.size()) throw CannotEvaluate{"fewer results than outputs"};
    for (size_t i = 0; i < outputs.size(); ++i) {
      const json& out = outputs[i];
      if (!out.is_object() || out.size() != 1) continue;
      const std::string kind = out.begin().key();
      const json& v = out.begin().value();
      if (kind == "as_tensor") {
        Bind(Field(v, "name").get<std::string>(), flat[i]);
      } else if (kind == "as_tensors") {
        const std::vector<at::Tensor> elements = flat[i].toTensorVector();
        for (size_t e = 0; e < v.size() && e < elements.size(); ++e) {
          Bind(Field(v[e], "name").get<std::string>(), elements[e]);
        }
      } else if (kind == "as_sym_int" || kind == "as_sym_bool" || kind == "as_sym_float") {
        Bind(Field(v, "as_name").get<std::string>(), flat[i]);
      }
    }
  }

  // A subgraph run on `args` in an environment of its own: its outputs.
  std::vector<c10::IValue> Subgraph(const json& arg, const std::vector<c10::IValue>& args,
                                    int depth) const {
    const json& graph = Field(Field(arg, "as_graph"), "graph");
    const json& inputs = Field(graph, "inputs");
    if (!inputs.is_array() || inputs.size() != args.size()) throw CannotEvaluate{"a subgraph's inputs"};
    Evaluator sub(float64_, nullptr);
    for (size_t i = 0; i < args.size(); ++i) {
      sub.Bind(Field(Field(inputs[i], "as_tensor"), "name").get<std::string>(), args[i]);
    }
    sub.Nodes(Field(graph, "nodes"), depth + 1);
    std::vector<c10::IValue> out;
    for (const json& o : Field(graph, "outputs")) {
      const json& t = Field(o, "as_tensor");
      out.push_back(t.is_object() ? c10::IValue(sub.TensorNamed(t)) : sub.Sym(o));
    }
    return out;
  }

  std::vector<c10::IValue> TensorsArg(const json& arg) const {
    std::vector<c10::IValue> out;
    for (const json& t : Field(arg, "as_tensors")) out.emplace_back(TensorNamed(t));
    return out;
  }

  static bool Truth(const c10::IValue& v) {
    if (v.isTensor()) return v.toTensor().item<bool>();
    if (v.isBool()) return v.toBool();
    if (v.isInt()) return v.toInt() != 0;
    throw CannotEvaluate{"a condition that is not a bool"};
  }

  void ControlFlow(const json& node, const std::string& target, int depth) {
    const std::vector<const json*> args = importer::export_internal::PositionalArgs(node);
    if (target == "torch.ops.higher_order.cond") {
      if (args.size() != 4) throw CannotEvaluate{"cond takes 4 arguments"};
      const json& pred = *args[0];
      const c10::IValue p = pred.contains("as_tensor") ? c10::IValue(TensorNamed(pred["as_tensor"]))
                            : pred.contains("as_sym_bool") ? Sym(pred["as_sym_bool"])
                                                           : Argument(pred, c10::BoolType::get());
      BindOutputs(node, Subgraph(Truth(p) ? *args[1] : *args[2], TensorsArg(*args[3]), depth));
      return;
    }
    if (args.size() != 4) throw CannotEvaluate{"while_loop takes 4 arguments"};
    std::vector<c10::IValue> carried = TensorsArg(*args[2]);
    const std::vector<c10::IValue> additional = TensorsArg(*args[3]);
    for (int64_t i = 0;; ++i) {
      if (i > kMaxIterations) throw CannotEvaluate{"while_loop ran past a million iterations"};
      std::vector<c10::IValue> in = carried;
      in.insert(in.end(), additional.begin(), additional.end());
      if (!Truth(Subgraph(*args[0], in, depth).at(0))) break;
      carried = Subgraph(*args[1], in, depth);
    }
    BindOutputs(node, carried);
  }

  // Python arithmetic on symbolic ints (_operator.mul, ...).
  bool SymArithmetic(const json& node, const std::string& target) {
    static const std::map<std::string, int> kOps = {
        {"_operator.add", 0}, {"_operator.sub", 1}, {"_operator.mul", 2},
        {"_operator.floordiv", 3}, {"_operator.mod", 4}, {"_operator.eq", 5},
        {"_operator.ne", 6}, {"_operator.lt", 7}, {"_operator.le", 8},
        {"_operator.gt", 9}, {"_operator.ge", 10}};
    auto it = kOps.find(target);
    if (it == kOps.end()) return false;
    const json& inputs = Field(node, "inputs");
    if (!inputs.is_array() || inputs.size() != 2) throw CannotEvaluate{"arithmetic on 2 operands"};
    const c10::IValue a = Argument(inputs[0]["arg"], c10::IntType::get());
    const c10::IValue b = Argument(inputs[1]["arg"], c10::IntType::get());
    if (!a.isInt() || !b.isInt()) throw CannotEvaluate{absl::StrCat(target, " of non-ints")};
    const int64_t x = a.toInt(), y = b.toInt();
    if ((it->second == 3 || it->second == 4) && y == 0) throw CannotEvaluate{"a division by zero"};
    c10::IValue r;
    switch (it->second) {
      case 0: r = x + y; break;
      case 1: r = x - y; break;
      case 2: r = x * y; break;
      case 3: r = (x / y) - ((x % y != 0) && ((x < 0) != (y < 0))); break;
      case 4: r = ((x % y) + y) % y; break;
      case 5: r = x == y; break;
      case 6: r = x != y; break;
      case 7: r = x < y; break;
      case 8: r = x <= y; break;
      case 9: r = x > y; break;
      default: r = x >= y; break;
    }
    BindOutputs(node, {r});
    return true;
  }

  const json* Named(const std::map<std::string, const json*>& named, const char* name) const {
    auto it = named.find(name);
    return it == named.end() ? nullptr : it->second;
  }

  // scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
  // is_causal=False, *, scale=None, enable_gqa=False), at inference.
  at::Tensor Sdpa(const std::map<std::string, const json*>& named) const {
    const c10::TypePtr tensor = c10::TensorType::get();
    auto arg = [&](const char* name) { return Named(named, name); };
    if (!arg("query") || !arg("key") || !arg("value")) throw CannotEvaluate{"sdpa's operands"};
    at::Tensor q = Argument(*arg("query"), tensor).toTensor();
    at::Tensor k = Argument(*arg("key"), tensor).toTensor();
    at::Tensor v = Argument(*arg("value"), tensor).toTensor();
    if (arg("enable_gqa") && Argument(*arg("enable_gqa"), c10::BoolType::get()).toBool() &&
        q.dim() >= 3 && k.size(-3) != q.size(-3)) {
      k = k.repeat_interleave(q.size(-3) / k.size(-3), -3);
      v = v.repeat_interleave(q.size(-3) / v.size(-3), -3);
    }
    double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    if (arg("scale")) {
      const c10::IValue s = Argument(*arg("scale"), c10::FloatType::get());
      if (!s.isNone()) scale = s.toDouble();
    }
    at::Tensor attn = at::matmul(q, k.transpose(-2, -1)) * scale;
    if (arg("is_causal") && Argument(*arg("is_causal"), c10::BoolType::get()).toBool()) {
      const at::Tensor keep =
          at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
      attn = attn.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
    }
    if (arg("attn_mask")) {
      const c10::IValue m = Argument(*arg("attn_mask"), tensor);
      if (m.isTensor()) {
        const at::Tensor mask = m.toTensor();
        attn = mask.scalar_type() == at::kBool
                   ? attn.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity())
                   : attn + mask;
      }
    }
    // torch >= 2.5 takes _safe_softmax here: a fully masked row gives zeros, not NaN.
    const at::Tensor probs = at::softmax(attn, -1);
    const at::Tensor masked = attn.eq(-std::numeric_limits<double>::infinity()).all(-1, true);
    return at::matmul(at::where(masked, at::zeros_like(probs), probs), v);
  }

  // rms_norm(input, normalized_shape, weight=None, eps=None).
  at::Tensor RmsNorm(const std::map<std::string, const json*>& named) const {
    auto arg = [&](const char* name) { return Named(named, name); };
    if (!arg("input") || !arg("normalized_shape")) throw CannotEvaluate{"rms_norm's operands"};
    const at::Tensor x = Argument(*arg("input"), c10::TensorType::get()).toTensor();
    const std::vector<int64_t> shape =
        Argument(*arg("normalized_shape"), c10::ListType::ofInts()).toIntVector();
    std::vector<int64_t> dims;
    for (int64_t i = -static_cast<int64_t>(shape.size()); i < 0; ++i) dims.push_back(i);
    double eps = static_cast<double>(std::numeric_limits<float>::epsilon());
    if (x.scalar_type() == at::kDouble) eps = std::numeric_limits<double>::epsilon();
    if (arg("eps")) {
      const c10::IValue e = Argument(*arg("eps"), c10::FloatType::get());
      if (!e.isNone()) eps = e.toDouble();
    }
    at::Tensor y = x * at::rsqrt((x * x).mean(dims, /*keepdim=*/true) + eps);
    if (arg("weight")) {
      const c10::IValue w = Argument(*arg("weight"), c10::TensorType::get());
      if (w.isTensor()) y = y * w.toTensor();
    }
    return y;
  }

  // _safe_softmax(self, dim, dtype=None): softmax, with zeros where every
  // value along dim is -inf (PyTorch's own definition of it).
  at::Tensor SafeSoftmax(const std::map<std::string, const json*>& named) const {
    auto arg = [&](const char* name) { return Named(named, name); };
    if (!arg("self") || !arg("dim")) throw CannotEvaluate{"_safe_softmax's operands"};
    const at::Tensor x = Argument(*arg("self"), c10::TensorType::get()).toTensor();
    const int64_t dim = Argument(*arg("dim"), c10::IntType::get()).toInt();
    c10::optional<at::ScalarType> dtype;
    if (arg("dtype")) {
      const c10::IValue d = Argument(*arg("dtype"), c10::OptionalType::create(c10::IntType::get()));
      if (!d.isNone()) dtype = static_cast<at::ScalarType>(d.toInt());
    }
    const at::Tensor out = at::softmax(x, dim, dtype);
    const at::Tensor masked = x.eq(-std::numeric_limits<double>::infinity()).all(dim, true);
    return at::where(masked, at::zeros_like(out), out);
  }

  void Node(const json& node, int depth) {
    const std::string target = Target(node);
    static const std::set<std::string> kAssertions = {
        "torch.ops.aten._assert_tensor_metadata.default", "torch.ops.aten._assert_scalar.default",
        "torch.ops.aten.sym_constrain_range.default",
        "torch.ops.aten.sym_constrain_range_for_size.default",
        "torch.ops.aten._assert_async.msg", "torch.ops.aten._assert_async.default"};
    if (kAssertions.count(target) > 0) return;
    if (target == "torch.ops.higher_order.cond" || target == "torch.ops.higher_order.while_loop") {
      ControlFlow(node, target, depth);
      return;
    }
    if (SymArithmetic(node, target)) return;
    // torch.ops.<ns>.<op>.<overload>
    const std::string prefix = "torch.ops.";
    const size_t dot1 = target.find('.', prefix.size());
    const size_t dot2 = target.rfind('.');
    if (target.rfind(prefix, 0) != 0 || dot1 == std::string::npos || dot2 <= dot1) {
      throw CannotEvaluate{absl::StrCat("the target ", target)};
    }
    const std::string op = absl::StrCat(target.substr(prefix.size(), dot1 - prefix.size()), "::",
                                        target.substr(dot1 + 1, dot2 - dot1 - 1));
    std::string overload = target.substr(dot2 + 1);
    if (overload == "default") overload.clear();
    std::map<std::string, const json*> named;
    std::vector<std::string> names;  // in the node's order
    for (const json& in : Field(node, "inputs")) {
      const json& name = Field(in, "name");
      if (!name.is_string()) continue;
      named[name.get<std::string>()] = &in["arg"];
      names.push_back(name.get<std::string>());
    }
    // Symbolic sizes (libtorch 1.13 has no sym_size operator).
    if (op == "aten::sym_size" || op == "aten::sym_stride" || op == "aten::sym_numel" ||
        op == "aten::sym_storage_offset") {
      const at::Tensor self = TensorNamed(Field(*named.at("self"), "as_tensor"));
      int64_t v = 0;
      if (op == "aten::sym_numel") {
        v = self.numel();
      } else if (op == "aten::sym_storage_offset") {
        v = self.storage_offset();
      } else {
        const int64_t dim = Argument(*named.at("dim"), c10::IntType::get()).toInt();
        v = op == "aten::sym_size" ? self.size(dim) : self.stride(dim);
      }
      BindOutputs(node, {c10::IValue(v)});
      return;
    }
    // Ops newer than libtorch 1.13, written out in its own ops (as PyTorch
    // documents them), so that models using them still have a reference.
    if (op == "aten::scaled_dot_product_attention" || op == "aten::rms_norm" ||
        op == "aten::_safe_softmax") {
      BindOutputs(node, {c10::IValue(op == "aten::rms_norm"    ? RmsNorm(named)
                                     : op == "aten::_safe_softmax" ? SafeSoftmax(named)
                                                                   : Sdpa(named))});
      return;
    }
    absl::StatusOr<std::shared_ptr<torch::jit::Operator>> found = FindOperator(op, overload);
    if (!found.ok()) throw CannotEvaluate{std::string(found.status().message())};
    const c10::FunctionSchema& schema = (*found)->schema();
    absl::StatusOr<std::vector<int>> match = MatchNamedArguments(schema, names);
    if (!match.ok()) throw CannotEvaluate{std::string(match.status().message())};
    torch::jit::Stack stack;
    for (size_t i = 0; i < match->size(); ++i) {
      const c10::Argument& a = schema.arguments()[i];
      stack.push_back((*match)[i] < 0 ? *a.default_value()
                                      : Argument(*named.at(names[(*match)[i]]), a.type()));
    }
    torch::jit::Operation operation = (*found)->getOperation();
    operation(stack);
    // A float64 run keeps float tensors in double where a node names float32
    // (a dtype written into the program), as the TorchScript reference cannot.
    BindOutputs(node, stack);
  }

  bool float64_;
  std::unordered_map<std::string, at::Tensor>* trace_;
  std::unordered_map<std::string, c10::IValue> env_;
};

// Runs the program on the request's inputs; its user outputs, flattened.
// With `trace`, also every top-level node's tensor outputs by name.
std::vector<std::vector<Tensor>> Evaluate(
    const json& ep, const std::map<std::string, Tensor>& state, const ReferenceRequest& request,
    bool float64, std::unordered_map<std::string, at::Tensor>* trace = nullptr) {
  c10::InferenceMode inference;
  Evaluator eval(float64, trace);
  auto torch_of = [&](const Tensor& t) {
    absl::StatusOr<at::Tensor> x = ToTorch(t);
    if (!x.ok()) throw CannotEvaluate{std::string(x.status().message())};
    return float64 && x->is_floating_point() ? x->to(at::kDouble) : *x;
  };
  const json& gm = ep["graph_module"];
  const json& sig = Field(gm, "signature");
  size_t k = 0;
  for (const json& spec : Field(sig, "input_specs")) {
    if (!spec.is_object() || spec.size() != 1) throw CannotEvaluate{"a malformed input spec"};
    const std::string kind = spec.begin().key();
    const json& arg = Field(spec.begin().value(), "arg");
    if (kind == "user_input") {
      const json& t = Field(arg, "as_tensor");
      if (!t.is_object()) continue;  // a number torch.export specialized
      if (k >= request.inputs.size()) throw CannotEvaluate{"fewer samples than inputs"};
      const runtime::RunValue& v = request.inputs[k++].value;
      eval.Bind(Field(t, "name").get<std::string>(), torch_of(v.tensor));
    } else {
      const std::string name = Field(arg, "name").get<std::string>();
      auto it = state.find(name);
      if (it == state.end()) throw CannotEvaluate{absl::StrCat("no value for '", name, "'")};
      eval.Bind(name, torch_of(it->second));
    }
  }
  eval.Nodes(Field(gm["graph"], "nodes"), 0);
  std::vector<std::vector<Tensor>> outputs;
  for (const json& spec : Field(sig, "output_specs")) {
    if (!spec.is_object() || spec.size() != 1 || spec.begin().key() != "user_output") continue;
    const json& t = Field(Field(spec.begin().value(), "arg"), "as_tensor");
    if (!t.is_object()) continue;
    absl::StatusOr<std::vector<Tensor>> flat = Flatten(eval.Get(Field(t, "name").get<std::string>()));
    if (!flat.ok()) throw CannotEvaluate{std::string(flat.status().message())};
    outputs.push_back(*std::move(flat));
  }
  return outputs;
}

// The trace of ReferenceRequest::trace: the program already opened, imported with
// request.import and an ExportTrace, evaluated keeping every traced tensor;
// each traced ir value with libtorch's value for it.
void RunTraced(const importer::export_internal::Program& program,
               const std::map<std::string, Tensor>& state, const ReferenceRequest& request,
               ReferenceResult& result) {
  importer::ExportTrace trace;
  importer::export_internal::ProgramImporter importer(program, request.import, nullptr);
  importer.set_trace(&trace);
  absl::StatusOr<ir::Graph> graph = importer.Run();
  if (!graph.ok()) {
    result.trace_problem = std::string(graph.status().message());
    return;
  }
  std::unordered_map<std::string, at::Tensor> values;
  Evaluate(program.ep, state, request, /*float64=*/false, &values);
  for (const importer::ExportTrace::Entry& entry : trace.nodes) {
    for (const auto& [name, id] : entry.outputs) {
      verify::TraceValue traced;
      traced.value = static_cast<int32_t>(id);
      traced.op = entry.op;
      traced.where = absl::StrCat("node ", entry.index, " (", entry.op, ") output %", name);
      if (auto it = values.find(name); it != values.end()) {
        absl::StatusOr<std::vector<Tensor>> t = Flatten(c10::IValue(it->second));
        if (t.ok() && t->size() == 1) traced.ref = std::move((*t)[0]);
      }
      result.trace.push_back(std::move(traced));
    }
  }
  result.trace_graph = *std::move(graph);
}

}  // namespace

absl::StatusOr<ReferenceResult> RunExportReference(std::string_view bytes,
                                                   const ReferenceRequest& request) {
  ASSIGN_OR_RETURN(importer::export_internal::Program program,
                   importer::export_internal::OpenProgram(bytes));
  std::map<std::string, Tensor> state;
  try {  // the weights, read as the importer reads them, from the archive opened once
    const importer::ImportOptions options;
    importer::export_internal::ProgramImporter importer(program, options, nullptr);
    ASSIGN_OR_RETURN(state, importer.State());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("PT2 archive: malformed program: ", e.what()));
  }
  ReferenceResult result;
  if (request.trace) {
    try {
      RunTraced(program, state, request, result);
    } catch (const CannotEvaluate& e) {
      result.trace_problem = absl::StrCat("libtorch 1.13 cannot evaluate this program: ", e.why);
    } catch (const nlohmann::json::exception& e) {
      result.trace_problem = absl::StrCat("a malformed program: ", e.what());
    } catch (const std::exception& e) {
      if (OutOfMemory(e)) throw;
      result.trace_problem = std::string(e.what()).substr(0, 200);
    }
    if (!result.trace_problem.empty()) {
      result.trace.clear();
      result.trace_graph.reset();
    }
    return result;
  }
  try {
    std::vector<std::vector<Tensor>> outputs = Evaluate(program.ep, state, request, request.float64);
    if (request.float64) {
      for (std::vector<Tensor>& flat : outputs) {
        for (Tensor& t : flat) result.float64_outputs.push_back(std::move(t));
      }
    } else {
      result.outputs = std::move(outputs);
    }
  } catch (const CannotEvaluate& e) {
    (request.float64 ? result.float64_problem : result.unavailable) =
        absl::StrCat("libtorch 1.13 cannot evaluate this program: ", e.why);
  } catch (const nlohmann::json::exception& e) {
    (request.float64 ? result.float64_problem : result.unavailable) =
        absl::StrCat("a malformed program: ", e.what());
  } catch (const std::exception& e) {
    if (OutOfMemory(e)) throw;
    (request.float64 ? result.float64_problem : result.rejected) = FirstLine(e);
  }
  return result;
}

}  // namespace kiln::fallback
