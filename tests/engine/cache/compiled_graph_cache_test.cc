#include "engine/cache/compiled_graph_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "engine/cache/cache_file.h"
#include "engine/cache/file_io.h"
#include "engine/cache/graph_serializer.h"
#include "engine/kernels/onednn/onednn.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;

Tensor Floats(Dims dims, float value) {
  Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = value;
  return t;
}

// x[N, 8] -> Linear(8 -> 8) -> Relu.
ir::Graph SmallModel() {
  ir::Graph g;
  ir::ValueId x = g.AddInput("x", {});
  ir::ValueId w = g.AddConstant(Floats({8, 8}, 0.5f), "w");
  ir::ValueId b = g.AddConstant(Floats({8}, -1.0f), "b");
  ir::NodeId linear = g.AddNode(ir::OpKind::kLinear, {x, w, b});
  ir::NodeId relu = g.AddNode(ir::OpKind::kRelu, {g.node(linear).outputs[0]});
  g.AddOutput(g.node(relu).outputs[0], "y");
  return g;
}

std::vector<kernels::TensorInfo> Signature(int64_t batch) {
  return {kernels::TensorInfo{DType::kF32, Dims{batch, 8}, nullptr, true}};
}

class CompiledGraphCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-cache-test-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<CompiledGraphCache> NewCache(uint64_t memory_bytes = 1 << 30, bool disk = true) {
    CacheOptions options;
    options.memory_bytes = memory_bytes;
    if (disk) options.dir = dir_;
    auto cache = CompiledGraphCache::Create(options);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return *cache;
  }

  // Runs the plan on ones and returns y[0].
  static float RunOnes(const runtime::Executable& exe, int64_t batch) {
    auto out = exe.Run({Floats({batch, 8}, 1.0f)});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].data<float>()[0] : -1;
  }

  std::string dir_;
  const ir::Graph graph_ = SmallModel();
  const runtime::CompileOptions options_;
};

