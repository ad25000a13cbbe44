// Importer tests in two layers:
//  - small torch graphs written as TorchScript IR (torch::jit::parseIR), imported
//    with ImportTorchGraph and compared with the expected Kiln IR text or op counts;
//  - the archives from tests/fixtures/make_models.py ($KILN_FIXTURES), imported
//    end to end through ImportTorchScriptFile.
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <ATen/Functions.h>

#include "absl/strings/str_cat.h"
#include "engine/importer/torchscript/aten_op_table.h"
#include "engine/importer/torchscript/import_context.h"
#include "engine/importer/torchscript/torchscript_importer.h"
#include "engine/ir/graph.h"
#include "engine/passes/pass.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::importer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// Parses `ir_text`, then replaces the graph inputs named in `constants` by
// prim::Constant tensors (parseIR cannot spell tensor constants), the way
// freezing turns parameters into constants.
std::shared_ptr<torch::jit::Graph> Parse(const std::string& ir_text,
                                         const std::map<std::string, at::Tensor>& constants = {}) {
  auto graph = std::make_shared<torch::jit::Graph>();
  std::unordered_map<std::string, torch::jit::Value*> vmap;
  torch::jit::parseIR(ir_text, graph.get(), vmap);
  // parseIR keeps only the input names; restore the rest so outputs read as written.
  for (const auto& [name, value] : vmap) {
    bool numeric = name.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric) value->setDebugName(name);
  }
  torch::jit::WithInsertPoint guard(graph->block()->nodes().front());
  for (const auto& [name, tensor] : constants) {
    torch::jit::Value* input = vmap.at(name);
    torch::jit::Value* constant = graph->insertConstant(tensor);
    constant->setDebugName(name);
    input->replaceAllUsesWith(constant);
    graph->eraseInput(input->offset());
  }
  return graph;
}

absl::StatusOr<ir::Graph> ImportText(const std::string& ir_text,
                                     const std::map<std::string, at::Tensor>& constants = {},
                                     const ImportOptions& options = {}) {
  return ImportTorchGraph(*Parse(ir_text, constants), options);
}

// Strict: unsupported ops are an error instead of Fallback nodes.
absl::StatusOr<ir::Graph> ImportStrict(const std::string& ir_text,
                                       const std::map<std::string, at::Tensor>& constants = {}) {
  ImportOptions options;
  options.strict = true;
  return ImportTorchGraph(*Parse(ir_text, constants), options);
}

// Op name -> count, like ORT's CountOpsInGraph.
std::map<std::string, int> OpHistogram(const ir::Graph& graph) {
  std::map<std::string, int> counts;
  for (const ir::Node& node : graph.nodes()) ++counts[std::string(ir::OpName(node.kind))];
  return counts;
}

std::vector<std::string> InputNames(const ir::Graph& graph) {
  std::vector<std::string> names;
  for (ir::ValueId v : graph.inputs()) names.push_back(graph.value(v).name);
  return names;
}

const ir::Node& Producer(const ir::Graph& graph, ir::ValueId v) {
  return graph.node(graph.value(v).producer);
}

// The value of a constant Python number operand, checking that it keeps its
// own kind (a float is FP64, an int INT64): the kernels promote it as PyTorch
// promotes Python numbers.
double ScalarValue(const ir::Graph& graph, ir::ValueId v, ir::ValueKind kind = ir::ValueKind::kFloat) {
  const Tensor* t = graph.ConstantValue(v);
  EXPECT_NE(t, nullptr);
  if (t == nullptr) return 0;
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(graph.value(v).kind, kind);
  if (kind == ir::ValueKind::kInt) {
    EXPECT_EQ(t->dtype(), DType::kInt64);
    return static_cast<double>(*t->data<int64_t>());
  }
  EXPECT_EQ(t->dtype(), DType::kF64);
  return *t->data<double>();
}

// ------------------------------------------------------------ parsed graphs

TEST(ImporterIrTest, ImportsUnaryChainAsExpectedText) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x.1 : Tensor):
  %min : float = prim::Constant[value=0.]()
  %max : float = prim::Constant[value=6.]()
  %a : Tensor = aten::relu(%x.1)
  %b : Tensor = aten::hardtanh(%a, %min, %max)
  %approx : str = prim::Constant[value="tanh"]()
  %c : Tensor = aten::gelu(%b, %approx)
  return (%c))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ir::PrintGraph(*g),
            "graph(%x : ?[?]) {\n"
            "  %a : ?[?] = Relu(%x)  # aten::relu\n"
            "  %b : ?[?] = Clip(%a) {integer_bounds=true, max=6, min=0}  # aten::hardtanh\n"
            "  %c : ?[?] = Gelu(%b) {approximate=\"tanh\"}  # aten::gelu\n"
            "  return (output0=%c)\n"
            "}\n");
}

TEST(ImporterIrTest, InputTypesFromTheTorchTypeWhenKnown) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Float(2, 3), %y : Tensor):
  %r : Tensor = aten::mul(%x, %y)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->value(g->inputs()[0]).type.ToString(), "FP32[2, 3]");
  EXPECT_EQ(g->value(g->inputs()[1]).type.ToString(), "?[?]");
}

TEST(ImporterIrTest, ScalarOperandBecomesZeroDimConstantWithAlphaFolded) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %s : float = prim::Constant[value=1.5]()
  %alpha : int = prim::Constant[value=2]()
  %r : Tensor = aten::sub(%x, %s, %alpha)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(OpHistogram(*g), UnorderedElementsAre(Pair("Constant", 1), Pair("Sub", 1)));
  const ir::Node& sub = Producer(*g, g->outputs()[0]);
  ASSERT_EQ(sub.inputs.size(), 2u);
  EXPECT_EQ(sub.inputs[0], g->inputs()[0]);
  EXPECT_EQ(ScalarValue(*g, sub.inputs[1]), 3.0);
  EXPECT_EQ(sub.source_op, "aten::sub");
}

TEST(ImporterIrTest, TensorAlphaDecomposesIntoMul) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %y : Tensor):
  %alpha : float = prim::Constant[value=0.25]()
  %r : Tensor = aten::add(%x, %y, %alpha)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(OpHistogram(*g),
              UnorderedElementsAre(Pair("Constant", 1), Pair("Mul", 1), Pair("Add", 1)));
  const ir::Node& add = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(add.inputs[0], g->inputs()[0]);
  const ir::Node& mul = Producer(*g, add.inputs[1]);
  EXPECT_EQ(mul.kind, ir::OpKind::kMul);
  EXPECT_EQ(mul.inputs[0], g->inputs()[1]);
  EXPECT_EQ(ScalarValue(*g, mul.inputs[1]), 0.25);
}

