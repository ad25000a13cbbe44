// The durable repository, Kiln's streaming upload and the compiled-graph cache,
// through an in-process server on 127.0.0.1:0 driven by the client library:
// versions and version policies, resumable and deduplicated uploads, checksum
// and name checks, deletes, restarts served from the disk cache, and import
// child processes that crash, hang or run out of memory.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/inference_client.h"
#include "client/npy.h"
#include "engine/common/sha256.h"
#include "inference/grpc_service.grpc.pb.h"
#include "kiln/v1/repository_service.grpc.pb.h"
#include "server/app/server.h"

namespace kiln {
namespace {

// No upload is left in the staging area (kilnd keeps the import sandbox's
// empty root directory there, .sandbox-root, which holds nothing).
bool NoStagedFiles(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename() != ".sandbox-root") return false;
  }
  return true;
}

namespace fs = std::filesystem;
using client::InferenceClient;
using client::NamedTensor;
using ::testing::HasSubstr;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}
std::string FixtureDir() {
  const std::string dir = Env("KILN_FIXTURES");
  return dir.empty() ? KILN_FIXTURES_DIR : dir;
}
std::string Fixture(const std::string& file) { return FixtureDir() + "/" + file; }
std::string TorchWorker() { return std::string(KILN_BIN_DIR) + "/kiln-torch-worker"; }

#define REQUIRE_FIXTURE(file)                                                                \
  if (!fs::exists(Fixture(file))) {                                                          \
    GTEST_SKIP() << "fixture " << Fixture(file) << " missing (build the `fixtures` target)"; \
  }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Tensor Npy(const std::string& file) {
  auto t = client::ReadNpy(Fixture(file));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

void ExpectClose(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dims(), want.dims());
  double max_abs = 0, max_err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    max_abs = std::max(max_abs, std::abs(static_cast<double>(want.data<float>()[i])));
    max_err = std::max(max_err,
                       std::abs(static_cast<double>(got.data<float>()[i] - want.data<float>()[i])));
  }
  EXPECT_LE(max_err, 1e-4 * std::max(max_abs, 1e-6));
}

bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.dims() == b.dims() && a.byte_size() == b.byte_size() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

// Sets an environment variable for the scope (the import child inherits it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

class RepositoryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-repo-service-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    options_.host = "127.0.0.1";
    options_.port = 0;
    options_.model_repository = root_ + "/models";
    options_.threads = 1;
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void Start() {
    client_.reset();
    server_.reset();
    auto server = server::Server::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client::ClientOptions client_options;
    client_options.timeout = std::chrono::seconds(300);
    auto client = InferenceClient::Connect(server_->address(), client_options);
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
  }

  std::vector<NamedTensor> Inputs(const std::string& model) {
    return {{"x", Npy(model + ".input.x.npy")}};
  }

  // Runs `name` (at `version`) on <model>'s inputs; returns output 0.
  Tensor Run(const std::string& name, const std::string& model, const std::string& version = "") {
    auto out = client_->Infer(name, Inputs(model), {}, version);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() && !out->empty() ? (*out)[0].tensor : Tensor();
  }

  client::ModelCacheStatistics CacheStats(const std::string& name, int64_t version = 0) {
    auto stats = client_->GetCacheStatistics(name, version);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok() || stats->models.empty()) return {};
    return stats->models.back();
  }

  std::string root_;
  server::ServerOptions options_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<InferenceClient> client_;
};

