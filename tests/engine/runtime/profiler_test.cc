// The profiler (engine/runtime/profiler.h): per-node aggregation, shares that
// add up, one trace event per step run (static, dynamic, inside loops), the
// JSON round trip, merging runs and the Chrome trace-event format.
#include "engine/runtime/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "engine/runtime/executable.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;
using ir::NodeId;
using ir::OpKind;
using ir::ValueId;
using nlohmann::json;

Tensor Filled(Dims dims, float v) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = v;
  return t;
}

kernels::TensorInfo Info(const Tensor& t) { return {t.dtype(), t.dims(), nullptr, true}; }

ValueId Out(const ir::Graph& g, NodeId n) { return g.node(n).outputs[0]; }

// relu(conv(x)) + 1, then a flatten: conv, relu, add and a view.
ir::Graph ConvGraph(NodeId* conv) {
  ir::Graph g;
  ValueId x = g.AddInput("x", {});
  ValueId w = g.AddConstant(Filled({8, 3, 3, 3}, 0.1f));
  ir::Attributes a;
  a.SetInts("stride", {1, 1});
  a.SetInts("padding", {1, 1});
  a.SetInts("dilation", {1, 1});
  a.SetInt("groups", 1);
  *conv = g.AddNode(OpKind::kConv, {x, w, ir::kNoValue}, a, "aten::_convolution");
  ValueId r = Out(g, g.AddNode(OpKind::kRelu, {Out(g, *conv)}, {}, "aten::relu"));
  ValueId one = g.AddConstant(Filled({}, 1.0f));
  ValueId s = Out(g, g.AddNode(OpKind::kAdd, {r, one}, {}, "aten::add"));
  g.AddOutput(s, "output0");
  return g;
}

double ShareSum(const Profile& p) {
  double sum = 0;
  for (const ProfileNode& n : p.nodes) sum += p.Share(n);
  return sum;
}

const ProfileNode* FindOp(const Profile& p, const std::string& op) {
  for (const ProfileNode& n : p.nodes) {
    if (n.op == op) return &n;
  }
  return nullptr;
}