TEST_F(CompiledGraphCacheTest, CompilesOnceThenHitsMemory) {
  auto cache = NewCache();
  auto counters = std::make_shared<PlanCounters>();
  auto first = cache->GetOrCompile("m", "m:1", counters, graph_, Signature(2), options_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = cache->GetOrCompile("m", "m:1", counters, graph_, Signature(2), options_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(counters->misses, 1u);
  EXPECT_EQ(counters->memory_hits, 1u);
  EXPECT_EQ(RunOnes(**second, 2), 3.0f);  // 8 * 0.5 - 1
  EXPECT_GT(counters->bytes_held, 0);
  EXPECT_EQ(cache->Totals().memory_entries, 1u);
}

TEST_F(CompiledGraphCacheTest, NewProcessLoadsThePlanFromDisk) {
  {
    auto cache = NewCache();
    auto counters = std::make_shared<PlanCounters>();
    ASSERT_TRUE(cache->GetOrCompile("m", "m:1", counters, graph_, Signature(3), options_).ok());
    EXPECT_EQ(cache->Totals().disk_writes, 1u);
  }
  auto cache = NewCache();  // as after a restart: empty memory, same directory
  auto counters = std::make_shared<PlanCounters>();
  auto exe = cache->GetOrCompile("m", "m:1", counters, graph_, Signature(3), options_);
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(counters->disk_hits, 1u);
  EXPECT_EQ(counters->misses, 0u);
  EXPECT_EQ(RunOnes(**exe, 3), 3.0f);
  // The plan shares the model's weights rather than holding a copy.
  const Tensor* w = graph_.ConstantValue(1);
  bool shared = false;
  for (const ir::Node& n : (*exe)->graph().nodes()) {
    const Tensor* t = n.attrs.GetTensor("value");
    shared = shared || (t != nullptr && t->raw_data() == w->raw_data());
  }
  EXPECT_TRUE(shared);
}

TEST_F(CompiledGraphCacheTest, CorruptOrTruncatedPlanIsRemovedAndRecompiled) {
  const std::string key = CompiledGraphCache::PlanKey("m", Signature(4), options_);
  for (const char* damage : {"truncate", "flip"}) {
    {
      auto cache = NewCache();
      auto counters = std::make_shared<PlanCounters>();
      ASSERT_TRUE(cache->GetOrCompile("m", "m:1", counters, graph_, Signature(4), options_).ok());
    }
    auto cache = NewCache();
    const std::string path = cache->PlanPath(key);
    auto bytes = ReadFileToString(path);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::string broken = *bytes;
    if (std::string(damage) == "truncate") {
      broken.resize(broken.size() / 2);
    } else {
      broken[broken.size() - 3] ^= 0x10;
    }
    ASSERT_TRUE(WriteFileAtomically(path, broken).ok());

    auto counters = std::make_shared<PlanCounters>();
    auto exe = cache->GetOrCompile("m", "m:1", counters, graph_, Signature(4), options_);
    ASSERT_TRUE(exe.ok()) << damage << ": " << exe.status();
    EXPECT_EQ(counters->misses, 1u) << damage;
    EXPECT_EQ(counters->disk_hits, 0u) << damage;
    EXPECT_EQ(cache->Totals().disk_corrupt, 1u) << damage;
    EXPECT_EQ(RunOnes(**exe, 4), 3.0f);
    // Recompiling wrote a good entry back.
    auto again = ReadFileToString(path);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *bytes) << damage;
  }
}

TEST_F(CompiledGraphCacheTest, ByteBoundEvictsTheLeastRecentlyUsedPlan) {
  // Measure one plan, then allow a bit more than two of them.
  uint64_t one = 0;
  {
    auto probe = NewCache(1 << 30, /*disk=*/false);
    auto counters = std::make_shared<PlanCounters>();
    ASSERT_TRUE(probe->GetOrCompile("m", "m:1", counters, graph_, Signature(64), options_).ok());
    one = static_cast<uint64_t>(counters->bytes_held.load());
  }
  auto cache = NewCache(one * 2 + one / 2, /*disk=*/false);
  auto counters = std::make_shared<PlanCounters>();
  auto get = [&](int64_t batch) {
    return cache->GetOrCompile("m", "m:1", counters, graph_, Signature(batch), options_);
  };
  ASSERT_TRUE(get(64).ok());  // A
  ASSERT_TRUE(get(63).ok());  // B
  ASSERT_TRUE(get(64).ok());  // A again: now B is the least recently used
  EXPECT_EQ(counters->memory_hits, 1u);
  ASSERT_TRUE(get(62).ok());  // C: over the bound, evicts B
  EXPECT_EQ(counters->evictions, 1u);
  EXPECT_EQ(cache->Totals().memory_entries, 2u);
  EXPECT_LE(cache->Totals().memory_bytes, one * 2 + one / 2);
  ASSERT_TRUE(get(64).ok());  // A is still there
  EXPECT_EQ(counters->memory_hits, 2u);
  ASSERT_TRUE(get(63).ok());  // B was evicted: compiled again
  EXPECT_EQ(counters->misses, 4u);
}

TEST_F(CompiledGraphCacheTest, ConcurrentMissesCompileOnce) {
  auto cache = NewCache();
  auto counters = std::make_shared<PlanCounters>();
  std::vector<std::thread> threads;
  std::vector<const runtime::Executable*> got(16, nullptr);
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto exe = cache->GetOrCompile("m", "m:1", counters, graph_, Signature(5), options_);
      if (exe.ok()) got[t] = exe->get();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counters->misses + counters->disk_hits, 1u);
  EXPECT_EQ(counters->memory_hits, 15u);
  for (const auto* p : got) EXPECT_EQ(p, got[0]);
}

