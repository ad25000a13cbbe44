#include "engine/cache/disk_budget.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/cache/file_io.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;

class DiskBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-disk-budget-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    for (const char* sub : {"graphs", "plans", "packed", "digests"}) fs::create_directories(dir_ / sub);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of `bytes` whose last use was `age_s` seconds ago.
  fs::path Put(const std::string& rel, size_t bytes, int age_s) {
    const fs::path p = dir_ / rel;
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
    fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return p;
  }

  fs::path dir_;
};

TEST_F(DiskBudgetTest, UnboundedCountsAndRemovesNothing) {
  Put("graphs/a.graph", 1000, 50);
  Put("plans/b.plan", 300, 40);
  Put("packed/c.packed", 200, 30);
  DiskBudget budget(dir_.string(), 0);
  EXPECT_EQ(budget.Enforce(), 0);
  EXPECT_EQ(budget.bytes(), 1500u);
  budget.Added(10000);
  EXPECT_EQ(budget.bytes(), 11500u);
  EXPECT_EQ(budget.evictions(), 0u);
  EXPECT_TRUE(fs::exists(dir_ / "graphs/a.graph"));
}

TEST_F(DiskBudgetTest, LeastRecentlyUsedGoFirstDownToNinetyPercent) {
  const fs::path oldest = Put("packed/old.packed", 400, 500);
  const fs::path older = Put("plans/older.plan", 400, 400);
  const fs::path recent = Put("graphs/recent.graph", 400, 10);
  const fs::path newest = Put("plans/new.plan", 400, 1);
  // Not entries: a write in progress and a digest memo.
  const fs::path temp = Put(std::string("plans/") + kTempPrefix + "x", 5000, 1000);
  const fs::path digest = Put("digests/d.digest", 5000, 1000);
  DiskBudget budget(dir_.string(), 1000);
  EXPECT_EQ(budget.Enforce(), 2);  // 1600 -> 800 <= 900
  EXPECT_FALSE(fs::exists(oldest));
  EXPECT_FALSE(fs::exists(older));
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(newest));
  EXPECT_TRUE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(digest));
  EXPECT_EQ(budget.bytes(), 800u);
  EXPECT_EQ(budget.evictions(), 2u);
}

TEST_F(DiskBudgetTest, TouchKeepsAnEntryThatIsRead) {
  const fs::path a = Put("graphs/a.graph", 400, 500);
  const fs::path b = Put("plans/b.plan", 400, 400);
  DiskBudget::Touch(a.string());  // read just now
  DiskBudget budget(dir_.string(), 600);
  EXPECT_EQ(budget.Enforce(), 1);
  EXPECT_TRUE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  DiskBudget::Touch((dir_ / "plans/missing.plan").string());  // best effort, no throw
}

TEST_F(DiskBudgetTest, AddedEnforcesOnlyPastTheBound) {
  const fs::path a = Put("plans/a.plan", 400, 100);
  DiskBudget budget(dir_.string(), 1000);
  EXPECT_EQ(budget.Enforce(), 0);
  const fs::path b = Put("plans/b.plan", 500, 50);
  budget.Added(500);  // 900: within the bound
  EXPECT_TRUE(fs::exists(a));
  EXPECT_EQ(budget.evictions(), 0u);
  const fs::path c = Put("packed/c.packed", 500, 0);
  budget.Added(500);  // 1400: the oldest go until at most 900 is left
  EXPECT_FALSE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(fs::exists(c));
  EXPECT_EQ(budget.evictions(), 2u);
  EXPECT_EQ(budget.bytes(), 500u);
}

}  // namespace
}  // namespace kiln::cache