TEST(ProfilerTest, StaticPlanGivesOneEntryPerNodeAndSharesAddUp) {
  NodeId conv = -1;
  ir::Graph g = ConvGraph(&conv);
  const Tensor x = Filled({1, 3, 16, 16}, 0.5f);
  auto exe = Executable::Compile(g, {Info(x)}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Profiler profiler;
  RunOptions run;
  run.observer = &profiler;
  auto out = (*exe)->RunValues({RunValue::Of(x)}, run);
  ASSERT_TRUE(out.ok()) << out.status();
  const Profile p = profiler.Finish();

  EXPECT_EQ(p.runs, 1);
  ASSERT_FALSE(p.nodes.empty());
  EXPECT_GT(p.total_ns, 0);
  EXPECT_GE(p.wall_ns, p.total_ns);
  EXPECT_NEAR(ShareSum(p), 1.0, 1e-9);
  // One event per step run; every node ran once.
  EXPECT_EQ(p.events.size(), p.nodes.size());
  for (const ProfileNode& n : p.nodes) EXPECT_EQ(n.calls, 1) << n.op;

  const ProfileNode* c = FindOp(p, "Conv");
  ASSERT_NE(c, nullptr) << p.FormatTable();
  EXPECT_EQ(c->source_op, "aten::_convolution");
  EXPECT_FALSE(c->kernel.empty());
  EXPECT_EQ(c->step, "static");
  EXPECT_THAT(c->outputs, HasSubstr("FP32[1, 8, 16, 16]"));
  EXPECT_GT(c->self_ns, 0);
  // Sorted by self time, longest first. (Which node is longest is the
  // machine's to say: a step of 0.05 ms loses its core now and then on a
  // shared machine, so the test does not name one.)
  const std::vector<const ProfileNode*> sorted = p.Sorted();
  ASSERT_EQ(sorted.size(), p.nodes.size());
  for (size_t i = 1; i < sorted.size(); ++i) {
    EXPECT_GE(sorted[i - 1]->self_ns, sorted[i]->self_ns) << p.FormatTable();
  }

  // The profiler is reusable and a run without an observer still runs.
  EXPECT_EQ(profiler.Finish().runs, 0);
  ASSERT_TRUE((*exe)->RunValues({RunValue::Of(x)}).ok());
}

TEST(ProfilerTest, LoopBodyStepsAreTimedPerIterationInsideTheLoop) {
  // acc = x; for i in range(3): acc = acc + acc
  ir::Graph g;
  ValueId x = g.AddInput("x", {});
  Tensor three = Tensor::Zeros(DType::kInt64, {});
  *three.data<int64_t>() = 3;
  Tensor yes = Tensor::Zeros(DType::kBool, {});
  *yes.data<bool>() = true;
  NodeId loop = g.AddNodeWithOutputs(
      OpKind::kLoop,
      {g.AddConstant(three, "", ir::ValueKind::kInt), g.AddConstant(yes, "", ir::ValueKind::kBool),
       x},
      1, {}, "prim::Loop", {"acc"});
  ir::BlockId body = g.AddBlock(loop);
  g.AddBlockParam(body, "i", {}, ir::ValueKind::kInt);
  ValueId acc = g.AddBlockParam(body, "acc", {});
  g.SetInsertionBlock(body);
  ValueId doubled = Out(g, g.AddNode(OpKind::kAdd, {acc, acc}, {}, "aten::add"));
  g.SetBlockResults(body, {g.AddConstant(yes, "", ir::ValueKind::kBool), doubled});
  g.SetInsertionBlock(ir::kMainBlock);
  g.AddOutput(Out(g, loop), "acc");

  const Tensor in = Filled({4}, 1.0f);
  auto exe = Executable::Compile(g, {Info(in)}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Profiler profiler;
  RunOptions run;
  run.observer = &profiler;
  auto out = (*exe)->RunValues({RunValue::Of(in)}, run);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at(0).tensor.data<float>()[0], 8.0f);
  const Profile p = profiler.Finish();

  const ProfileNode* l = FindOp(p, "Loop");
  const ProfileNode* add = FindOp(p, "Add");
  ASSERT_NE(l, nullptr) << p.FormatTable();
  ASSERT_NE(add, nullptr) << p.FormatTable();
  EXPECT_EQ(l->step, "loop");
  EXPECT_EQ(l->calls, 1);
  EXPECT_EQ(l->depth, 0);
  EXPECT_EQ(add->calls, 3);
  EXPECT_EQ(add->depth, 1);
  EXPECT_EQ(add->step, "dynamic");
  EXPECT_FALSE(add->kernel.empty());
  EXPECT_EQ(add->outputs, "FP32[4]");
  // The loop's own time excludes its body's; together they are the total.
  EXPECT_LE(l->self_ns, l->total_ns);
  EXPECT_GE(l->total_ns, add->total_ns);
  EXPECT_NEAR(ShareSum(p), 1.0, 1e-9);
  EXPECT_EQ(p.total_ns, l->total_ns);
  // Events: the loop once, then its body's steps per iteration, nested in it.
  int64_t calls = 0;
  for (const ProfileNode& n : p.nodes) calls += n.calls;
  ASSERT_EQ(static_cast<int64_t>(p.events.size()), calls);
  EXPECT_EQ(p.events.front().node, loop);
  for (const ProfileEvent& e : p.events) {
    EXPECT_GE(e.ts_ns, p.events.front().ts_ns);
    EXPECT_LE(e.ts_ns + e.dur_ns, p.events.front().ts_ns + p.events.front().dur_ns);
  }
}

Profile Handmade(int64_t conv_ns, int64_t relu_ns) {
  Profile p;
  p.runs = 1;
  p.nodes = {ProfileNode{3, "Conv", "aten::_convolution", "onednn.conv", "static",
                         "FP32[1, 64, 56, 56]{nhwc}", 0, conv_ns, conv_ns, 1},
             ProfileNode{5, "Relu", "aten::relu", "Relu", "static", "FP32[1, 64, 56, 56]", 0,
                         relu_ns, relu_ns, 1}};
  p.total_ns = conv_ns + relu_ns;
  p.wall_ns = p.total_ns + 10;
  p.events = {ProfileEvent{3, 0, conv_ns, 0, 0}, ProfileEvent{5, conv_ns, relu_ns, 0, 0}};
  return p;
}

TEST(ProfilerTest, SortsMergesFormatsAndRoundTripsThroughJson) {
  Profile p = Handmade(3'000'000, 1'000'000);
  EXPECT_DOUBLE_EQ(p.Share(p.nodes[0]), 0.75);
  p.Merge(Handmade(1'000'000, 3'000'000));
  EXPECT_EQ(p.runs, 2);
  EXPECT_EQ(p.total_ns, 8'000'000);
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[0].calls, 2);
  EXPECT_EQ(p.nodes[1].self_ns, 4'000'000);
  // The second run's events follow the first's on the timeline.
  ASSERT_EQ(p.events.size(), 4u);
  EXPECT_EQ(p.events[2].run, 1);
  EXPECT_GE(p.events[2].ts_ns, p.events[1].ts_ns + p.events[1].dur_ns);
  // Tie on time: by node id.
  EXPECT_EQ(p.Sorted()[0]->node, 3);
  p.nodes[1].self_ns += 1;
  EXPECT_EQ(p.Sorted()[0]->node, 5);

  const std::string table = p.FormatTable();
  EXPECT_THAT(table, HasSubstr("2 runs; per run: 4.000 ms in 2 nodes"));
  EXPECT_THAT(table, HasSubstr("onednn.conv"));
  EXPECT_THAT(table, HasSubstr("FP32[1, 64, 56, 56]{nhwc}"));
  EXPECT_THAT(table, HasSubstr("2.000"));  // ms per run of the relu
  EXPECT_THAT(p.FormatTable(1), HasSubstr("(1 more nodes"));

  auto back = Profile::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), p.ToJson());
  // A source op that is not UTF-8 (a name from a model file) is replaced, not thrown on.
  p.nodes[0].source_op = "custom::\xff\xfeop";
  EXPECT_THAT(p.ToJson(), HasSubstr("custom::\xef\xbf\xbd"));
  EXPECT_NO_THROW(p.ToChromeTrace());
  EXPECT_FALSE(Profile::FromJson("{\"runs\": 1}").ok());
  EXPECT_FALSE(Profile::FromJson("not json").ok());
}