TEST_F(CompiledGraphCacheTest, ForgetDropsAVersionsPlans) {
  auto cache = NewCache();
  auto a = std::make_shared<PlanCounters>();
  auto b = std::make_shared<PlanCounters>();
  ASSERT_TRUE(cache->GetOrCompile("a", "a:1", a, graph_, Signature(2), options_).ok());
  ASSERT_TRUE(cache->GetOrCompile("b", "b:1", b, graph_, Signature(2), options_).ok());
  cache->Forget(a);
  EXPECT_EQ(a->bytes_held, 0);
  EXPECT_EQ(a->evictions, 0u);  // an unload is not an eviction
  EXPECT_EQ(cache->Totals().memory_entries, 1u);
}

TEST_F(CompiledGraphCacheTest, ImportedGraphsRoundTripAndCorruptOnesAreMisses) {
  const std::string sha(64, 'a');
  auto cache = NewCache();
  EXPECT_FALSE(cache->LoadGraph(sha).has_value());
  auto bytes = SerializeGraph(graph_);
  ASSERT_TRUE(bytes.ok());
  cache->StoreGraph(sha, bytes->Pieces());
  auto loaded = cache->LoadGraph(sha);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(ir::StructurallyEqual(*loaded, graph_));

  std::ofstream(cache->GraphPath(sha), std::ios::binary | std::ios::trunc) << "garbage";
  EXPECT_FALSE(cache->LoadGraph(sha).has_value());
  EXPECT_FALSE(fs::exists(cache->GraphPath(sha)));  // removed, not left to fail again
  EXPECT_EQ(cache->Totals().disk_corrupt, 1u);
}

TEST_F(CompiledGraphCacheTest, FileDigestsAreRememberedUntilTheFileChanges) {
  const std::string model = dir_ + "/model.pt";
  ASSERT_TRUE(WriteFileAtomically(model, "first contents").ok());
  auto cache = NewCache();
  auto first = cache->DigestFile(model);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->sha256, Sha256File(model)->sha256);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ + "/digests"), fs::directory_iterator()), 1);
  auto again = NewCache()->DigestFile(model);  // from the memo
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sha256, first->sha256);
  // Same size, rewritten in place: the change time moves, the memo no longer applies.
  std::ofstream(model, std::ios::binary | std::ios::trunc) << "other contents";
  auto changed = cache->DigestFile(model);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->sha256, first->sha256);
  EXPECT_EQ(changed->sha256, Sha256File(model)->sha256);
}

TEST_F(CompiledGraphCacheTest, EntriesOfOtherEnginesAndDigestsOfChangedFilesAreSwept) {
  const std::string model = dir_ + "/model.pt";
  ASSERT_TRUE(WriteFileAtomically(model, "contents").ok());
  auto cache = NewCache();
  ASSERT_TRUE(cache->DigestFile(model).ok());
  auto counters = std::make_shared<PlanCounters>();
  ASSERT_TRUE(cache->GetOrCompile("m", "m:1", counters, graph_, Signature(2), options_).ok());
  const std::string current =
      cache->PlanPath(CompiledGraphCache::PlanKey("m", Signature(2), options_));
  // Left by an older kilnd a week ago, and one it wrote just now.
  const std::string old_entry = dir_ + "/plans/old.plan";
  const std::string fresh_entry = dir_ + "/plans/fresh.plan";
  ASSERT_TRUE(WriteCacheFile(old_entry, "plan", "plan;model=m;engine=kiln-0.0.1/old", "x").ok());
  ASSERT_TRUE(WriteCacheFile(fresh_entry, "plan", "plan;model=m;engine=kiln-0.0.1/old", "x").ok());
  fs::last_write_time(old_entry, fs::file_time_type::clock::now() - std::chrono::hours(24 * 7));
  fs::last_write_time(current, fs::file_time_type::clock::now() - std::chrono::hours(24 * 7));
  fs::remove(model);  // its remembered digest is now useless

  NewCache();
  EXPECT_FALSE(fs::exists(old_entry));
  EXPECT_TRUE(fs::exists(fresh_entry));  // a rolling upgrade's other replica may still use it
  EXPECT_TRUE(fs::exists(current));      // this engine's, however old
  EXPECT_TRUE(fs::is_empty(dir_ + "/digests"));
}

