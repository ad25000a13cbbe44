#include "server/core/model_repository.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-repo-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> FilesIn(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ModelNameTest, AcceptsSafeNames) {
  for (const std::string& name :
       {std::string("resnet18"), std::string("a"), std::string("Model-v2.1_final"),
        std::string("x..."), std::string(128, 'm')}) {
    EXPECT_TRUE(ValidateModelName(name).ok()) << name;
  }
}

TEST(ModelNameTest, RejectsUnsafeNames) {
  for (const std::string& name :
       {std::string(""), std::string("."), std::string(".."), std::string("a/b"),
        std::string("../etc"), std::string("a\\b"), std::string("with space"), std::string("ü"),
        std::string("nul\0x", 5), std::string(129, 'm'), std::string(".hidden"),
        std::string("..data"), std::string(".kiln-uploads"), std::string("/abs")}) {
    absl::Status status = ValidateModelName(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_THAT(ValidateModelName(std::string(129, 'm')).message(), HasSubstr("at most 128"));
  EXPECT_THAT(ValidateModelName("a/b").message(), HasSubstr("character 47"));
  EXPECT_THAT(ValidateModelName("..").message(), HasSubstr("must not start with '.'"));
}

TEST(VersionTest, ParsesPositiveIntegersOnly) {
  EXPECT_EQ(ParseVersion("1").value_or(0), 1);
  EXPECT_EQ(ParseVersion("42").value_or(0), 42);
  for (const char* bad : {"", "0", "-1", "01", "1.0", " 1", "1 ", "+1", "1/..", "..", "a",
                          "99999999999999999999", "9007199254740993"}) {
    EXPECT_EQ(ParseVersion(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseVersion("9007199254740992").value_or(0), kMaxVersion);
}

TEST(VersionTest, NumbersPastTwoToThe53AreRefusedEverywhere) {
  EXPECT_TRUE(CheckVersion(1).ok());
  EXPECT_TRUE(CheckVersion(kMaxVersion).ok());
  EXPECT_TRUE(CheckVersion(0, "the next version").ok());
  EXPECT_EQ(CheckVersion(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckVersion(-1, "the next version").code(), absl::StatusCode::kInvalidArgument);
  const absl::Status big = CheckVersion(INT64_MAX, "the next version");
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.message(), HasSubstr("version 9223372036854775807 is out of range: versions are "
                                       "1 to 9007199254740992 (2^53), or 0 for the next version"));
}

TEST(AtomicWriteTest, CreatesAndReplacesWithoutLeavingTempFiles) {
  TempDir dir;
  const std::string path = dir.path() + "/file.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  EXPECT_EQ(Slurp(path), "first");
  ASSERT_TRUE(WriteFileAtomically(path, std::string("sec\0ond", 7)).ok());
  EXPECT_EQ(Slurp(path), std::string("sec\0ond", 7));
  EXPECT_THAT(FilesIn(dir.path()), ElementsAre("file.bin"));
}

TEST(AtomicWriteTest, FailureKeepsOldFileAndLeavesNoTempFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir dir;
  const std::string path = dir.path() + "/file.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  absl::Status status = WriteFileAtomically(path, "new");
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Slurp(path), "old");
  EXPECT_THAT(FilesIn(dir.path()), ElementsAre("file.bin"));
}

TEST(AtomicWriteTest, FailedRenameLeavesNoTempFile) {
  // Renaming a file over a directory fails even for root.
  TempDir dir;
  const std::string path = dir.path() + "/target";
  fs::create_directory(path);
  absl::Status status = WriteFileAtomically(path, "data");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("cannot rename"));
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_THAT(FilesIn(dir.path()), ElementsAre("target"));
}

TEST(AtomicWriteTest, MissingDirectoryIsInternalError) {
  TempDir dir;
  absl::Status status = WriteFileAtomically(dir.path() + "/missing/file.bin", "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("cannot create"));
}

TEST(ModelRepositoryTest, WritesTritonLayoutAndListsModelsAndVersions) {
  TempDir dir;
  auto repo = ModelRepository::Open(dir.path() + "/models");
  ASSERT_TRUE(repo.ok()) << repo.status();
  EXPECT_THAT((*repo)->List(), IsEmpty());

  ASSERT_TRUE((*repo)->WriteModel("b_model", 1, "BBB").ok());
  ASSERT_TRUE((*repo)->WriteModel("a_model", 1, "AAA").ok());
  ASSERT_TRUE((*repo)->WriteModel("a_model", 3, "AAA3").ok());
  ASSERT_TRUE((*repo)->WriteConfig("a_model", std::string(R"({"inputs":[]})")).ok());
  EXPECT_EQ(Slurp(dir.path() + "/models/a_model/1/model.pt"), "AAA");
  EXPECT_EQ(Slurp(dir.path() + "/models/a_model/3/model.pt"), "AAA3");
  EXPECT_EQ(Slurp(dir.path() + "/models/a_model/config.json"), R"({"inputs":[]})");
  EXPECT_THAT((*repo)->List(), ElementsAre("a_model", "b_model"));
  EXPECT_THAT((*repo)->Versions("a_model"), ElementsAre(1, 3));

  auto model = (*repo)->ReadModel("b_model", 1);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(*model, "BBB");
  auto config = (*repo)->ReadConfig("a_model");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->value_or(""), R"({"inputs":[]})");
  auto no_config = (*repo)->ReadConfig("b_model");
  ASSERT_TRUE(no_config.ok());
  EXPECT_FALSE(no_config->has_value());

  ASSERT_TRUE((*repo)->WriteConfig("a_model", std::nullopt).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/models/a_model/config.json"));
  EXPECT_EQ((*repo)->ReadModel("missing", 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*repo)->ReadModel("b_model", 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*repo)->WriteModel("../escape", 1, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir.path() + "/escape"));
}

TEST(ModelRepositoryTest, ListSkipsInvalidNamesHiddenEntriesAndDirectoriesWithoutModel) {
  TempDir dir;
  fs::create_directories(dir.path() + "/empty_dir/1");
  fs::create_directories(dir.path() + "/bad name/1");
  std::ofstream(dir.path() + "/bad name/1/model.pt") << "x";
  fs::create_directories(dir.path() + "/..data/1");  // a Kubernetes volume's bookkeeping
  std::ofstream(dir.path() + "/..data/1/model.pt") << "x";
  std::ofstream(dir.path() + "/stray_file") << "x";
  fs::create_directories(dir.path() + "/good/1");
  std::ofstream(dir.path() + "/good/1/model.pt") << "x";
  fs::create_directories(dir.path() + "/good/not_a_version");
  std::ofstream(dir.path() + "/good/not_a_version/model.pt") << "x";
  fs::create_directories(dir.path() + "/good/007");
  std::ofstream(dir.path() + "/good/007/model.pt") << "x";
  auto repo = ModelRepository::Open(dir.path());
  ASSERT_TRUE(repo.ok());
  EXPECT_THAT((*repo)->List(), ElementsAre("good"));
  EXPECT_THAT((*repo)->Versions("good"), ElementsAre(1));
}

TEST(ModelRepositoryTest, OpenSweepsLeftoverTempFilesAndHalfDeletedModels) {
  TempDir dir;
  fs::create_directories(dir.path() + "/m/1");
  std::ofstream(dir.path() + "/m/1/model.pt") << "x";
  std::ofstream(dir.path() + "/m/1/.kiln-tmp-model.pt-123") << "partial";
  std::ofstream(dir.path() + "/m/.kiln-tmp-config.json-9") << "partial";
  fs::create_directories(dir.path() + "/.kiln-trash-old-1/2");
  std::ofstream(dir.path() + "/.kiln-trash-old-1/2/model.pt") << "x";
  fs::create_directories(dir.path() + "/.kiln-uploads");
  std::ofstream(dir.path() + "/.kiln-uploads/.kiln-tmp-load-5") << "partial";
  std::ofstream(dir.path() + "/.kiln-uploads/abc-10.part") << "kept";  // resumable: stays
  auto repo = ModelRepository::Open(dir.path());
  ASSERT_TRUE(repo.ok());
  EXPECT_THAT(FilesIn(dir.path() + "/m/1"), ElementsAre("model.pt"));
  EXPECT_THAT(FilesIn(dir.path() + "/m"), ElementsAre("1"));
  EXPECT_THAT(FilesIn(dir.path()), ElementsAre(".kiln-uploads", "m"));
  EXPECT_THAT(FilesIn(dir.path() + "/.kiln-uploads"), ElementsAre("abc-10.part"));
}

TEST(ModelRepositoryTest, InstallMovesAStagedFileIntoPlace) {
  TempDir dir;
  auto repo = ModelRepository::Open(dir.path());
  ASSERT_TRUE(repo.ok());
  const std::string staged = (*repo)->StagingDir() + "/upload.part";
  std::ofstream(staged) << "new model";
  ASSERT_TRUE((*repo)->InstallModel("m", 2, staged).ok());
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(Slurp(dir.path() + "/m/2/model.pt"), "new model");

  auto clone = (*repo)->CloneToStaging(dir.path() + "/m/2/model.pt");
  ASSERT_TRUE(clone.ok()) << clone.status();
  ASSERT_TRUE((*repo)->InstallModel("m", 3, *clone).ok());
  EXPECT_EQ(Slurp(dir.path() + "/m/3/model.pt"), "new model");
  EXPECT_THAT((*repo)->Versions("m"), ElementsAre(2, 3));
}

TEST(ModelRepositoryTest, DeleteRemovesAVersionOrTheWholeModel) {
  TempDir dir;
  auto repo = ModelRepository::Open(dir.path());
  ASSERT_TRUE(repo.ok());
  ASSERT_TRUE((*repo)->WriteModel("m", 1, "one").ok());
  ASSERT_TRUE((*repo)->WriteModel("m", 2, "two").ok());
  ASSERT_TRUE((*repo)->WriteConfig("m", std::string("{}")).ok());
  ASSERT_TRUE((*repo)->Delete("m", 1).ok());
  EXPECT_THAT((*repo)->Versions("m"), ElementsAre(2));
  EXPECT_EQ((*repo)->Delete("m", 1).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*repo)->Delete("m", 0).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/m"));
  EXPECT_THAT((*repo)->List(), IsEmpty());
  EXPECT_EQ((*repo)->Delete("../m", 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FilesIn(dir.path()), ElementsAre(".kiln-uploads"));
}

}  // namespace
}  // namespace kiln::server