TEST(ImporterIrTest, ScalarOnTheLeftAndPythonIntsStayInt64) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %w : Tensor):
  %two : int = prim::Constant[value=2]()
  %a : Tensor = aten::mul(%two, %x)
  %b : Tensor = aten::div(%w, %two)
  %r : Tensor = aten::add(%a, %b, %two)
  return (%r))IR",
                                           {{"w", at::ones({3}, at::kDouble)}});
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& add = Producer(*g, g->outputs()[0]);
  const ir::Node& mul = Producer(*g, add.inputs[0]);
  EXPECT_EQ(mul.kind, ir::OpKind::kMul);
  EXPECT_EQ(ScalarValue(*g, mul.inputs[0], ir::ValueKind::kInt), 2.0);
  const ir::Node& div = Producer(*g, Producer(*g, add.inputs[1]).inputs[0]);
  EXPECT_EQ(div.kind, ir::OpKind::kDiv);
  // An int, not the weight's FP64: FP64 / int stays FP64 by promotion, and an
  // int tensor / int gives FP32, which a pre-typed divisor would get wrong.
  EXPECT_EQ(ScalarValue(*g, div.inputs[1], ir::ValueKind::kInt), 2.0);
}

TEST(ImporterIrTest, DivWithRoundingModeBecomesFloorDivOrTruncatedDiv) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor, %y : Tensor):
  %floor : str = prim::Constant[value="floor"]()
  %trunc : str = prim::Constant[value="trunc"]()
  %a : Tensor = aten::div(%x, %y, %floor)
  %b : Tensor = aten::div(%a, %y, %trunc)
  return (%b))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(OpHistogram(*g),
              UnorderedElementsAre(Pair("FloorDiv", 1), Pair("TruncDiv", 1)));
}

TEST(ImporterIrTest, AddmmDecomposesAndTransposesConstantWeight) {
  at::Tensor w = at::arange(6, at::kFloat).reshape({2, 3});
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %w : Tensor, %b : Tensor):
  %one : int = prim::Constant[value=1]()
  %half : float = prim::Constant[value=0.5]()
  %wt : Tensor = aten::t(%w)
  %r : Tensor = aten::addmm(%b, %x, %wt, %half, %one)
  return (%r))IR",
                                           {{"w", w}, {"b", at::zeros({2})}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(OpHistogram(*g), UnorderedElementsAre(Pair("Constant", 3), Pair("MatMul", 1),
                                                    Pair("Mul", 1), Pair("Add", 1)));
  const ir::Node& add = Producer(*g, g->outputs()[0]);
  const ir::Node& mm = Producer(*g, add.inputs[0]);
  ASSERT_EQ(mm.kind, ir::OpKind::kMatMul);
  const Tensor* wt = g->ConstantValue(mm.inputs[1]);
  ASSERT_NE(wt, nullptr);
  EXPECT_EQ(wt->dims(), (Dims{3, 2}));
  // Row-major [3, 2] of the transpose of [[0, 1, 2], [3, 4, 5]].
  EXPECT_THAT(std::vector<float>(wt->data<float>(), wt->data<float>() + 6),
              ElementsAre(0, 3, 1, 4, 2, 5));
  const ir::Node& scaled_bias = Producer(*g, add.inputs[1]);
  EXPECT_EQ(scaled_bias.kind, ir::OpKind::kMul);
  // beta is a 0-dim constant of the operands' dtype (a 0-dim constant
  // promotes as a Python number, so it never widens the result).
  const Tensor* beta = g->ConstantValue(scaled_bias.inputs[1]);
  ASSERT_NE(beta, nullptr);
  ASSERT_EQ(beta->dtype(), DType::kF32);
  EXPECT_FLOAT_EQ(*beta->data<float>(), 0.5f);
}

// A traced x[:, 1:3] records slice(x, 0, 0, INT64_MAX, 1) for the leading ':';
// INT64_MAX stays the open end.
TEST(ImporterIrTest, SliceAttributesFromTheTracedForm) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %three : int = prim::Constant[value=3]()
  %end : int = prim::Constant[value=9223372036854775807]()
  %a : Tensor = aten::slice(%x, %zero, %zero, %end, %one)
  %b : Tensor = aten::slice(%a, %one, %one, %three, %one)
  return (%b))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& b = Producer(*g, g->outputs()[0]);
  const ir::Node& a = Producer(*g, b.inputs[0]);
  EXPECT_EQ(a.attrs.GetInt("axis"), 0);
  EXPECT_EQ(a.attrs.GetInt("start"), 0);
  EXPECT_EQ(a.attrs.GetInt("end"), INT64_MAX);
  EXPECT_EQ(b.attrs.GetInt("axis"), 1);
  EXPECT_EQ(b.attrs.GetInt("start"), 1);
  EXPECT_EQ(b.attrs.GetInt("end"), 3);
  EXPECT_EQ(b.attrs.GetInt("step"), 1);
}

TEST(ImporterIrTest, TransposeOfRuntimeTensorIsAPermute) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor):
  %r : Tensor = aten::t(%x)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& t = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(t.kind, ir::OpKind::kPermute);
  EXPECT_EQ(t.attrs.GetInt("dim0"), 0);
  EXPECT_EQ(t.attrs.GetInt("dim1"), 1);
  EXPECT_TRUE(t.attrs.GetBool("identity_below_rank2"));
}

TEST(ImporterIrTest, ConvolutionAttributesAndOptionalBias) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %w : Tensor):
  %none : NoneType = prim::Constant()
  %s2 : int[] = prim::Constant[value=[2, 2]]()
  %p1 : int[] = prim::Constant[value=[1]]()
  %d1 : int[] = prim::Constant[value=[1, 1]]()
  %out_pad : int[] = prim::Constant[value=[0, 0]]()
  %false : bool = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %groups : int = prim::Constant[value=1]()
  %y : Tensor = aten::_convolution(%x, %w, %none, %s2, %p1, %d1, %false, %out_pad, %groups, %false, %false, %true, %true)
  %k : int[] = prim::Constant[value=[3, 3]]()
  %empty : int[] = prim::ListConstruct()
  %z : Tensor = aten::max_pool2d(%y, %k, %empty, %p1, %d1, %true)
  return (%z))IR",
                                           {{"w", at::ones({4, 3, 3, 3})}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ir::PrintGraph(*g),
            "graph(%x : ?[?]) {\n"
            "  %w : FP32[4, 3, 3, 3] = Constant() {value=tensor<FP32[4, 3, 3, 3]>}\n"
            "  %y : ?[?] = Conv(%x, %w) {dilation=[1, 1], groups=1, padding=[1, 1], "
            "stride=[2, 2]}  # aten::_convolution\n"
            "  %z : ?[?] = MaxPool(%y) {ceil_mode=true, dilation=[1, 1], kernel=[3, 3], "
            "padding=[1, 1], stride=[3, 3]}  # aten::max_pool2d\n"
            "  return (output0=%z)\n"
            "}\n");
}