// x[N, 3, 12, 12] -> Conv(3 -> 16, 3x3) -> BatchNorm -> Relu -> Conv(16 -> 5,
// 3x3) -> Relu -> Conv(5 -> 16, 3x3) -> Relu -> Conv(16 -> 16, 3x3) -> Flatten
// -> Linear(2304 -> 7): oneDNN convolutions (one with a batch norm folded into
// its weights as they are packed, odd channel counts that blocked formats pad,
// one Winograd takes where the CPU has it) and a oneDNN linear
// layer, every weight prepacked (and every weight 1 KiB or more, so that the
// cache file holds it where the kernels read it: graph_serializer.h).
ir::Graph ConvModel() {
  std::mt19937 rng(11);
  auto random = [&rng](Dims dims, float lo, float hi) {
    Tensor t = Tensor::Zeros(DType::kF32, std::move(dims));
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(rng);
    return t;
  };
  ir::Graph g;
  ir::ValueId y = g.AddInput("x", ir::TensorType{DType::kF32, Dims{-1, 3, 12, 12}});
  auto conv = [&](ir::ValueId x, int64_t c, int64_t o) {
    ir::Attributes a;
    a.SetInts("stride", {1, 1});
    a.SetInts("padding", {1, 1});
    a.SetInts("dilation", {1, 1});
    a.SetInt("groups", 1);
    ir::ValueId w = g.AddConstant(random({o, c, 3, 3}, -0.5f, 0.5f));
    ir::ValueId b = g.AddConstant(random({o}, -1, 1));
    return g.node(g.AddNode(ir::OpKind::kConv, {x, w, b}, a, "aten::_convolution")).outputs[0];
  };
  auto relu = [&](ir::ValueId x) {
    return g.node(g.AddNode(ir::OpKind::kRelu, {x}, {}, "aten::relu")).outputs[0];
  };
  y = conv(y, 3, 16);
  ir::Attributes bn;
  bn.SetFloat("eps", 1e-5);
  y = g.node(g.AddNode(ir::OpKind::kBatchNorm,
                       {y, g.AddConstant(random({16}, 0.5f, 2)), g.AddConstant(random({16}, -1, 1)),
                        g.AddConstant(random({16}, -0.5f, 0.5f)),
                        g.AddConstant(random({16}, 0.1f, 3))},
                       bn, "aten::batch_norm"))
          .outputs[0];
  y = relu(conv(relu(y), 16, 5));
  y = conv(relu(conv(y, 5, 16)), 16, 16);
  ir::Attributes flat;
  flat.SetInt("start_dim", 1);
  flat.SetInt("end_dim", -1);
  y = g.node(g.AddNode(ir::OpKind::kFlatten, {y}, flat, "aten::flatten")).outputs[0];
  y = g.node(g.AddNode(ir::OpKind::kLinear,
                       {y, g.AddConstant(random({7, 16 * 144}, -0.05f, 0.05f)),
                        g.AddConstant(random({7}, -1, 1))},
                       {}, "aten::linear"))
          .outputs[0];
  g.AddOutput(y, "y");
  return g;
}

std::vector<kernels::TensorInfo> ImageSignature() {
  return {kernels::TensorInfo{DType::kF32, Dims{2, 3, 12, 12}, nullptr, true}};
}

// The plan's output bytes for a fixed input.
std::string RunImage(const runtime::Executable& exe) {
  Tensor x = Tensor::Zeros(DType::kF32, {2, 3, 12, 12});
  for (int64_t i = 0; i < x.num_elements(); ++i)
    x.data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  auto out = exe.Run({x});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return "";
  return std::string(static_cast<const char*>((*out)[0].raw_data()), (*out)[0].byte_size());
}

