// The executor's handling of what TorchScript computes besides a straight
// tensor DAG: shape arithmetic folded at compile time, If and Loop, tensor
// lists, None, raise, and shapes read from data at run time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/runtime/executable.h"
#include "engine/runtime/model.h"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ir::BlockId;
using ir::Graph;
using ir::NodeId;
using ir::OpKind;
using ir::ValueId;
using ir::ValueKind;

Tensor F32(Dims dims, std::vector<float> values) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

kernels::TensorInfo Info(const Tensor& t) { return {t.dtype(), t.dims(), nullptr, true}; }

ValueId Out(const Graph& g, NodeId n, int i = 0) { return g.node(n).outputs[i]; }

// Emits a node whose single output is of `kind`.
ValueId Scalar(Graph& g, OpKind op, std::vector<ValueId> inputs, ValueKind kind,
               ir::Attributes attrs = {}) {
  ValueId v = Out(g, g.AddNode(op, std::move(inputs), std::move(attrs)));
  g.mutable_value(v).kind = kind;
  return v;
}

ir::Attributes Attr(const std::string& name, const std::string& value) {
  ir::Attributes a;
  a.SetString(name, value);
  return a;
}

ValueId IntConst(Graph& g, int64_t v) {
  Tensor t = Tensor::Zeros(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return g.AddConstant(t, "", ValueKind::kInt);
}

ValueId BoolConst(Graph& g, bool v) {
  Tensor t = Tensor::Zeros(DType::kBool, {});
  *t.data<bool>() = v;
  return g.AddConstant(t, "", ValueKind::kBool);
}

absl::StatusOr<std::vector<Tensor>> CompileAndRun(const Graph& g, std::vector<Tensor> inputs,
                                                  std::unique_ptr<Executable>* keep = nullptr) {
  std::vector<kernels::TensorInfo> sig;
  for (const Tensor& t : inputs) {
    sig.push_back(t.dtype() == DType::kUnknown ? kernels::TensorInfo{DType::kUnknown, {}, nullptr,
                                                                     false}
                                               : Info(t));
  }
  auto exe = Executable::Compile(g, sig, {});
  if (!exe.ok()) return exe.status();
  auto out = (*exe)->Run(inputs);
  if (keep != nullptr) *keep = *std::move(exe);
  return out;
}

// shufflenet's channel shuffle: view(x, [size(x,0), 2, size(x,1) // 2, -1]).
TEST(ControlFlowTest, ShapeArithmeticIsFoldedAndPlannedStatically) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  ir::Attributes d0, d1;
  d0.SetInt("dim", 0);
  d1.SetInt("dim", 1);
  ValueId n = Scalar(g, OpKind::kSize, {x}, ValueKind::kInt, d0);
  ValueId c = Scalar(g, OpKind::kSize, {x}, ValueKind::kInt, d1);
  ValueId half = Scalar(g, OpKind::kScalarBinary, {c, IntConst(g, 2)}, ValueKind::kInt,
                        Attr("op", "floordiv"));
  ValueId shape = Scalar(g, OpKind::kListConstruct, {n, IntConst(g, 2), half, IntConst(g, -1)},
                         ValueKind::kIntList);
  ValueId v = Out(g, g.AddNode(OpKind::kReshape, {x, shape}));
  g.AddOutput(Out(g, g.AddNode(OpKind::kRelu, {v})), "output0");

  std::unique_ptr<Executable> exe;
  Tensor in = Tensor::Zeros(DType::kF32, {2, 6, 1, 1});
  in.data<float>()[3] = -1;
  in.data<float>()[4] = 4;
  auto out = CompileAndRun(g, {in}, &exe);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dims(), (Dims{2, 2, 3, 1}));
  EXPECT_EQ((*out)[0].data<float>()[4], 4.0f);
  EXPECT_EQ((*out)[0].data<float>()[3], 0.0f);
  EXPECT_TRUE(exe->is_static());
  EXPECT_GE(exe->num_folded(), 4);  // both sizes, the quotient, the shape
  EXPECT_EQ(exe->output_infos()[0].dims, (Dims{2, 2, 3, 1}));
}