TEST(ImporterIrTest, TransposedConvolutionBecomesConvTranspose) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor, %w : Tensor):
  %none : NoneType = prim::Constant()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %z : int[] = prim::Constant[value=[0, 0]]()
  %true : bool = prim::Constant[value=1]()
  %false : bool = prim::Constant[value=0]()
  %groups : int = prim::Constant[value=1]()
  %y : Tensor = aten::_convolution(%x, %w, %none, %s, %z, %s, %true, %z, %groups, %false, %false, %true, %true)
  return (%y))IR",
                                           {{"w", at::ones({3, 4, 3, 3})}});
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& conv = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(conv.kind, ir::OpKind::kConvTranspose);
  EXPECT_EQ(conv.attrs.GetInts("output_padding"), (std::vector<int64_t>{0, 0}));
}

TEST(ImporterIrTest, Conv2dSamePaddingAndPoolsAndNorms) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %w : Tensor, %b : Tensor, %mean : Tensor, %var : Tensor):
  %one : int[] = prim::Constant[value=[1, 1]]()
  %same : str = prim::Constant[value="same"]()
  %groups : int = prim::Constant[value=1]()
  %c : Tensor = aten::conv2d(%x, %w, %b, %one, %same, %one, %groups)
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %momentum : float = prim::Constant[value=0.1]()
  %eps : float = prim::Constant[value=1e-05]()
  %bn : Tensor = aten::batch_norm(%c, %none, %none, %mean, %var, %false, %momentum, %eps, %false)
  %k : int[] = prim::Constant[value=[2, 2]]()
  %zero : int[] = prim::Constant[value=[0, 0]]()
  %true : bool = prim::Constant[value=1]()
  %ap : Tensor = aten::avg_pool2d(%bn, %k, %k, %zero, %false, %true, %none)
  %out : int[] = prim::Constant[value=[1, 1]]()
  %gap : Tensor = aten::adaptive_avg_pool2d(%ap, %out)
  %shape : int[] = prim::Constant[value=[4]]()
  %ln : Tensor = aten::layer_norm(%gap, %shape, %none, %none, %eps, %true)
  return (%ln))IR",
                                           {{"w", at::ones({4, 3, 5, 5})},
                                            {"b", at::zeros({4})},
                                            {"mean", at::zeros({4})},
                                            {"var", at::ones({4})}});
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, const ir::Node*> by_op;
  for (const ir::Node& n : g->nodes()) by_op[std::string(ir::OpName(n.kind))] = &n;
  EXPECT_EQ(by_op["Conv"]->attrs.GetInts("padding"), (std::vector<int64_t>{2, 2}));
  const ir::Node& bn = *by_op["BatchNorm"];
  ASSERT_EQ(bn.inputs.size(), 5u);
  EXPECT_FLOAT_EQ(g->ConstantValue(bn.inputs[1])->data<float>()[0], 1.0f);  // weight = 1
  EXPECT_FLOAT_EQ(g->ConstantValue(bn.inputs[2])->data<float>()[3], 0.0f);  // bias = 0
  EXPECT_DOUBLE_EQ(bn.attrs.GetFloat("eps"), 1e-5);
  EXPECT_EQ(by_op["AvgPool"]->attrs.GetInt("divisor_override", -1), 0);
  EXPECT_TRUE(by_op["AvgPool"]->attrs.GetBool("count_include_pad"));
  EXPECT_EQ(by_op["AdaptiveAvgPool"]->attrs.GetInts("output_size"),
            (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(by_op["LayerNorm"]->inputs.size(), 1u);
  EXPECT_EQ(by_op["LayerNorm"]->attrs.GetInts("normalized_shape"), (std::vector<int64_t>{4}));
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
}

TEST(ImporterIrTest, ShapeOpsAndReductions) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %m1 : int = prim::Constant[value=-1]()
  %f : Tensor = aten::flatten(%x, %one, %m1)
  %shape : int[] = prim::ListConstruct(%m1, %one)
  %v : Tensor = aten::view(%f, %shape)
  %list : Tensor[] = prim::ListConstruct(%v, %y)
  %c : Tensor = aten::cat(%list, %m1)
  %dims : int[] = prim::Constant[value=[0, 1]]()
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %m : Tensor = aten::mean(%c, %dims, %true, %none)
  %s : Tensor = aten::softmax(%m, %m1, %none)
  %d : Tensor = aten::contiguous(%s, %none)
  return (%d))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ir::PrintGraph(*g),
            "graph(%x : ?[?], %y : ?[?]) {\n"
            "  %f : ?[?] = Flatten(%x) {end_dim=-1, start_dim=1}  # aten::flatten\n"
            "  %v : ?[?] = Reshape(%f) {shape=[-1, 1]}  # aten::view\n"
            "  %c : ?[?] = Concat(%v, %y) {axis=-1}  # aten::cat\n"
            "  %m : ?[?] = Mean(%c) {axes=[0, 1], keepdim=true}  # aten::mean\n"
            "  %s : ?[?] = Softmax(%m) {axis=-1}  # aten::softmax\n"
            "  return (output0=%s)\n"
            "}\n");
}

TEST(ImporterIrTest, RunTimeShapeBecomesAShapeOperand) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %m1 : int = prim::Constant[value=-1]()
  %n : int = aten::size(%x, %zero)
  %shape : int[] = prim::ListConstruct(%n, %m1)
  %v : Tensor = aten::view(%x, %shape)
  return (%v))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ir::PrintGraph(*g),
            "graph(%x : ?[?]) {\n"
            "  %n : int = Size(%x) {dim=0}  # aten::size\n"
            "  %m1 : int = Constant() {value=-1}\n"
            "  %shape : int[] = ListConstruct(%n, %m1)  # prim::ListConstruct\n"
            "  %v : ?[?] = Reshape(%x, %shape)  # aten::view\n"
            "  return (output0=%v)\n"
            "}\n");
}

// What tracing records for shufflenet's channel shuffle: sizes through
// NumToTensor, a floor_divide of 0-dim tensors, and aten::Int back.
TEST(ImporterIrTest, TracedShapeArithmeticBecomesScalarOps) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %two : Tensor):
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %2 : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %b : int = aten::size(%x, %0)
  %c : int = aten::size(%x, %1)
  %ct : Tensor = prim::NumToTensor(%c)
  %g : Tensor = aten::floor_divide(%ct, %two)
  %gi : int = aten::Int(%g)
  %shape : int[] = prim::ListConstruct(%b, %2, %gi, %m1)
  %v : Tensor = aten::view(%x, %shape)
  return (%v))IR",
                                           {{"two", at::scalar_tensor(2, at::kLong)}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(OpHistogram(*g),
              UnorderedElementsAre(Pair("Size", 2), Pair("ScalarBinary", 1), Pair("Constant", 3),
                                   Pair("ListConstruct", 1), Pair("Reshape", 1)));
  const ir::Node& view = Producer(*g, g->outputs()[0]);
  ASSERT_EQ(view.inputs.size(), 2u);
  const ir::Node& list = Producer(*g, view.inputs[1]);
  const ir::Node& div = Producer(*g, list.inputs[2]);
  EXPECT_EQ(div.kind, ir::OpKind::kScalarBinary);
  EXPECT_EQ(div.attrs.GetString("op"), "floordiv");
  EXPECT_EQ(g->value(list.inputs[2]).kind, ir::ValueKind::kInt);
}

