// InferenceCore without any front end: plain messages in and out, the
// caller's right checked by the core itself, the load's contract returned as
// a value. The gRPC and HTTP fronts only translate around these calls.
#include "server/core/inference_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "server/core/model_repository.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using security::Caller;
using security::Role;
using ::testing::HasSubstr;

std::string Fixture(const std::string& file) {
  const char* dir = std::getenv("KILN_FIXTURES");
  return std::string(dir != nullptr && *dir != '\0' ? dir : KILN_FIXTURES_DIR) + "/" + file;
}

class InferenceCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kiln-core-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
        ModelRepository::Open(dir_ + "/models");
    ASSERT_TRUE(repository.ok()) << repository.status();
    repository_ = *std::move(repository);
    RegistryOptions options;
    absl::StatusOr<std::shared_ptr<cache::CompiledGraphCache>> cache =
        cache::CompiledGraphCache::Create(cache::CacheOptions());
    ASSERT_TRUE(cache.ok()) << cache.status();
    options.cache = *std::move(cache);
    registry_ = std::make_unique<ModelRegistry>(repository_.get(), std::move(options));
    core_ = std::make_unique<InferenceCore>(registry_.get(), InferenceCoreOptions());
  }

  void TearDown() override {
    core_.reset();
    registry_.reset();
    repository_.reset();
    fs::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<ModelRegistry> registry_;
  std::unique_ptr<InferenceCore> core_;
};

TEST_F(InferenceCoreTest, AnswersWithPlainMessages) {
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(core_->ServerMetadata(Caller::Unchecked(), &metadata).ok());
  EXPECT_EQ(metadata.name(), "kiln");
  EXPECT_THAT(metadata.extensions(), ::testing::Contains("system_shared_memory"));

  inference::ModelMetadataRequest request;
  request.set_name("absent");
  inference::ModelMetadataResponse response;
  absl::Status status = core_->ModelMetadata(Caller::Unchecked(), request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
}

TEST_F(InferenceCoreTest, RefusesWhatTheCallerMayNotDo) {
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("m");
  absl::StatusOr<ModelLoadResult> loaded =
      core_->RepositoryModelLoad(Caller::WithRole(Role::kInfer), load);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("needs the role 'admin'"));

  inference::ModelInferRequest infer;
  infer.set_model_name("m");
  inference::ModelInferResponse response;
  absl::Status status = core_->ModelInferSync(Caller::Anonymous(), infer, &response, InferCall());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;

  inference::ServerLiveResponse live;
  EXPECT_TRUE(core_->ServerLive(Caller::Anonymous(), &live).ok());
  EXPECT_TRUE(live.live());
}

TEST_F(InferenceCoreTest, LoadChecksParametersAndAnswersTheContract) {
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("mlp");
  (*load.mutable_parameters())["bogus"].set_string_param("x");
  absl::StatusOr<ModelLoadResult> loaded =
      core_->RepositoryModelLoad(Caller::WithRole(Role::kAdmin), load);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("unknown load parameter 'bogus'"));

  if (!fs::exists(Fixture("mlp.pt"))) GTEST_SKIP() << "fixture mlp.pt missing";
  std::ifstream in(Fixture("mlp.pt"), std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  load.clear_parameters();
  (*load.mutable_parameters())["file:1/model.pt"].set_bytes_param(bytes.str());
  loaded = core_->RepositoryModelLoad(Caller::Unchecked(), load);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->contract_json.has_value());
  EXPECT_THAT(*loaded->contract_json, HasSubstr("\"inputs\""));

  inference::ModelReadyRequest ready;
  ready.set_name("mlp");
  inference::ModelReadyResponse answer;
  ASSERT_TRUE(core_->ModelReady(Caller::Anonymous(), ready, &answer).ok());
  EXPECT_TRUE(answer.ready());
}

}  // namespace
}  // namespace kiln::server