std::vector<std::string> PackedFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "packed", ec))
    files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

class PackedWeightsTest : public CompiledGraphCacheTest {
 protected:
  // Compiles ConvModel's plan as a process starting on this cache directory
  // does: the graph read from the disk cache (its weights mapped from the
  // cache file), then the plan. Returns the output bytes; `reorders` gets
  // how many weights the compile reordered.
  std::string CompileAsANewProcess(uint64_t* reorders, CacheTotals* totals = nullptr,
                                   bool disk = true) {
    auto cache = NewCache(1 << 30, disk);
    std::optional<ir::Graph> graph;
    if (disk) {
      graph = cache->LoadGraph(kGraphId);
      if (!graph.has_value()) {
        auto bytes = SerializeGraph(ConvModel());
        EXPECT_TRUE(bytes.ok()) << bytes.status();
        cache->StoreGraph(kGraphId, bytes->Pieces());
        graph = cache->LoadGraph(kGraphId);
      }
    } else {
      graph = ConvModel();
    }
    EXPECT_TRUE(graph.has_value());
    if (!graph.has_value()) return "";
    const uint64_t before = kernels::onednn::WeightReorderCount();
    auto counters = std::make_shared<PlanCounters>();
    auto exe = cache->GetOrCompile("conv", "conv:1", counters, *graph, ImageSignature(), options_);
    EXPECT_TRUE(exe.ok()) << exe.status();
    if (!exe.ok()) return "";
    *reorders = kernels::onednn::WeightReorderCount() - before;
    if (totals != nullptr) *totals = cache->Totals();
    return RunImage(**exe);
  }

  static constexpr char kGraphId[] =
      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
};

TEST_F(PackedWeightsTest, RestartMapsPackedWeightsInsteadOfReordering) {
  uint64_t reorders = 0;
  CacheTotals totals;
  const std::string first = CompileAsANewProcess(&reorders, &totals);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(reorders, 5u);  // four convolutions and the linear layer
  EXPECT_EQ(totals.packed_writes, 5u);
  EXPECT_EQ(totals.packed_hits, 0u);
  EXPECT_EQ(PackedFiles(dir_).size(), 5u);

  // A restart: a fresh cache object over the same directory.
  const std::string second = CompileAsANewProcess(&reorders, &totals);
  EXPECT_EQ(reorders, 0u) << "a restart reordered weights instead of mapping them";
  EXPECT_EQ(totals.packed_hits, 5u);
  EXPECT_EQ(totals.packed_writes, 0u);
  EXPECT_EQ(totals.disk_plan_hits, 1u);
  EXPECT_TRUE(second == first) << "outputs differ after a restart";

  // Without a disk cache: packed in memory, as before, with the same numbers.
  const std::string memory_only = CompileAsANewProcess(&reorders, nullptr, /*disk=*/false);
  EXPECT_EQ(reorders, 5u);
  EXPECT_TRUE(memory_only == first);
  EXPECT_EQ(PackedFiles(dir_).size(), 5u);
}

TEST_F(PackedWeightsTest, CorruptPackedWeightIsRemovedAndPackedAgain) {
  uint64_t reorders = 0;
  const std::string first = CompileAsANewProcess(&reorders);
  const std::vector<std::string> files = PackedFiles(dir_);
  ASSERT_EQ(files.size(), 5u);
  for (const char* damage : {"flip", "truncate"}) {
    const std::string& path = files[std::string(damage) == "flip" ? 1 : 2];
    auto bytes = ReadFileToString(path);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::string broken = *bytes;
    if (std::string(damage) == "flip") {
      broken[broken.size() - 5] ^= 0x08;
    } else {
      broken.resize(broken.size() / 2);
    }
    ASSERT_TRUE(WriteFileAtomically(path, broken).ok());

    CacheTotals totals;
    const std::string again = CompileAsANewProcess(&reorders, &totals);
    EXPECT_EQ(reorders, 1u) << damage;  // the bad one only
    EXPECT_EQ(totals.disk_corrupt, 1u) << damage;
    EXPECT_EQ(totals.packed_hits, 4u) << damage;
    EXPECT_TRUE(again == first) << damage;
    auto rewritten = ReadFileToString(path);
    ASSERT_TRUE(rewritten.ok());
    EXPECT_TRUE(*rewritten == *bytes) << damage << ": the packed weight was not written back";
  }
}