// Traced sequence-first nn.MultiheadAttention: head_dim = embed_dim // num_heads
// is aten::div.Tensor_mode(trunc) on a size and a 0-dim constant. It must stay
// native (strict import), as an int ScalarBinary "truncdiv".
TEST(ImporterIrTest, TracedTruncDivOnSizesIsAScalarTruncDiv) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor, %heads : Tensor):
  %2 : int = prim::Constant[value=2]()
  %trunc : str = prim::Constant[value="trunc"]()
  %e : int = aten::size(%x, %2)
  %et : Tensor = prim::NumToTensor(%e)
  %hd : Tensor = aten::div(%et, %heads, %trunc)
  %hdi : int = aten::Int(%hd)
  %m1 : int = prim::Constant[value=-1]()
  %shape : int[] = prim::ListConstruct(%m1, %hdi)
  %v : Tensor = aten::view(%x, %shape)
  return (%v))IR",
                                             {{"heads", at::scalar_tensor(4, at::kLong)}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(OpHistogram(*g).count("Fallback"), 0u);
  const ir::Node& view = Producer(*g, g->outputs()[0]);
  ASSERT_EQ(view.inputs.size(), 2u);
  const ir::Node& list = Producer(*g, view.inputs[1]);
  ASSERT_EQ(list.inputs.size(), 2u);
  const ir::Node& div = Producer(*g, list.inputs[1]);
  EXPECT_EQ(div.kind, ir::OpKind::kScalarBinary);
  EXPECT_EQ(div.attrs.GetString("op"), "truncdiv");
  EXPECT_EQ(g->value(list.inputs[1]).kind, ir::ValueKind::kInt);
}

TEST(ImporterIrTest, IfAndLoopBecomeBlocks) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %n : int):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %s : Tensor = aten::sum(%x, %none)
  %pos : Tensor = aten::gt(%s, %zero)
  %c : bool = aten::Bool(%pos)
  %y : Tensor = prim::If(%c)
    block0():
      %r : Tensor = aten::relu(%x)
      -> (%r)
    block1():
      -> (%x)
  %z : Tensor = prim::Loop(%n, %true, %y)
    block0(%i : int, %acc : Tensor):
      %sq : Tensor = aten::mul(%acc, %acc)
      -> (%true, %sq)
  return (%z))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string text = ir::PrintGraph(*g);
  EXPECT_THAT(text, HasSubstr("graph(%x : ?[?], %n : int)"));
  EXPECT_THAT(text, HasSubstr("%c : bool = ToScalar(%pos) {type=\"bool\"}  # aten::Bool"));
  EXPECT_THAT(text, HasSubstr("%y : ?[?] = If(%c)  # prim::If\n"
                              "    then():\n"
                              "      %r : ?[?] = Relu(%x)  # aten::relu\n"
                              "      -> (%r)\n"
                              "    else():\n"
                              "      -> (%x)\n"));
  EXPECT_THAT(text, HasSubstr("= Loop(%n, %true, %y)  # prim::Loop\n"
                              "    body(%i : int, %acc : ?[?]):\n"
                              "      %sq : ?[?] = Mul(%acc, %acc)  # aten::mul\n"
                              "      -> (%true, %sq)\n"));
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
}

TEST(ImporterIrTest, AppendInALoopThreadsTheListThroughIt) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %n : int = aten::size(%x, %zero)
  %acc : Tensor[] = prim::ListConstruct()
  %x2 : Tensor = prim::Loop(%n, %true, %x)
    block0(%i : int, %xi : Tensor):
      %r : Tensor = aten::relu(%xi)
      %l : Tensor[] = aten::append(%acc, %r)
      -> (%true, %xi)
  %c : Tensor = aten::cat(%acc, %zero)
  return (%c))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& cat = Producer(*g, g->outputs()[0]);
  ASSERT_EQ(cat.inputs.size(), 1u);
  const ir::Value& list = g->value(cat.inputs[0]);
  EXPECT_EQ(list.kind, ir::ValueKind::kTensorList);
  const ir::Node& loop = g->node(list.producer);
  EXPECT_EQ(loop.kind, ir::OpKind::kLoop);
  EXPECT_EQ(loop.inputs.size(), 4u);  // trips, cond, x, and the list carried through
  EXPECT_EQ(g->block(loop.blocks[0]).params.size(), 3u);
  EXPECT_EQ(g->value(g->block(loop.blocks[0]).results[2]).kind, ir::ValueKind::kTensorList);
}

TEST(ImporterIrTest, OptionalArgumentAndIsNone) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %y : Tensor?):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %has : bool = aten::__isnot__(%y, %none)
  %r : Tensor = prim::If(%has)
    block0():
      %yy : Tensor = prim::unchecked_cast(%y)
      %s : Tensor = aten::add(%x, %yy, %one)
      -> (%s)
    block1():
      -> (%x)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->value(g->inputs()[1]).optional);
  const std::string text = ir::PrintGraph(*g);
  EXPECT_THAT(text, HasSubstr("%y : ?[?]?"));
  EXPECT_THAT(text, HasSubstr("IsNone(%y)"));
  EXPECT_THAT(text, HasSubstr("ScalarUnary("));
}

TEST(ImporterIrTest, UnsupportedOpBecomesAFallbackNode) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %r : Tensor = aten::logcumsumexp(%x, %one)
  %y : Tensor = aten::relu(%r)
  return (%y))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& fb = Producer(*g, Producer(*g, g->outputs()[0]).inputs[0]);
  ASSERT_EQ(fb.kind, ir::OpKind::kFallback);
  EXPECT_EQ(fb.source_op, "aten::logcumsumexp");
  EXPECT_EQ(fb.attrs.GetString("op"), "aten::logcumsumexp");
  EXPECT_EQ(fb.attrs.GetString("args"), "in;const");
  EXPECT_EQ(fb.attrs.GetInt("arg1"), 1);
  EXPECT_THAT(fb.attrs.GetString("schema"), HasSubstr("logcumsumexp(Tensor self, int dim)"));
  EXPECT_THAT(FallbackOps(*g), ElementsAre("aten::logcumsumexp"));
}