// y = relu(x) if cond else x * x.
Graph IfGraph(ValueId* cond_input = nullptr) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId flag = g.AddInput("flag", {});  // a one-element tensor
  ValueId cond = Scalar(g, OpKind::kToScalar, {flag}, ValueKind::kBool, Attr("type", "bool"));
  if (cond_input != nullptr) *cond_input = cond;
  NodeId n = g.AddNodeWithOutputs(OpKind::kIf, {cond}, 1, {}, "prim::If", {"y"});
  BlockId t = g.AddBlock(n);
  g.SetInsertionBlock(t);
  g.SetBlockResults(t, {Out(g, g.AddNode(OpKind::kRelu, {x}))});
  BlockId e = g.AddBlock(n);
  g.SetInsertionBlock(e);
  g.SetBlockResults(e, {Out(g, g.AddNode(OpKind::kMul, {x, x}))});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, g.AddNode(OpKind::kAdd, {Out(g, n), x})), "output0");
  return g;
}

TEST(ControlFlowTest, IfOnATensorConditionTakesTheRightBranch) {
  Graph g = IfGraph();
  Tensor x = F32({3}, {-1, 2, -3});
  std::unique_ptr<Executable> exe;
  auto yes = CompileAndRun(g, {x, F32({1}, {1})}, &exe);
  ASSERT_TRUE(yes.ok()) << yes.status();
  EXPECT_THAT(Values((*yes)[0]), ElementsAre(-1, 4, -3));  // relu(x) + x
  EXPECT_FALSE(exe->is_static());
  for (int i = 0; i < 2; ++i) {  // the prepared kernels are cached per run
    auto no = exe->Run({x, F32({1}, {0})});
    ASSERT_TRUE(no.ok()) << no.status();
    EXPECT_THAT(Values((*no)[0]), ElementsAre(0, 6, 6));  // x * x + x
  }
  auto bad = exe->Run({x, F32({1}, {0})});
  EXPECT_TRUE(bad.ok());
}

TEST(ControlFlowTest, IfWithAConditionFixedByShapesIsInlined) {
  // cond = rank(x) == 1: known at compile time, so the If disappears.
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId rank = Scalar(g, OpKind::kRank, {x}, ValueKind::kInt);
  ValueId cond = Scalar(g, OpKind::kScalarBinary, {rank, IntConst(g, 1)}, ValueKind::kBool,
                        Attr("op", "eq"));
  NodeId n = g.AddNodeWithOutputs(OpKind::kIf, {cond}, 1);
  BlockId t = g.AddBlock(n);
  g.SetInsertionBlock(t);
  g.SetBlockResults(t, {Out(g, g.AddNode(OpKind::kRelu, {x}))});
  BlockId e = g.AddBlock(n);
  g.SetBlockResults(e, {x});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, n), "output0");
  std::unique_ptr<Executable> exe;
  auto out = CompileAndRun(g, {F32({2}, {-1, 1})}, &exe);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(0, 1));
  EXPECT_TRUE(exe->is_static());
  auto other = CompileAndRun(g, {F32({1, 2}, {-1, 1})}, &exe);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(Values((*other)[0]), ElementsAre(-1, 1));  // the else branch returns x itself
}