TEST(ProfilerTest, ChromeTraceHasOneCompleteEventPerStepRun) {
  NodeId conv = -1;
  ir::Graph g = ConvGraph(&conv);
  const Tensor x = Filled({1, 3, 8, 8}, 0.5f);
  auto exe = Executable::Compile(g, {Info(x)}, {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Profile merged;
  for (int r = 0; r < 2; ++r) {
    Profiler profiler;
    RunOptions run;
    run.observer = &profiler;
    ASSERT_TRUE((*exe)->RunValues({RunValue::Of(x)}, run).ok());
    merged.Merge(profiler.Finish());
  }
  const json trace = json::parse(merged.ToChromeTrace(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::vector<json> complete;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X") complete.push_back(e);
  }
  ASSERT_EQ(complete.size(), merged.events.size());
  std::map<int, int> runs;
  for (const json& e : complete) {
    ASSERT_TRUE(e.contains("name") && e["name"].is_string());
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number());
    ASSERT_TRUE(e.contains("dur") && e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_TRUE(e.contains("pid") && e.contains("tid"));
    ++runs[e["args"]["run"].get<int>()];
  }
  EXPECT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], runs[1]);
  bool has_conv = false;
  for (const json& e : complete) {
    has_conv |= e["args"]["node"].get<int>() == conv && e["args"]["op"] == "Conv";
  }
  EXPECT_TRUE(has_conv);
}

}  // namespace
}  // namespace kiln::runtime