// Binding an op's libtorch twin may add nodes to the graph (an RNN's twin
// binds its list of weights, one constant per tensor), which moves the graph's
// nodes. The importer once held a reference to the native node across that: a
// read of freed memory, which crashed kiln-parity about once in 70 runs.
// Memcheck sees it every time (memcheck.parity_ops; this test under valgrind).
// The weights are bound once, so the twin reads the native node's constants.
TEST(ImporterIrTest, AFrozenRnnsWeightsAreBoundOnceAndItsTwinReadsThem) {
  // A frozen nn.LSTM: its weights one Tensor[] constant, as freezing writes it.
  std::shared_ptr<torch::jit::Graph> graph = Parse(R"IR(
graph(%x : Float(5, 1, 3), %params : Tensor[]):
  %true : bool = prim::Constant[value=1]()
  %false : bool = prim::Constant[value=0]()
  %layers : int = prim::Constant[value=2]()
  %dropout : float = prim::Constant[value=0.]()
  %shape : int[] = prim::Constant[value=[2, 1, 4]]()
  %dtype : int = prim::Constant[value=6]()
  %none : NoneType = prim::Constant()
  %h0 : Tensor = aten::zeros(%shape, %dtype, %none, %none, %none)
  %hx : Tensor[] = prim::ListConstruct(%h0, %h0)
  %out : Tensor, %h : Tensor, %c : Tensor = aten::lstm(%x, %hx, %params, %true, %layers, %dropout, %false, %false, %false)
  return (%out))IR");
  c10::List<at::Tensor> weights;
  for (int layer = 0; layer < 2; ++layer) {
    weights.push_back(at::randn({16, layer == 0 ? 3 : 4}));  // w_ih
    weights.push_back(at::randn({16, 4}));                    // w_hh
    weights.push_back(at::randn({16}));                       // b_ih
    weights.push_back(at::randn({16}));                       // b_hh
  }
  {
    torch::jit::WithInsertPoint guard(graph->block()->nodes().front());
    graph->inputs()[1]->replaceAllUsesWith(graph->insertConstant(weights));
    graph->eraseInput(1);
  }
  absl::StatusOr<ir::Graph> g = ImportTorchGraph(*graph, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(FallbackOps(*g), ::testing::IsEmpty());
  const ir::Node& lstm = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(lstm.source_op, "aten::lstm");
  // The twin passes libtorch the node's own inputs: x, the two states (one
  // zeros tensor twice, so both at its first position), the eight weights.
  EXPECT_EQ(lstm.attrs.GetInts("fallback.inputs"),
            (std::vector<int64_t>{0, 1, 1, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(lstm.attrs.GetString("fallback.op"), "aten::lstm");
}

TEST(ImporterIrTest, InPlaceOpRebindsItsInput) {
  // After relu_(x), later reads of %x must see the relu result.
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::relu_(%x)
  %r : Tensor = aten::add(%x, %y, %one)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::Node& add = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(Producer(*g, add.inputs[0]).kind, ir::OpKind::kRelu);
  EXPECT_EQ(add.inputs[0], add.inputs[1]);
}

TEST(ImporterIrTest, TupleReturnGivesSeveralOutputs) {
  ImportOptions options;
  options.input_names = {"features"};
  options.output_names = {"probs"};
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %none : NoneType = prim::Constant()
  %p : float = prim::Constant[value=0.5]()
  %false : bool = prim::Constant[value=0]()
  %d : Tensor = aten::dropout(%x, %p, %false)
  %a : Tensor = aten::sigmoid(%d)
  %b : Tensor = aten::tanh(%x)
  %t : (Tensor, Tensor) = prim::TupleConstruct(%a, %b)
  return (%t))IR",
                                           {}, options);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(InputNames(*g), ElementsAre("features"));
  EXPECT_THAT(g->output_names(), ElementsAre("probs", "output1"));
  EXPECT_EQ(Producer(*g, g->outputs()[0]).kind, ir::OpKind::kSigmoid);
  EXPECT_EQ(Producer(*g, g->outputs()[0]).inputs[0], g->inputs()[0]);  // dropout dropped
  EXPECT_EQ(Producer(*g, g->outputs()[1]).kind, ir::OpKind::kTanh);
}

TEST(ImporterIrTest, TooManyNamesOrDuplicateNamesAreInvalid) {
  const std::string text = R"IR(
graph(%x : Tensor, %y : Tensor):
  %r : Tensor = aten::mul(%x, %y)
  return (%r))IR";
  ImportOptions options;
  options.input_names = {"a", "a"};
  EXPECT_EQ(ImportText(text, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.input_names = {"a", "b", "c"};
  EXPECT_EQ(ImportText(text, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.input_names = {};
  options.output_names = {"a", "b"};
  EXPECT_EQ(ImportText(text, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ImporterIrTest, StrictImportListsEveryUnsupportedOpOnceSorted) {
  const std::string text = R"IR(
graph(%x : Tensor, %flag : bool):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::logcumsumexp(%x, %one)
  %b : Tensor = aten::i0(%a)
  %c : Tensor = prim::If(%flag)
    block0():
      %d : Tensor = aten::special_erfcx(%b)
      -> (%d)
    block1():
      %e : Tensor = aten::logcumsumexp(%b, %one)
      -> (%e)
  %r : Tensor = aten::relu(%c)
  return (%r))IR";
  absl::StatusOr<ir::Graph> g = ImportStrict(text);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(g.status().message(),
            "unsupported ops: aten::i0, aten::logcumsumexp, aten::special_erfcx");
  // Without strict, they run through the fallback.
  absl::StatusOr<ir::Graph> lenient = ImportText(text);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_THAT(FallbackOps(*lenient),
              ElementsAre("aten::i0", "aten::logcumsumexp", "aten::special_erfcx"));
}

TEST(ImporterIrTest, ScalarArgumentsAreInputsOfTheirKind) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor, %k : int, %s : float, %b : bool):
  %r : Tensor = aten::relu(%x)
  return (%r))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->value(g->inputs()[1]).kind, ir::ValueKind::kInt);
  EXPECT_EQ(g->value(g->inputs()[2]).kind, ir::ValueKind::kFloat);
  EXPECT_EQ(g->value(g->inputs()[3]).kind, ir::ValueKind::kBool);
  absl::StatusOr<ir::Graph> str = ImportText(R"IR(
graph(%x : Tensor, %name : str):
  %r : Tensor = aten::relu(%x)
  return (%r))IR");
  EXPECT_EQ(str.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(str.status().message(), HasSubstr("'name'"));
}

// What nn.TransformerEncoder records traced under no_grad with a padding
// mask: a nested tensor from the mask, the fused layer on it, and padding
// back. Natively (strict import), the layer's attention gets the positions
// past each length as a key padding mask and the padding is a Where and a
// Slice to the longest length.
TEST(ImporterIrTest, NestedEncoderLayerBecomesKeyPaddingMaskAndTrim) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor, %pad : Tensor, %qkv_w : Tensor, %qkv_b : Tensor, %proj_w : Tensor,
      %proj_b : Tensor, %n1_w : Tensor, %n1_b : Tensor, %n2_w : Tensor, %n2_b : Tensor,
      %f1_w : Tensor, %f1_b : Tensor, %f2_w : Tensor, %f2_b : Tensor):
  %false : bool = prim::Constant[value=0]()
  %e : int = prim::Constant[value=16]()
  %h : int = prim::Constant[value=4]()
  %eps : float = prim::Constant[value=1.0000000000000001e-05]()
  %zero : float = prim::Constant[value=0.]()
  %none : NoneType = prim::Constant()
  %keep : Tensor = aten::logical_not(%pad)
  %nested : Tensor = aten::_nested_tensor_from_mask(%x, %keep, %false)
  %y : Tensor = aten::_transformer_encoder_layer_fwd(%nested, %e, %h, %qkv_w, %qkv_b, %proj_w, %proj_b, %false, %false, %eps, %n1_w, %n1_b, %n2_w, %n2_b, %f1_w, %f1_b, %f2_w, %f2_b, %none, %none)
  %out : Tensor = aten::to_padded_tensor(%y, %zero, %none)
  return (%out))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::map<std::string, int> ops = OpHistogram(*g);
  EXPECT_EQ(ops.count("Fallback"), 0u);
  EXPECT_EQ(ops.at("MultiHeadAttention"), 1);
  EXPECT_EQ(ops.at("LayerNorm"), 2);
  EXPECT_EQ(ops.at("Where"), 1);
  EXPECT_EQ(ops.at("Slice"), 1);
  for (const ir::Node& n : g->nodes()) {
    if (n.kind != ir::OpKind::kMultiHeadAttention) continue;
    ASSERT_EQ(n.inputs.size(), 8u);  // q, k, v, weights, biases, then the mask
    EXPECT_EQ(n.attrs.GetInt("mask_type"), 1);
    EXPECT_EQ(Producer(*g, n.inputs[7]).kind, ir::OpKind::kLogicalNot);
  }
  const ir::Node& slice = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(slice.kind, ir::OpKind::kSlice);
  EXPECT_EQ(slice.attrs.GetInt("axis"), 1);
}