TEST_F(RepositoryServiceTest, NewUploadsBecomeNewVersionsServedByPolicy) {
  REQUIRE_FIXTURE("mlp_v2.pt");
  Start();
  auto v1 = client_->UploadFile("mlp", Fixture("mlp.pt"));
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->version, 1);
  auto v2 = client_->UploadFile("mlp", Fixture("mlp_v2.pt"));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->version, 2);
  EXPECT_TRUE(fs::exists(options_.model_repository + "/mlp/1/model.pt"));
  EXPECT_TRUE(fs::exists(options_.model_repository + "/mlp/2/model.pt"));

  // Latest 1 by default: version 2 serves, version 1 stays on disk unserved.
  ExpectClose(Run("mlp", "mlp_v2"), Npy("mlp_v2.output0.npy"));
  auto old = client_->Infer("mlp", Inputs("mlp"), {}, "1");
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.status().message(), HasSubstr("version policy"));
  auto index = client_->Index();
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->size(), 2u);
  EXPECT_EQ((*index)[0].version, "1");
  EXPECT_EQ((*index)[0].state, "UNAVAILABLE");
  EXPECT_EQ((*index)[1].state, "READY");

  // Serve every version; ModelInfer picks one by name.
  ASSERT_TRUE(client_->Load("mlp", R"({"version_policy": {"all": {}}})").ok());
  ExpectClose(Run("mlp", "mlp", "1"), Npy("mlp.output0.npy"));
  ExpectClose(Run("mlp", "mlp_v2", "2"), Npy("mlp_v2.output0.npy"));
  ExpectClose(Run("mlp", "mlp_v2"), Npy("mlp_v2.output0.npy"));  // default: the latest
  auto metadata = client_->Metadata("mlp");
  ASSERT_TRUE(metadata.ok());
  EXPECT_THAT(metadata->versions, ::testing::ElementsAre("1", "2"));
  EXPECT_EQ(client_->Infer("mlp", Inputs("mlp"), {}, "3").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Infer("mlp", Inputs("mlp"), {}, "../1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->ModelReady("mlp").value_or(false), true);
}

TEST_F(RepositoryServiceTest, SameFileAgainSendsNothingAndChangesNothing) {
  REQUIRE_FIXTURE("mlp.pt");
  Start();
  auto first = client_->UploadFile("mlp", Fixture("mlp.pt"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->already_on_server);
  EXPECT_EQ(first->bytes_sent, first->size);

  auto again = client_->UploadFile("mlp", Fixture("mlp.pt"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_on_server);
  EXPECT_TRUE(again->unchanged);
  EXPECT_EQ(again->bytes_sent, 0u);
  EXPECT_EQ(again->version, 1);

  // Another name with the same content: installed from the server's copy.
  auto status = client_->QueryModelFile(first->sha256, first->size);
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->present);
  auto copy = client_->UploadFile("mlp_copy", Fixture("mlp.pt"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->bytes_sent, 0u);
  EXPECT_FALSE(copy->unchanged);
  EXPECT_EQ(Slurp(options_.model_repository + "/mlp_copy/1/model.pt"), Slurp(Fixture("mlp.pt")));
  ExpectClose(Run("mlp_copy", "mlp"), Npy("mlp.output0.npy"));
}

TEST_F(RepositoryServiceTest, ResumedChunkedUploadEqualsSingleMessageUpload) {
  REQUIRE_FIXTURE("resnet18.pt");
  Start();
  const std::string bytes = Slurp(Fixture("resnet18.pt"));
  client::UploadOptions options;
  options.chunk_bytes = 64 << 10;
  options.stop_after_bytes = bytes.size() / 3;  // the connection "drops" here
  auto cut = client_->UploadBytes("resumed", bytes, options);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kFailedPrecondition) << cut.status();
  EXPECT_THAT(cut.status().message(), HasSubstr("resume"));
  EXPECT_EQ(client_->ModelReady("resumed").value_or(true), false);
  EXPECT_FALSE(fs::exists(options_.model_repository + "/resumed"));

  auto held = client_->QueryModelFile(Sha256Hex(bytes), bytes.size());
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->present);
  EXPECT_EQ(held->received_bytes, bytes.size() / 3);

  options.stop_after_bytes = 0;
  auto resumed = client_->UploadBytes("resumed", bytes, options);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from, bytes.size() / 3);
  EXPECT_EQ(resumed->bytes_sent, bytes.size() - bytes.size() / 3);

  ASSERT_TRUE(client_->Upload("single", bytes).ok());
  EXPECT_EQ(Slurp(options_.model_repository + "/resumed/1/model.pt"), bytes);
  EXPECT_EQ(Slurp(options_.model_repository + "/single/1/model.pt"), bytes);
  EXPECT_TRUE(BitwiseEqual(Run("resumed", "resnet18"), Run("single", "resnet18")));
  ExpectClose(Run("resumed", "resnet18"), Npy("resnet18.output0.npy"));
}

