#include "engine/cache/compiled_graph_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/cache/cache_file.h"
#include "engine/cache/file_io.h"
#include "engine/cache/graph_serializer.h"

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

TEST_F(CompiledGraphCacheTest, MemoryOnlyCacheWritesNothing) {
  auto cache = NewCache(1 << 30, /*disk=*/false);
  auto counters = std::make_shared<PlanCounters>();
  ASSERT_TRUE(cache->GetOrCompile("m", "m:1", counters, graph_, Signature(2), options_).ok());
  EXPECT_EQ(cache->Totals().disk_writes, 0u);
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace kiln::cache