// to_padded_tensor of a tensor Kiln did not make nested is left to libtorch.
TEST(ImporterIrTest, ToPaddedTensorOfAnUnknownNestedTensorFallsBack) {
  absl::StatusOr<ir::Graph> g = ImportText(R"IR(
graph(%x : Tensor):
  %zero : float = prim::Constant[value=0.]()
  %none : NoneType = prim::Constant()
  %out : Tensor = aten::to_padded_tensor(%x, %zero, %none)
  return (%out))IR");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(OpHistogram(*g).at("Fallback"), 1);
}

TEST(ImporterIrTest, TableCoversTheRequiredOps) {
  for (const char* op :
       {"aten::_convolution", "aten::conv2d", "aten::linear", "aten::addmm", "aten::matmul",
        "aten::mm", "aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_",
        "aten::relu6", "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul",
        "aten::mul_", "aten::div", "aten::div_", "aten::max_pool2d", "aten::avg_pool2d",
        "aten::adaptive_avg_pool2d", "aten::batch_norm", "aten::flatten", "aten::view",
        "aten::reshape", "aten::cat", "aten::softmax", "aten::log_softmax", "aten::sigmoid",
        "aten::tanh", "aten::gelu", "aten::silu", "aten::hardswish", "aten::hardsigmoid",
        "aten::layer_norm", "aten::mean", "aten::dropout", "aten::feature_dropout",
        "aten::contiguous", "aten::detach", "aten::t"}) {
    // The shared row (an in-place form by rule).
    EXPECT_TRUE(FindAtenConverter(OutOfPlaceOp(op)) != nullptr) << op;
  }
  EXPECT_EQ(FindAtenConverter("aten::logcumsumexp"), nullptr);
}

// ------------------------------------------------- scripted source, in memory

// Compiles `source` as the methods of a fresh module and returns its archive
// bytes, so tests can exercise ImportTorchScript without fixture files.
std::string ScriptArchive(const std::string& source) {
  torch::jit::Module module("TestModule");
  module.define(source);
  std::ostringstream bytes;
  module.save(bytes);
  return bytes.str();
}

TEST(ImporterScriptTest, DropsRankAssertions) {
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, x, y):
    assert x.dim() == 2 and len(y.size()) <= 3, "expected a 2-D input"
    return torch.relu(x) + y, torch.sigmoid(y)
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(InputNames(*g), ElementsAre("x", "y"));
  EXPECT_THAT(g->output_names(), ElementsAre("output0", "output1"));
  EXPECT_THAT(OpHistogram(*g),
              UnorderedElementsAre(Pair("Relu", 1), Pair("Add", 1), Pair("Sigmoid", 1)));
}

TEST(ImporterScriptTest, KeepsAssertionsOnTensorValuesAsRaise) {
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, x):
    assert bool(x.sum() >= 0), "negative input"
    return torch.relu(x)
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string text = ir::PrintGraph(*g);
  EXPECT_THAT(text, HasSubstr("If("));
  EXPECT_THAT(text, HasSubstr("Raise() {message=\"AssertionError: negative input\"}"));
}

TEST(ImporterScriptTest, RunTimeShapeArithmeticBecomesScalarOps) {
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, x):
    return x.reshape(x.size(0) * 2, -1)
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> ops = OpHistogram(*g);
  ops.erase("Constant");
  EXPECT_THAT(ops, UnorderedElementsAre(Pair("Size", 1), Pair("ScalarBinary", 1),
                                        Pair("ListConstruct", 1), Pair("Reshape", 1)));
}