TEST_F(RepositoryServiceTest, ChecksumsAreVerifiedBeforeAnythingIsInstalled) {
  REQUIRE_FIXTURE("mlp.pt");
  Start();
  const std::string bytes = Slurp(Fixture("mlp.pt"));
  auto stub = v1::ModelRepositoryService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::UploadModelResponse response;
  auto writer = stub->UploadModel(&context, &response);
  v1::UploadModelRequest header;
  header.mutable_header()->set_model_name("m");
  header.mutable_header()->set_total_size(bytes.size());
  header.mutable_header()->set_sha256(Sha256Hex("something else"));
  ASSERT_TRUE(writer->Write(header));
  v1::UploadModelRequest chunk;
  chunk.set_chunk(bytes);
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("corrupt"));

  inference::RepositoryModelLoadRequest load;
  load.set_model_name("m");
  (*load.mutable_parameters())["file:1/model.pt"].set_bytes_param(bytes);
  (*load.mutable_parameters())["sha256"].set_string_param(Sha256Hex("not the file"));
  auto triton = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext load_context;
  inference::RepositoryModelLoadResponse load_response;
  status = triton->RepositoryModelLoad(&load_context, load, &load_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("SHA-256"));
  EXPECT_FALSE(fs::exists(options_.model_repository + "/m"));
  EXPECT_THAT(client_->Index().value(), ::testing::IsEmpty());
}