TEST(ControlFlowTest, ForLoopCarriesTensorsAndInts) {
  // acc, k = x, 0; for i in range(3): acc = acc + acc; k = k + i
  Graph g;
  ValueId x = g.AddInput("x", {});
  NodeId loop = g.AddNodeWithOutputs(OpKind::kLoop, {IntConst(g, 3), BoolConst(g, true), x,
                                                     IntConst(g, 0)},
                                     2, {}, "prim::Loop", {"acc", "k"});
  g.mutable_value(Out(g, loop, 1)).kind = ValueKind::kInt;
  BlockId body = g.AddBlock(loop);
  ValueId i = g.AddBlockParam(body, "i", {}, ValueKind::kInt);
  ValueId acc = g.AddBlockParam(body, "acc", {});
  ValueId k = g.AddBlockParam(body, "k", {}, ValueKind::kInt);
  g.SetInsertionBlock(body);
  ValueId doubled = Out(g, g.AddNode(OpKind::kAdd, {acc, acc}));
  ValueId k2 = Scalar(g, OpKind::kScalarBinary, {k, i}, ValueKind::kInt, Attr("op", "add"));
  g.SetBlockResults(body, {BoolConst(g, true), doubled, k2});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, loop, 0), "acc");
  g.AddOutput(Out(g, loop, 1), "k");
  auto out = CompileAndRun(g, {F32({2}, {1, -2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(8, -16));
  EXPECT_EQ((*out)[1].dtype(), DType::kInt64);
  EXPECT_EQ(*(*out)[1].data<int64_t>(), 3);  // 0 + 1 + 2
}

TEST(ControlFlowTest, WhileLoopStopsOnItsCondition) {
  // while s.sum() < 10 (here: while s[0] < 10): s = s + s
  Graph g;
  ValueId x = g.AddInput("x", {});
  auto below_ten = [&](ValueId v) {
    ValueId first = Scalar(g, OpKind::kToScalar, {v}, ValueKind::kFloat, Attr("type", "float"));
    Tensor ten = Tensor::Zeros(DType::kF64, {});
    *ten.data<double>() = 10;
    return Scalar(g, OpKind::kScalarBinary, {first, g.AddConstant(ten, "", ValueKind::kFloat)},
                  ValueKind::kBool, Attr("op", "lt"));
  };
  ValueId go = below_ten(x);
  NodeId loop = g.AddNodeWithOutputs(
      OpKind::kLoop, {IntConst(g, std::numeric_limits<int64_t>::max()), go, x}, 1);
  BlockId body = g.AddBlock(loop);
  g.AddBlockParam(body, "i", {}, ValueKind::kInt);
  ValueId s = g.AddBlockParam(body, "s", {});
  g.SetInsertionBlock(body);
  ValueId next = Out(g, g.AddNode(OpKind::kAdd, {s, s}));
  g.SetBlockResults(body, {below_ten(next), next});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, loop), "output0");
  auto out = CompileAndRun(g, {F32({1}, {3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(12));
  auto none = CompileAndRun(g, {F32({1}, {11})});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(Values((*none)[0]), ElementsAre(11));  // zero iterations
}

TEST(ControlFlowTest, TensorListBuiltInALoopFeedsConcat) {
  // acc = []; for i in range(3): acc.append(x * i); cat(acc)
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId empty = Scalar(g, OpKind::kListConstruct, {}, ValueKind::kTensorList);
  NodeId loop = g.AddNodeWithOutputs(OpKind::kLoop, {IntConst(g, 3), BoolConst(g, true), empty},
                                     1);
  g.mutable_value(Out(g, loop)).kind = ValueKind::kTensorList;
  BlockId body = g.AddBlock(loop);
  ValueId i = g.AddBlockParam(body, "i", {}, ValueKind::kInt);
  ValueId list = g.AddBlockParam(body, "list", {}, ValueKind::kTensorList);
  g.SetInsertionBlock(body);
  ValueId fi = Scalar(g, OpKind::kToScalar, {i}, ValueKind::kFloat, Attr("type", "float"));
  ValueId scaled = Out(g, g.AddNode(OpKind::kMul, {x, fi}));
  ValueId longer = Scalar(g, OpKind::kListAppend, {list, scaled}, ValueKind::kTensorList);
  g.SetBlockResults(body, {BoolConst(g, true), longer});
  g.SetInsertionBlock(ir::kMainBlock);
  ir::Attributes axis;
  axis.SetInt("axis", 0);
  g.AddOutput(Out(g, g.AddNode(OpKind::kConcat, {Out(g, loop)}, axis)), "cat");
  g.AddOutput(Scalar(g, OpKind::kListLen, {Out(g, loop)}, ValueKind::kInt), "len");
  g.AddOutput(Out(g, loop), "list");
  auto exe = Executable::Compile(g, {Info(F32({2}, {1, 2}))}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto out = (*exe)->RunValues({RunValue::Of(F32({2}, {1, 2}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0].tensor), ElementsAre(0, 0, 1, 2, 2, 4));
  EXPECT_EQ(*(*out)[1].tensor.data<int64_t>(), 3);
  ASSERT_EQ((*out)[2].kind, RunValue::Kind::kTensorList);
  ASSERT_EQ((*out)[2].list.size(), 3u);
  EXPECT_THAT(Values((*out)[2].list[2]), ElementsAre(2, 4));
  EXPECT_EQ((*exe)->Run({F32({2}, {1, 2})}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ControlFlowTest, OptionalInputMayBeNone) {
  // y is None ? x : x + y
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId y = g.AddInput("y", {});
  g.mutable_value(y).optional = true;
  ValueId none = Scalar(g, OpKind::kIsNone, {y}, ValueKind::kBool);
  NodeId n = g.AddNodeWithOutputs(OpKind::kIf, {none}, 1);
  BlockId t = g.AddBlock(n);
  g.SetBlockResults(t, {x});
  BlockId e = g.AddBlock(n);
  g.SetInsertionBlock(e);
  g.SetBlockResults(e, {Out(g, g.AddNode(OpKind::kAdd, {x, y}))});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, n), "output0");
  std::unique_ptr<Executable> exe;
  auto absent = CompileAndRun(g, {F32({2}, {1, 2}), Tensor()}, &exe);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_THAT(Values((*absent)[0]), ElementsAre(1, 2));
  EXPECT_TRUE(exe->is_static());  // IsNone of an input the signature fixes
  auto present = CompileAndRun(g, {F32({2}, {1, 2}), F32({2}, {10, 20})});
  ASSERT_TRUE(present.ok()) << present.status();
  EXPECT_THAT(Values((*present)[0]), ElementsAre(11, 22));

  // Through a Model: an optional input may be left out of the request.
  auto model = Model::Create(g, {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->inputs()[1].optional);
  auto infer = (*model)->Infer({{"x", F32({2}, {1, 2})}}, {});
  ASSERT_TRUE(infer.ok()) << infer.status();
  EXPECT_THAT(Values((*infer)[0].tensor), ElementsAre(1, 2));
}

TEST(ControlFlowTest, RaiseFailsTheRunWithItsMessage) {
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId flag = Scalar(g, OpKind::kToScalar, {x}, ValueKind::kBool, Attr("type", "bool"));
  NodeId n = g.AddNodeWithOutputs(OpKind::kIf, {flag}, 0);
  BlockId t = g.AddBlock(n);
  g.SetInsertionBlock(t);
  g.AddNodeWithOutputs(OpKind::kRaise, {}, 0, Attr("message", "x must be zero"));
  g.AddBlock(n);
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, g.AddNode(OpKind::kRelu, {x})), "output0");
  std::unique_ptr<Executable> exe;
  auto ok = CompileAndRun(g, {F32({1}, {0})}, &exe);
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto raised = exe->Run({F32({1}, {3})});
  EXPECT_EQ(raised.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(raised.status().message()), HasSubstr("x must be zero"));
}

TEST(ControlFlowTest, ShapeReadFromDataIsPreparedPerRun) {
  // view(x, [int(k), -1]) with k a tensor's value: only a run knows the shape.
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId k = g.AddInput("k", {});
  ValueId rows = Scalar(g, OpKind::kToScalar, {k}, ValueKind::kInt, Attr("type", "int"));
  ValueId shape = Scalar(g, OpKind::kListConstruct, {rows, IntConst(g, -1)}, ValueKind::kIntList);
  g.AddOutput(Out(g, g.AddNode(OpKind::kReshape, {x, shape})), "output0");
  std::unique_ptr<Executable> exe;
  Tensor x6 = F32({6}, {1, 2, 3, 4, 5, 6});
  auto two = CompileAndRun(g, {x6, F32({1}, {2})}, &exe);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((*two)[0].dims(), (Dims{2, 3}));
  auto three = exe->Run({x6, F32({1}, {3})});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ((*three)[0].dims(), (Dims{3, 2}));
  EXPECT_EQ(exe->output_infos()[0].dtype, DType::kUnknown);
  auto bad = exe->Run({x6, F32({1}, {4})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("is invalid for input of size 6"));
}

TEST(ControlFlowTest, ModelAcceptsScalarInputs) {
  // forward(x, n: int) = x * n
  Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId n = g.AddInput("n", ir::TensorType{DType::kInt64, Dims{}}, ValueKind::kInt);
  ValueId f = Scalar(g, OpKind::kToScalar, {n}, ValueKind::kFloat, Attr("type", "float"));
  g.AddOutput(Out(g, g.AddNode(OpKind::kMul, {x, f})), "output0");
  auto model = Model::Create(g, {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->inputs()[1].dtype, DType::kInt64);
  Tensor three = Tensor::Zeros(DType::kInt64, {1});
  *three.data<int64_t>() = 3;
  auto out = (*model)->Infer({{"x", F32({2}, {1, 2})}, {"n", three}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0].tensor), ElementsAre(3, 6));
  auto bad = (*model)->Infer({{"x", F32({2}, {1, 2})}, {"n", F32({2}, {1, 2})}}, {});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("expected one INT64 value"));
}

}  // namespace
}  // namespace kiln::runtime