TEST(ImporterScriptTest, ListReturnedWholeIsOneSplitListNamedAsTheResult) {
  struct Case {
    const char* body;
    int64_t split_size, chunks;
  };
  for (const Case& c : {Case{"return torch.split(x, 2, 1)", 2, 0},
                        Case{"return x.chunk(3, -1)", 0, 3},
                        Case{"return torch.unbind(x, 1)", 0, 0}}) {
    absl::StatusOr<ir::Graph> g =
        ImportTorchScript(ScriptArchive(absl::StrCat("def forward(self, x):\n    ", c.body, "\n")));
    ASSERT_TRUE(g.ok()) << c.body << ": " << g.status();
    EXPECT_TRUE(FallbackOps(*g).empty()) << c.body;
    EXPECT_THAT(g->output_names(), ElementsAre("output")) << c.body;
    const ir::Value& list = g->value(g->outputs()[0]);
    EXPECT_EQ(list.kind, ir::ValueKind::kTensorList);
    const ir::Node& split = Producer(*g, g->outputs()[0]);
    ASSERT_EQ(split.kind, ir::OpKind::kSplitList) << c.body;
    EXPECT_EQ(split.attrs.GetInt("split_size"), c.split_size);
    EXPECT_EQ(split.attrs.GetInt("chunks"), c.chunks);
  }
  // Sizes given: the length is known, the pieces are slices.
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, x):
    return x, torch.split(x, [1, 3], 2)
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->output_names(), ElementsAre("output0", "output1"));
  EXPECT_EQ(Producer(*g, g->outputs()[1]).kind, ir::OpKind::kListConstruct);
  EXPECT_EQ(OpHistogram(*g)["Slice"], 2);
}

TEST(ImporterScriptTest, EyeOfARunTimeSizeIsNative) {
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, x):
    return torch.eye(x.size(1), dtype=3), torch.eye(3, x.size(0) + 2)  # 3: torch.int32
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(FallbackOps(*g).empty());
  std::map<std::string, int> ops = OpHistogram(*g);
  EXPECT_EQ(ops["Arange"], 4);
  EXPECT_EQ(ops["Equal"], 2);
  EXPECT_EQ(ops["Cast"], 2);
  EXPECT_EQ(Producer(*g, g->outputs()[0]).attrs.GetString("dtype"), "INT32");
}

TEST(ImporterScriptTest, InPlaceIntegerBitwiseOpsAreNative) {
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, x, y):
    z = x.clone()
    z.bitwise_and_(y)
    z.bitwise_not_()
    return z
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(FallbackOps(*g).empty());
  const ir::Node& bitwise_not = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(bitwise_not.kind, ir::OpKind::kLogicalNot);
  const ir::Node& bitwise_and = Producer(*g, bitwise_not.inputs[0]);
  EXPECT_EQ(bitwise_and.kind, ir::OpKind::kLogicalAnd);
  EXPECT_TRUE(bitwise_and.attrs.GetBool("bitwise"));
  EXPECT_TRUE(bitwise_and.attrs.GetBool("in_place"));
}