TEST_F(RepositoryServiceTest, PathTraversalNamesAndFileParametersAreRefused) {
  REQUIRE_FIXTURE("mlp.pt");
  Start();
  const std::string bytes = Slurp(Fixture("mlp.pt"));
  for (const std::string& name :
       {std::string("../evil"), std::string("a/b"), std::string(".."), std::string("."),
        std::string(".hidden"), std::string("/abs"), std::string(""), std::string(200, 'n'),
        std::string("nul\0x", 5)}) {
    EXPECT_EQ(client_->UploadBytes(name, bytes).status().code(), absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_EQ(client_->Upload(name, bytes).code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(client_->Load(name).code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(client_->Delete(name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  auto triton = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  for (const char* key :
       {"file:../1/model.pt", "file:1/../../x/model.pt", "file:0/model.pt", "file:1/model.pt/../x",
        "file:/etc/model.pt", "file:01/model.pt", "file:1/config.json"}) {
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("m");
    (*load.mutable_parameters())[key].set_bytes_param(bytes);
    grpc::ClientContext context;
    inference::RepositoryModelLoadResponse response;
    grpc::Status status = triton->RepositoryModelLoad(&context, load, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key;
    EXPECT_THAT(status.error_message(), HasSubstr("file:<version>/model.pt")) << key;
  }
  // Nothing was written anywhere but the repository's own staging area.
  std::vector<std::string> top;
  for (const auto& e : fs::directory_iterator(root_)) top.push_back(e.path().filename());
  EXPECT_THAT(top, ::testing::ElementsAre("models"));
  std::vector<std::string> repo;
  for (const auto& e : fs::directory_iterator(options_.model_repository)) {
    repo.push_back(e.path().filename());
  }
  EXPECT_THAT(repo, ::testing::ElementsAre(".kiln-uploads"));
  EXPECT_TRUE(NoStagedFiles(options_.model_repository + "/.kiln-uploads"));
}

TEST_F(RepositoryServiceTest, UploadAboveTheLimitStoresNothing) {
  options_.max_upload_bytes = 1000;
  Start();
  auto big = client_->UploadBytes("big", std::string(5000, 'x'));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("5000"));
  EXPECT_TRUE(NoStagedFiles(options_.model_repository + "/.kiln-uploads"));
}

TEST_F(RepositoryServiceTest, DeleteRemovesFilesAndThePreviousVersionTakesOver) {
  REQUIRE_FIXTURE("mlp_v2.pt");
  Start();
  ASSERT_TRUE(client_->UploadFile("mlp", Fixture("mlp.pt")).ok());
  ASSERT_TRUE(client_->UploadFile("mlp", Fixture("mlp_v2.pt")).ok());
  ExpectClose(Run("mlp", "mlp_v2"), Npy("mlp_v2.output0.npy"));

  ASSERT_TRUE(client_->Delete("mlp", 2).ok());
  EXPECT_FALSE(fs::exists(options_.model_repository + "/mlp/2"));
  ExpectClose(Run("mlp", "mlp"), Npy("mlp.output0.npy"));  // version 1 serves again
  EXPECT_EQ(client_->Delete("mlp", 2).code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(client_->Delete("mlp").ok());
  EXPECT_FALSE(fs::exists(options_.model_repository + "/mlp"));
  EXPECT_EQ(client_->Infer("mlp", Inputs("mlp")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Delete("mlp").code(), absl::StatusCode::kNotFound);
  // Unload, by contrast, keeps the files.
  ASSERT_TRUE(client_->UploadFile("kept", Fixture("mlp.pt")).ok());
  ASSERT_TRUE(client_->Unload("kept").ok());
  EXPECT_TRUE(fs::exists(options_.model_repository + "/kept/1/model.pt"));
}

TEST_F(RepositoryServiceTest, RestartServesFromTheDiskCacheWithoutImporting) {
  REQUIRE_FIXTURE("resnet18.pt");
  options_.cache_dir = root_ + "/cache";
  Start();
  ASSERT_TRUE(client_->UploadFile("resnet18", Fixture("resnet18.pt")).ok());
  ASSERT_TRUE(client_->UploadFile("two_input", Fixture("two_input.pt")).ok());
  const Tensor before = Run("resnet18", "resnet18");
  auto first = CacheStats("resnet18");
  EXPECT_EQ(first.graph_source, "import-in-process");
  EXPECT_GT(first.import_ms, 0);
  EXPECT_EQ(first.plan_misses, 1u);

  Start();  // a new server on the same repository and cache directory
  auto loaded = CacheStats("resnet18");
  EXPECT_EQ(loaded.graph_source, "disk-cache");
  EXPECT_EQ(loaded.import_ms, 0);
  const Tensor after = Run("resnet18", "resnet18");
  EXPECT_TRUE(BitwiseEqual(before, after));
  auto served = CacheStats("resnet18");
  EXPECT_EQ(served.plan_disk_hits, 1u);
  EXPECT_EQ(served.plan_misses, 0u);
  Run("resnet18", "resnet18");
  EXPECT_EQ(CacheStats("resnet18").plan_memory_hits, 1u);
  EXPECT_EQ(CacheStats("two_input").graph_source, "disk-cache");

  // Triton's statistics carry the same counts.
  auto stats = client_->Statistics("resnet18");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].cache_miss.count, 1u);
  EXPECT_EQ((*stats)[0].cache_hit.count, 1u);
  EXPECT_GT((*stats)[0].memory_bytes, 40u << 20);  // resnet18's weights and a plan
  auto totals = client_->GetCacheStatistics();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->totals.disk_graph_hits, 2u);
  EXPECT_EQ(totals->totals.disk_dir, options_.cache_dir);
}

TEST_F(RepositoryServiceTest, ConcurrentFirstRequestsCompileOnce) {
  REQUIRE_FIXTURE("mobilenet_v2.pt");
  Start();
  ASSERT_TRUE(client_->UploadFile("m", Fixture("mobilenet_v2.pt")).ok());
  // A signature no one has asked for yet (a load may already have compiled
  // the fixture's batch of 1).
  const std::vector<NamedTensor> batch2 = {{"x", Tensor::Zeros(DType::kF32, {2, 3, 96, 96})}};
  const auto before = CacheStats("m");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      if (!client_->Infer("m", batch2).ok()) failures++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto stats = CacheStats("m");
  EXPECT_EQ(stats.plan_misses - before.plan_misses, 1u);
  EXPECT_EQ(stats.plan_memory_hits - before.plan_memory_hits, 5u);
}

// ------------------------------------------------------- isolated imports

class IsolatedImportTest : public RepositoryServiceTest {
 protected:
  void SetUp() override {
    RepositoryServiceTest::SetUp();
    if (!fs::exists(TorchWorker())) GTEST_SKIP() << TorchWorker() << " missing";
    options_.torch_worker = TorchWorker();
  }
};

TEST_F(IsolatedImportTest, ImportsInAChildProcess) {
  REQUIRE_FIXTURE("mlp.pt");
  options_.cache_dir = root_ + "/cache";
  Start();
  ASSERT_TRUE(client_->UploadFile("mlp", Fixture("mlp.pt")).ok());
  EXPECT_EQ(CacheStats("mlp").graph_source, "import");
  ExpectClose(Run("mlp", "mlp"), Npy("mlp.output0.npy"));
  // The child's answer became the cache entry, and nothing else is left.
  std::vector<std::string> graphs;
  for (const auto& e : fs::directory_iterator(options_.cache_dir + "/graphs")) {
    graphs.push_back(e.path().extension());
  }
  EXPECT_THAT(graphs, ::testing::ElementsAre(".graph"));
  // The importer's own errors come back from the child unchanged.
  auto corrupt = client_->UploadFile("corrupt", Fixture("corrupt.pt"));
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(corrupt.status().message(), HasSubstr("corrupt"));  // the model's name
  EXPECT_THAT(corrupt.status().message(), ::testing::Not(HasSubstr("crashed")));
  EXPECT_FALSE(fs::exists(options_.model_repository + "/corrupt"));
  EXPECT_EQ(std::distance(fs::directory_iterator(options_.cache_dir + "/graphs"),
                          fs::directory_iterator()),
            1);
  EXPECT_TRUE(NoStagedFiles(options_.model_repository + "/.kiln-uploads"));
}

TEST_F(IsolatedImportTest, FileThatCrashesLibtorchGetsAClearErrorAndTheServerKeepsServing) {
  REQUIRE_FIXTURE("crash_import.pt");
  Start();
  ASSERT_TRUE(client_->UploadFile("mlp", Fixture("mlp.pt")).ok());
  auto crash = client_->UploadFile("crash", Fixture("crash_import.pt"));
  EXPECT_EQ(crash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(crash.status().message(), HasSubstr("crashed with signal 11"));
  EXPECT_THAT(crash.status().message(), HasSubstr("crash"));  // names the model
  EXPECT_EQ(client_->Live().value_or(false), true);
  ExpectClose(Run("mlp", "mlp"), Npy("mlp.output0.npy"));
  EXPECT_FALSE(fs::exists(options_.model_repository + "/crash"));
  // Over a serving model, it leaves that model serving.
  auto over = client_->UploadFile("mlp", Fixture("crash_import.pt"));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectClose(Run("mlp", "mlp"), Npy("mlp.output0.npy"));
  EXPECT_FALSE(fs::exists(options_.model_repository + "/mlp/2"));
}

TEST_F(IsolatedImportTest, HangingImportIsKilledAtTheTimeLimit) {
  REQUIRE_FIXTURE("mlp.pt");
  options_.load_timeout_s = 2;
  Start();
  ScopedEnv fault("KILN_TEST_IMPORT_FAULT", "hang");
  const auto start = std::chrono::steady_clock::now();
  auto hang = client_->UploadFile("mlp", Fixture("mlp.pt"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(hang.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(hang.status().message(), HasSubstr("import: did not finish within the 2 s"));
  EXPECT_EQ(client_->Live().value_or(false), true);
}

TEST_F(IsolatedImportTest, ImportOverTheMemoryLimitIsStopped) {
  REQUIRE_FIXTURE("mlp.pt");
  options_.import_memory_bytes = 256 << 20;
  Start();
  ScopedEnv fault("KILN_TEST_IMPORT_FAULT", "oom");
  auto oom = client_->UploadFile("mlp", Fixture("mlp.pt"));
  EXPECT_EQ(oom.status().code(), absl::StatusCode::kResourceExhausted) << oom.status();
  EXPECT_THAT(oom.status().message(), HasSubstr("256 MiB"));
  EXPECT_EQ(client_->Live().value_or(false), true);
}

TEST_F(IsolatedImportTest, RestartNeverRunsTheImporter) {
  REQUIRE_FIXTURE("mlp.pt");
  options_.cache_dir = root_ + "/cache";
  Start();
  ASSERT_TRUE(client_->UploadFile("mlp", Fixture("mlp.pt")).ok());
  ASSERT_TRUE(client_->UploadFile("two_input", Fixture("two_input.pt")).ok());
  // Every import would now crash: the restart must not need one.
  ScopedEnv fault("KILN_TEST_IMPORT_FAULT", "crash");
  Start();
  ExpectClose(Run("mlp", "mlp"), Npy("mlp.output0.npy"));
  EXPECT_EQ(CacheStats("two_input").graph_source, "disk-cache");
  auto fresh = client_->UploadFile("other", Fixture("mlp_scripted.pt"));
  EXPECT_THAT(fresh.status().message(), HasSubstr("crashed"));
}

}  // namespace
}  // namespace kiln