TEST_F(CompiledGraphCacheTest, DiskBoundKeepsTheRecentlyUsedPlans) {
  // How big one plan file is.
  uint64_t plan_bytes = 0;
  {
    auto cache = NewCache();
    auto counters = std::make_shared<PlanCounters>();
    ASSERT_TRUE(cache->GetOrCompile("m", "m:1", counters, graph_, Signature(1), options_).ok());
    plan_bytes = cache->Totals().disk_bytes;
    ASSERT_GT(plan_bytes, 0u);
    EXPECT_EQ(cache->Totals().disk_limit_bytes, 0u);
  }
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  // A bound that holds two plans (with room below 90% of it), not three.
  CacheOptions options;
  options.dir = dir_;
  options.disk_bytes = plan_bytes * 2 * 10 / 9 + 64;
  auto cache = CompiledGraphCache::Create(options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto counters = std::make_shared<PlanCounters>();
  for (int64_t batch : {1, 2, 3}) {
    ASSERT_TRUE((*cache)->GetOrCompile("m", "m:1", counters, graph_, Signature(batch), options_).ok());
    // Distinct modification times, so that the order of use is the order of the files.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CacheTotals totals = (*cache)->Totals();
  EXPECT_EQ(totals.disk_evictions, 1u);
  EXPECT_LE(totals.disk_bytes, options.disk_bytes);
  EXPECT_EQ(totals.disk_limit_bytes, options.disk_bytes);
  auto plans = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(fs::path(dir_) / "plans")) n += e.is_regular_file();
    return n;
  };
  EXPECT_EQ(plans(), 2u);
  // A restart reads the plans left (batch 2 and 3) and compiles the evicted one.
  auto restarted = CompiledGraphCache::Create(options);
  ASSERT_TRUE(restarted.ok());
  auto fresh = std::make_shared<PlanCounters>();
  for (int64_t batch : {3, 2}) {
    auto exe = (*restarted)->GetOrCompile("m", "m:1", fresh, graph_, Signature(batch), options_);
    ASSERT_TRUE(exe.ok());
    EXPECT_EQ(RunOnes(**exe, batch), 3.0f);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(fresh->disk_hits, 2u);
  auto exe = (*restarted)->GetOrCompile("m", "m:1", fresh, graph_, Signature(1), options_);
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(fresh->misses, 1u);
  EXPECT_EQ(RunOnes(**exe, 1), 3.0f);
  // Writing it again evicted the least recently used of the others (batch 3, read before 2).
  EXPECT_EQ((*restarted)->Totals().disk_evictions, 1u);
  EXPECT_TRUE(fs::exists((*restarted)->PlanPath(CompiledGraphCache::PlanKey("m", Signature(2), options_))));
  EXPECT_FALSE(fs::exists((*restarted)->PlanPath(CompiledGraphCache::PlanKey("m", Signature(3), options_))));
}

TEST_F(CompiledGraphCacheTest, MemoryOnlyCacheWritesNothing) {
  auto cache = NewCache(1 << 30, /*disk=*/false);
  auto counters = std::make_shared<PlanCounters>();
  ASSERT_TRUE(cache->GetOrCompile("m", "m:1", counters, graph_, Signature(2), options_).ok());
  EXPECT_EQ(cache->Totals().disk_writes, 0u);
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace kiln::cache