TEST(ImporterScriptTest, TupleParametersAreFlattenedAndNamed) {
  absl::StatusOr<ir::Graph> g = ImportTorchScript(ScriptArchive(R"PY(
def forward(self, pair: Tuple[Tensor, Tensor], k: int):
    a, b = pair
    return a * k, (b, a)
)PY"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(InputNames(*g), ElementsAre("pair.0", "pair.1", "k"));
  EXPECT_THAT(g->output_names(), ElementsAre("output0", "output1.0", "output1.1"));
}

// ----------------------------------------------------------------- fixtures

std::string Fixture(const std::string& name) {
  const char* dir = std::getenv("KILN_FIXTURES");
  return absl::StrCat(dir ? dir : "fixtures", "/", name);
}

// The histogram without Constant nodes (those depend on freezing's folding).
std::map<std::string, int> ComputeOps(const ir::Graph& graph) {
  std::map<std::string, int> ops = OpHistogram(graph);
  ops.erase("Constant");
  return ops;
}

absl::StatusOr<ir::Graph> ImportFixture(const std::string& name,
                                        const ImportOptions& options = {}) {
  absl::StatusOr<ir::Graph> g = ImportTorchScriptFile(Fixture(name), options);
  if (g.ok()) {
    std::cout << name << ":";
    for (const auto& [op, count] : OpHistogram(*g)) std::cout << " " << op << "=" << count;
    std::cout << "\n";
  }
  return g;
}

TEST(ImporterFixtureTest, TracedMlp) {
  absl::StatusOr<ir::Graph> g = ImportFixture("mlp.pt");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  EXPECT_THAT(InputNames(*g), ElementsAre("x"));
  EXPECT_THAT(g->output_names(), ElementsAre("output0"));
  EXPECT_THAT(ComputeOps(*g),
              UnorderedElementsAre(Pair("Linear", 2), Pair("Relu", 1), Pair("Softmax", 1)));
  EXPECT_EQ(OpHistogram(*g)["Constant"], 4);
  EXPECT_EQ(Producer(*g, g->outputs()[0]).attrs.GetInt("axis"), 1);
  // Weights keep their shape, dtype and name.
  bool found_weight = false;
  for (const ir::Node& n : g->nodes()) {
    if (n.kind == ir::OpKind::kConstant && g->value(n.outputs[0]).name == "self.net.0.weight") {
      found_weight = true;
      EXPECT_EQ(n.attrs.GetTensor("value")->dims(), (Dims{32, 16}));
      EXPECT_EQ(n.attrs.GetTensor("value")->dtype(), DType::kF32);
    }
  }
  EXPECT_TRUE(found_weight);
}

TEST(ImporterFixtureTest, ScriptedMlp) {
  absl::StatusOr<ir::Graph> g = ImportFixture("mlp_scripted.pt");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  EXPECT_THAT(InputNames(*g), ElementsAre("x"));
  EXPECT_THAT(ComputeOps(*g), UnorderedElementsAre(Pair("Linear", 2), Pair("Gelu", 1),
                                                   Pair("Mul", 1), Pair("Add", 1),
                                                   Pair("LogSoftmax", 1)));
}

TEST(ImporterFixtureTest, TwoInputsNamedAfterForwardParameters) {
  absl::StatusOr<ir::Graph> g = ImportFixture("two_input.pt");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  EXPECT_THAT(InputNames(*g), ElementsAre("image", "bias"));
  EXPECT_THAT(ComputeOps(*g), UnorderedElementsAre(Pair("Conv", 1), Pair("Relu", 1),
                                                   Pair("Add", 1), Pair("Mean", 1)));
  const ir::Node& mean = Producer(*g, g->outputs()[0]);
  EXPECT_EQ(mean.attrs.GetInts("axes"), (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(mean.attrs.GetBool("keepdim"));

  ImportOptions options;
  options.input_names = {"img"};
  options.output_names = {"pooled"};
  absl::StatusOr<ir::Graph> renamed = ImportTorchScriptFile(Fixture("two_input.pt"), options);
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_THAT(InputNames(*renamed), ElementsAre("img", "bias"));
  EXPECT_THAT(renamed->output_names(), ElementsAre("pooled"));
}

TEST(ImporterFixtureTest, Resnet18) {
  absl::StatusOr<ir::Graph> g = ImportFixture("resnet18.pt");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  EXPECT_THAT(InputNames(*g), ElementsAre("x"));
  // The import keeps every batch_norm (freezing is asked not to fold them into
  // the weights, which changes results); Kiln's pass then fuses each
  // conv -> batch_norm [-> relu] into the conv's epilogue.
  EXPECT_THAT(ComputeOps(*g),
              UnorderedElementsAre(Pair("Conv", 20), Pair("BatchNorm", 20), Pair("Relu", 17),
                                   Pair("Add", 8), Pair("MaxPool", 1), Pair("AdaptiveAvgPool", 1),
                                   Pair("Flatten", 1), Pair("Linear", 1)));
  EXPECT_EQ(OpHistogram(*g)["Constant"], 70);
  ir::Graph fused = *g;
  ASSERT_TRUE(passes::RunPipeline(fused).ok());
  // The relus after a residual add stay; the 9 right after a conv's batch norm fuse.
  EXPECT_THAT(ComputeOps(fused),
              UnorderedElementsAre(Pair("Conv", 20), Pair("Relu", 8), Pair("Add", 8),
                                   Pair("MaxPool", 1), Pair("AdaptiveAvgPool", 1),
                                   Pair("Flatten", 1), Pair("Linear", 1)));
  EXPECT_GT(g->ConstantBytes(), 40u << 20);  // ~11.7 M float parameters
}

TEST(ImporterFixtureTest, MobileNetV2) {
  absl::StatusOr<ir::Graph> g = ImportFixture("mobilenet_v2.pt");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  EXPECT_THAT(InputNames(*g), ElementsAre("x"));
  EXPECT_THAT(ComputeOps(*g),
              UnorderedElementsAre(Pair("Conv", 52), Pair("BatchNorm", 52), Pair("Clip", 35),
                                   Pair("Add", 10), Pair("AdaptiveAvgPool", 1),
                                   Pair("Flatten", 1), Pair("Linear", 1)));
  ir::Graph fused = *g;
  ASSERT_TRUE(passes::RunPipeline(fused).ok());
  // Every batch norm and relu6 follows a conv: all fuse.
  EXPECT_THAT(ComputeOps(fused),
              UnorderedElementsAre(Pair("Conv", 52), Pair("Add", 10), Pair("AdaptiveAvgPool", 1),
                                   Pair("Flatten", 1), Pair("Linear", 1)));
  for (const ir::Node& n : g->nodes()) {
    if (n.kind == ir::OpKind::kClip) {
      EXPECT_EQ(n.attrs.GetFloat("min"), 0.0);
      EXPECT_EQ(n.attrs.GetFloat("max"), 6.0);
    }
  }
}

TEST(ImporterFixtureTest, CorruptArchiveIsInvalidArgument) {
  absl::StatusOr<ir::Graph> g = ImportTorchScriptFile(Fixture("corrupt.pt"));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ImportTorchScript("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ImporterFixtureTest, MissingFileIsNotFound) {
  EXPECT_EQ(ImportTorchScriptFile(Fixture("no_such_model.pt")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ImporterFixtureTest, UnsupportedOpsAreAllNamedInStrictMode) {
  ImportOptions strict;
  strict.strict = true;
  absl::StatusOr<ir::Graph> g = ImportTorchScriptFile(Fixture("unsupported.pt"), strict);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(g.status().message(), "unsupported ops: aten::i0, aten::logcumsumexp");
  absl::StatusOr<ir::Graph> lenient = ImportTorchScriptFile(Fixture("unsupported.pt"));
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_THAT(FallbackOps(*lenient), ElementsAre("aten::i0", "aten::logcumsumexp"));
}

// shufflenet_v2's channel shuffle reads shapes at run time (aten::size,
// NumToTensor, floor_divide, Int): it imports into scalar ops, not fallbacks.
TEST(ImporterFixtureTest, ShuffleNetShapeArithmeticIsNative) {
  absl::StatusOr<ir::Graph> g = ImportFixture("shufflenet_v2_x0_5.pt");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  std::map<std::string, int> ops = ComputeOps(*g);
  EXPECT_EQ(ops["Size"], 64);
  EXPECT_EQ(ops["ScalarBinary"], 16);
  EXPECT_EQ(ops["Reshape"], 32);
  for (const std::string& op : FallbackOps(*g)) {
    EXPECT_TRUE(op == "aten::transpose" || op == "aten::chunk") << op;
  }
}

// nn.MultiheadAttention's fast path (aten::_native_multi_head_attention)
// imports as ops the compiler prepacks once: a Linear per projection with
// constant weights (the in-projection's rows cut at import) and one
// ScaledDotProductAttention, not a node that repacks the weights per call. The
// fixture calls it three times (averaged weights, per-head weights, none).
TEST(ImporterFixtureTest, NativeMultiHeadAttentionIsLinearsAndSdpa) {
  ImportOptions strict;
  strict.strict = true;
  absl::StatusOr<ir::Graph> g = ImportFixture("self_attention.pt", strict);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ir::VerifyGraph(*g).ok());
  std::map<std::string, int> ops = ComputeOps(*g);
  EXPECT_EQ(ops["MultiHeadAttention"], 0);
  EXPECT_EQ(ops["ScaledDotProductAttention"], 3);
  EXPECT_EQ(ops["Linear"], 12);
  EXPECT_EQ(ops["Softmax"], 2);  // the weights of the two calls that need them
  EXPECT_EQ(ops["Mean"], 1);     // averaged over heads once
  for (const ir::Node& node : g->nodes()) {
    if (node.kind != ir::OpKind::kLinear) continue;
    EXPECT_NE(g->ConstantValue(node.inputs[1]), nullptr) << "a Linear's weight is not constant";
  }
}

// With a mask the attention stays one MultiHeadAttention node, whose kernel
// reads the mask as PyTorch does.
TEST(ImporterIrTest, NativeMultiHeadAttentionWithAMaskKeepsItsNode) {
  absl::StatusOr<ir::Graph> g = ImportStrict(R"IR(
graph(%x : Tensor, %mask : Tensor, %w_in : Tensor, %b_in : Tensor, %w_out : Tensor, %b_out : Tensor):
  %e : int = prim::Constant[value=8]()
  %h : int = prim::Constant[value=2]()
  %yes : bool = prim::Constant[value=1]()
  %one : int = prim::Constant[value=1]()
  %out : Tensor, %w : Tensor = aten::_native_multi_head_attention(%x, %x, %x, %e, %h, %w_in, %b_in, %w_out, %b_out, %mask, %yes, %yes, %one)
  return (%out, %w))IR",
                                             {{"w_in", at::rand({24, 8})},
                                              {"b_in", at::rand({24})},
                                              {"w_out", at::rand({8, 8})},
                                              {"b_out", at::rand({8})}});
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> ops = OpHistogram(*g);
  EXPECT_EQ(ops["MultiHeadAttention"], 1);
  EXPECT_EQ(ops["ScaledDotProductAttention"], 0);
}

}  // namespace
}  // namespace kiln::importer
