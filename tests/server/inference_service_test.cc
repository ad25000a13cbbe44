// The server in-process on 127.0.0.1:0, driven through the client library (and,
// for protocol corner cases, the raw stub), with the TorchScript fixtures from
// $KILN_FIXTURES. Tests that need a fixture skip when it is missing.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/inference_client.h"
#include "client/npy.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/app/server.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using client::InferenceClient;
using client::NamedTensor;
using ::testing::HasSubstr;

std::string FixtureDir() {
  const char* dir = std::getenv("KILN_FIXTURES");
  return dir != nullptr && *dir != '\0' ? dir : KILN_FIXTURES_DIR;
}

std::string Fixture(const std::string& file) { return FixtureDir() + "/" + file; }

#define REQUIRE_FIXTURE(file)                                                         \
  if (!fs::exists(Fixture(file))) {                                                   \
    GTEST_SKIP() << "fixture " << Fixture(file) << " missing (set KILN_FIXTURES and " \
                 << "build the `fixtures` target)";                                   \
  }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every <model>.input.<arg>.npy fixture, named <arg>.
std::vector<NamedTensor> FixtureInputs(const std::string& model) {
  std::vector<NamedTensor> inputs;
  const std::string prefix = model + ".input.";
  for (const auto& entry : fs::directory_iterator(FixtureDir())) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0 || entry.path().extension() != ".npy") continue;
    const std::string arg = file.substr(prefix.size(), file.size() - prefix.size() - 4);
    auto tensor = client::ReadNpy(entry.path().string());
    EXPECT_TRUE(tensor.ok()) << tensor.status();
    if (tensor.ok()) inputs.push_back({arg, *std::move(tensor)});
  }
  return inputs;
}

// Max error relative to the largest expected magnitude. (A per-element
// relative error is meaningless for outputs near zero: float32 convolutions
// summed in a different order than libtorch's differ by ~1e-6 absolute.)
void ExpectClose(const Tensor& got, const Tensor& want, double rtol = 1e-4) {
  ASSERT_EQ(got.dtype(), DType::kF32);
  ASSERT_EQ(want.dtype(), DType::kF32);
  ASSERT_EQ(got.dims(), want.dims());
  double max_abs = 0;
  double max_err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.data<float>()[i];
    max_abs = std::max(max_abs, std::abs(w));
    max_err = std::max(max_err, std::abs(got.data<float>()[i] - w));
  }
  EXPECT_LE(max_err, rtol * std::max(max_abs, 1e-6))
      << "max abs error " << max_err << ", max |expected| " << max_abs;
}

class InferenceServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-server-test-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    repo_ = root_ + "/models";
    StartServer();
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void StartServer(uint64_t max_upload_bytes = 512ull << 20) {
    client_.reset();
    server_.reset();
    server::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.model_repository = repo_;
    options.threads = 2;
    options.max_upload_bytes = max_upload_bytes;
    auto server = server::Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    client::ClientOptions client_options;
    client_options.timeout = std::chrono::seconds(300);
    auto client = InferenceClient::Connect(server_->address(), client_options);
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
  }

  absl::Status UploadFixture(const std::string& name, const std::string& file,
                             std::optional<std::string> config = std::nullopt) {
    return client_->Upload(name, Slurp(Fixture(file)), std::move(config));
  }

  // Uploads <model>.pt as `name`, runs it on the fixture inputs and compares
  // output 0 with libtorch's.
  void UploadAndCompare(const std::string& model) {
    ASSERT_TRUE(UploadFixture(model, model + ".pt").ok());
    ExpectInferMatches(model, model);
  }

  void ExpectInferMatches(const std::string& name, const std::string& model) {
    auto outputs = client_->Infer(name, FixtureInputs(model));
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_FALSE(outputs->empty());
    auto want = client::ReadNpy(Fixture(model + ".output0.npy"));
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectClose((*outputs)[0].tensor, *want);
  }

  std::string root_;
  std::string repo_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<InferenceClient> client_;
};

// ---------------------------------------------------------------- no fixtures

TEST_F(InferenceServiceTest, HealthAndServerMetadata) {
  EXPECT_EQ(client_->Live().value_or(false), true);
  EXPECT_EQ(client_->Ready().value_or(false), true);
  auto metadata = client_->GetServerMetadata();
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->name, "kiln");
  EXPECT_FALSE(metadata->version.empty());
  EXPECT_THAT(metadata->extensions,
              ::testing::UnorderedElementsAre("model_repository", "statistics",
                                              "binary_tensor_data", "system_shared_memory"));
  auto index = client_->Index();
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE(index->empty());
}

TEST_F(InferenceServiceTest, UnknownModelIsNotFound) {
  Tensor x = Tensor::Zeros(DType::kF32, {1});
  auto infer = client_->Infer("no_such_model", {{"x", x}});
  EXPECT_EQ(infer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(infer.status().message(), HasSubstr("no_such_model"));
  EXPECT_EQ(client_->Metadata("no_such_model").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Unload("no_such_model").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Statistics("no_such_model").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ModelReady("no_such_model").value_or(true), false);
  EXPECT_EQ(client_->Load("no_such_model").code(), absl::StatusCode::kNotFound);
}

// The client sends an input's bytes to gRPC from the tensor's own memory and
// returns only once gRPC has let go of them: also when the call fails while
// they are being sent (a deadline that passes mid-way) and when nobody listens.
TEST_F(InferenceServiceTest, InputsSentFromTheirOwnMemoryAreLetGoOnEveryOutcome) {
  client::ClientOptions hurried;
  hurried.timeout = std::chrono::milliseconds(1);
  auto client = InferenceClient::Connect(server_->address(), hurried);
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 3; ++i) {
    Tensor big = Tensor::Zeros(DType::kF32, {int64_t{16} << 20});  // 64 MB
    auto infer = (*client)->Infer("no_such_model", {{"x", big}});
    EXPECT_EQ(infer.status().code(), absl::StatusCode::kDeadlineExceeded) << infer.status();
  }
  Tensor x = Tensor::Zeros(DType::kF32, {4});
  Tensor empty = Tensor::Zeros(DType::kF32, {0});
  auto two = client_->Infer("no_such_model", {{"x", x}, {"y", empty}});
  EXPECT_EQ(two.status().code(), absl::StatusCode::kNotFound) << two.status();
  const std::string address = server_->address();
  client_.reset();
  server_.reset();
  auto nobody = InferenceClient::Connect(address, {});
  ASSERT_TRUE(nobody.ok());
  auto unavailable = (*nobody)->Infer("mlp", {{"x", x}});
  EXPECT_EQ(unavailable.status().code(), absl::StatusCode::kUnavailable) << unavailable.status();
}

// ModelInfer reads the request's bytes itself (server/core/infer_request_reader.h):
// bytes that are no ModelInferRequest get INVALID_ARGUMENT, and the server
// goes on serving.
TEST_F(InferenceServiceTest, ModelInferBytesThatAreNoRequestAreInvalidArgument) {
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  for (const std::string& garbage : {std::string("\x0c", 1), std::string("\x3a\x7f\x01", 3),
                                     std::string("\x0a\x02\xff\xfe", 4)}) {
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    grpc::CompletionQueue cq;
    auto call = stub.PrepareUnaryCall(&context, "/inference.GRPCInferenceService/ModelInfer",
                                      request, &cq);
    call->StartCall();
    grpc::Status status;
    call->Finish(&response, &status, &status);
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("not a serialized inference.ModelInferRequest"));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  Tensor x = Tensor::Zeros(DType::kF32, {1});
  EXPECT_EQ(client_->Infer("no_such_model", {{"x", x}}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(InferenceServiceTest, BadNamesAndGarbageUploadsAreRejected) {
  EXPECT_EQ(client_->Upload("../evil", "bytes").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Upload("", "bytes").code(), absl::StatusCode::kInvalidArgument);
  absl::Status garbage = client_->Upload("garbage", "this is not a zip archive");
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.message(), HasSubstr("garbage"));
  // A rejected upload of a new name leaves nothing behind.
  EXPECT_FALSE(fs::exists(repo_ + "/garbage"));
  EXPECT_TRUE(client_->Index().value().empty());
  EXPECT_EQ(client_->Live().value_or(false), true);
}

TEST_F(InferenceServiceTest, UploadAboveLimitIsResourceExhausted) {
  StartServer(/*max_upload_bytes=*/1024);
  absl::Status status = client_->Upload("big", std::string(4096, 'x'));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("4096"));
}

TEST_F(InferenceServiceTest, UnknownLoadParametersAreRejected) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name("m");
  (*request.mutable_parameters())["file:2/model.onnx"].set_bytes_param("x");
  inference::RepositoryModelLoadResponse response;
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::Status status = stub->RepositoryModelLoad(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("file:1/model.pt"));
}

// ---------------------------------------------------------------- fixtures

TEST_F(InferenceServiceTest, MlpMatchesLibtorchAndReportsMetadata) {
  REQUIRE_FIXTURE("mlp.pt");
  UploadAndCompare("mlp");
  EXPECT_TRUE(fs::exists(repo_ + "/mlp/1/model.pt"));
  EXPECT_EQ(client_->ModelReady("mlp").value_or(false), true);

  auto metadata = client_->Metadata("mlp");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->platform, "pytorch_torchscript");
  EXPECT_THAT(metadata->versions, ::testing::ElementsAre("1"));
  ASSERT_EQ(metadata->inputs.size(), 1u);
  EXPECT_EQ(metadata->inputs[0].name, "x");
  EXPECT_EQ(metadata->inputs[0].datatype, "FP32");
  ASSERT_EQ(metadata->outputs.size(), 1u);
  EXPECT_EQ(metadata->outputs[0].name, "output0");

  auto index = client_->Index();
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->size(), 1u);
  EXPECT_EQ((*index)[0].name, "mlp");
  EXPECT_EQ((*index)[0].state, "READY");
}

TEST_F(InferenceServiceTest, MetadataSaysWhatIsFixedAndTheLoadAnswersWithTheContract) {
  REQUIRE_FIXTURE("two_input.pt");
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  inference::RepositoryModelLoadRequest request;
  request.set_model_name("two_input");
  (*request.mutable_parameters())["file:1/model.pt"].set_bytes_param(
      Slurp(Fixture("two_input.pt")));
  (*request.mutable_parameters())["config"].set_string_param(R"({"dry_run": true})");
  inference::RepositoryModelLoadResponse response;
  {
    grpc::ClientContext context;
    grpc::Status status = stub->RepositoryModelLoad(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto trailer = context.GetServerTrailingMetadata().find("kiln-contract");
    ASSERT_NE(trailer, context.GetServerTrailingMetadata().end());
    const std::string contract(trailer->second.data(), trailer->second.size());
    EXPECT_THAT(contract, HasSubstr(R"("dry_run":true)"));
    EXPECT_THAT(contract, HasSubstr(R"("name":"image")"));
    EXPECT_THAT(contract, HasSubstr(R"("fallback_ops":[])"));
  }
  // A dry run stores and serves nothing.
  EXPECT_FALSE(fs::exists(repo_ + "/two_input"));
  EXPECT_EQ(client_->ModelReady("two_input").value_or(true), false);

  (*request.mutable_parameters())["config"].set_string_param("{}");
  grpc::ClientContext context;
  ASSERT_TRUE(stub->RepositoryModelLoad(&context, request, &response).ok());
  EXPECT_NE(context.GetServerTrailingMetadata().find("kiln-contract"),
            context.GetServerTrailingMetadata().end());
  auto metadata = client_->Metadata("two_input");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  // The conv fixes the image's dtype and channels; the bias is only added: open.
  EXPECT_EQ(metadata->inputs[0].datatype, "FP32");
  EXPECT_EQ(metadata->properties["input.image.datatype"], "fixed (implied)");
  EXPECT_EQ(metadata->properties["input.image.shape"], "dynamic dims 0, 2, 3");
  EXPECT_EQ(metadata->inputs[1].datatype, "ANY");
  EXPECT_EQ(metadata->properties["input.bias.datatype"], "open");
  EXPECT_EQ(metadata->properties["input.bias.shape"], "any rank");
  EXPECT_EQ(metadata->properties["input.bias.alias"], "INPUT__1");
  EXPECT_EQ(metadata->properties["output.output0.path"], "result[0]");
}

TEST_F(InferenceServiceTest, TwoInputModelTakesForwardParameterNames) {
  REQUIRE_FIXTURE("two_input.pt");
  UploadAndCompare("two_input");
  auto metadata = client_->Metadata("two_input");
  ASSERT_TRUE(metadata.ok());
  ASSERT_EQ(metadata->inputs.size(), 2u);
  EXPECT_EQ(metadata->inputs[0].name, "image");
  EXPECT_EQ(metadata->inputs[1].name, "bias");
}

TEST_F(InferenceServiceTest, ConfigRenamesInputsAndOutputs) {
  REQUIRE_FIXTURE("mlp.pt");
  ASSERT_TRUE(UploadFixture("renamed", "mlp.pt",
                            R"({"inputs": [{"name": "features", "datatype": "FP32"}],
                                "outputs": [{"name": "probs"}]})")
                  .ok());
  EXPECT_TRUE(fs::exists(repo_ + "/renamed/config.json"));
  auto metadata = client_->Metadata("renamed");
  ASSERT_TRUE(metadata.ok());
  EXPECT_EQ(metadata->inputs[0].name, "features");
  EXPECT_EQ(metadata->outputs[0].name, "probs");
  std::vector<NamedTensor> inputs = FixtureInputs("mlp");
  inputs[0].name = "features";
  auto outputs = client_->Infer("renamed", inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ((*outputs)[0].name, "probs");

  absl::Status bad = UploadFixture("renamed2", "mlp.pt", R"({"inputs": [{"datatype": "FLOAT"}]})");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("FLOAT"));
}

TEST_F(InferenceServiceTest, ResnetAndMobilenetMatchLibtorch) {
  REQUIRE_FIXTURE("resnet18.pt");
  REQUIRE_FIXTURE("mobilenet_v2.pt");
  UploadAndCompare("resnet18");
  UploadAndCompare("mobilenet_v2");
}

TEST_F(InferenceServiceTest, BadInputsGetInvalidArgumentAndCountAsFailures) {
  REQUIRE_FIXTURE("mlp.pt");
  ASSERT_TRUE(UploadFixture("mlp", "mlp.pt").ok());
  std::vector<NamedTensor> good = FixtureInputs("mlp");
  ASSERT_EQ(good.size(), 1u);

  Tensor as_f64 = Tensor::Zeros(DType::kF64, good[0].tensor.dims());
  auto wrong_dtype = client_->Infer("mlp", {{"x", as_f64}});
  EXPECT_EQ(wrong_dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_dtype.status().message(), HasSubstr("'x'"));

  auto unknown = client_->Infer("mlp", {{"y", good[0].tensor}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'y'"));

  auto unknown_output = client_->Infer("mlp", good, {"nope"});
  EXPECT_EQ(unknown_output.status().code(), absl::StatusCode::kInvalidArgument);

  auto only_output0 = client_->Infer("mlp", good, {"output0"});
  ASSERT_TRUE(only_output0.ok()) << only_output0.status();
  EXPECT_EQ(only_output0->size(), 1u);

  auto stats = client_->Statistics("mlp");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].success.count, 1u);
  EXPECT_EQ((*stats)[0].inference_count, 1u);
  EXPECT_EQ((*stats)[0].fail.count, 3u);
  EXPECT_GT((*stats)[0].compute_infer.ns, 0u);
  EXPECT_GT((*stats)[0].last_inference_ms, 0u);
}

TEST_F(InferenceServiceTest, RawAndTypedContentsOverTheWire) {
  REQUIRE_FIXTURE("mlp.pt");
  ASSERT_TRUE(UploadFixture("mlp", "mlp.pt").ok());
  std::vector<NamedTensor> good = FixtureInputs("mlp");
  const Tensor& x = good[0].tensor;
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));

  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  request.set_id("req-42");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  for (int64_t d : x.dims()) input->add_shape(d);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    input->mutable_contents()->add_fp32_contents(x.data<float>()[i]);
  }
  {
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub->ModelInfer(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.id(), "req-42");
    EXPECT_EQ(response.model_version(), "1");
    ASSERT_EQ(response.raw_output_contents_size(), 1);
  }
  // Typed and raw contents together are refused.
  request.add_raw_input_contents(std::string(x.byte_size(), '\0'));
  {
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub->ModelInfer(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("contents must not be set"));
  }
  // A version other than "1" does not exist.
  request.clear_raw_input_contents();
  request.set_model_version("2");
  {
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    EXPECT_EQ(stub->ModelInfer(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
}

TEST_F(InferenceServiceTest, FailedUploadKeepsServingModelAndItsFile) {
  REQUIRE_FIXTURE("mlp.pt");
  REQUIRE_FIXTURE("corrupt.pt");
  ASSERT_TRUE(UploadFixture("mlp", "mlp.pt").ok());
  const std::string before = Slurp(repo_ + "/mlp/1/model.pt");

  absl::Status corrupt = UploadFixture("mlp", "corrupt.pt");
  EXPECT_EQ(corrupt.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(corrupt.message(), HasSubstr("mlp"));
  EXPECT_EQ(Slurp(repo_ + "/mlp/1/model.pt"), before);
  ExpectInferMatches("mlp", "mlp");

  absl::Status broken = UploadFixture("broken", "corrupt.pt");
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(repo_ + "/broken/1/model.pt"));
}

TEST_F(InferenceServiceTest, StrictConfigListsEveryUnsupportedOp) {
  REQUIRE_FIXTURE("unsupported.pt");
  absl::Status status = UploadFixture("unsupported", "unsupported.pt", R"({"strict": true})");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("unsupported ops: aten::i0, aten::logcumsumexp"));
  EXPECT_FALSE(fs::exists(repo_ + "/unsupported/1/model.pt"));
}

// Without "strict", ops Kiln does not translate run through libtorch: the
// model serves libtorch's numbers, and its metadata says which ops fell back
// and how the verified import compared.
TEST_F(InferenceServiceTest, UnsupportedOpsServeThroughTheFallback) {
  REQUIRE_FIXTURE("unsupported.pt");
  UploadAndCompare("unsupported");
  auto metadata = client_->Metadata("unsupported");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->properties["fallback_ops"], "aten::i0,aten::logcumsumexp");
  EXPECT_THAT(metadata->properties["verify"], HasSubstr("skipped"));  // scripted: no input shape
  EXPECT_THAT(metadata->properties["graph"], HasSubstr("Fallback(%x)"));
  // Given a sample shape, the load verifies against libtorch and publishes the difference.
  ASSERT_TRUE(UploadFixture("unsupported2", "unsupported.pt",
                            R"({"verify": {"inputs": [{"name": "x", "dims": [2, 8]}]}})")
                  .ok());
  auto verified = client_->Metadata("unsupported2");
  ASSERT_TRUE(verified.ok());
  EXPECT_THAT(verified->properties["verify"], HasSubstr("passed on x=FP32[2, 8]"));
  EXPECT_EQ(verified->properties["verify.max_abs_diff.output0"], "0");
}

TEST_F(InferenceServiceTest, VerifiedImportPublishesTheDifferencePerOutput) {
  REQUIRE_FIXTURE("mlp.pt");
  UploadAndCompare("mlp");
  auto metadata = client_->Metadata("mlp");
  ASSERT_TRUE(metadata.ok());
  EXPECT_THAT(metadata->properties["verify"], HasSubstr("passed on x=FP32[1, 16]"));
  EXPECT_TRUE(metadata->properties.count("verify.max_abs_diff.output0"));
  EXPECT_EQ(metadata->properties["fallback_ops"], "");
  absl::Status bad = UploadFixture("mlp2", "mlp.pt", R"({"verify": {"on_mismatch": "maybe"}})");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("verify.on_mismatch"));
}

TEST_F(InferenceServiceTest, UnloadReloadAndRestartFromRepository) {
  REQUIRE_FIXTURE("mlp.pt");
  REQUIRE_FIXTURE("two_input.pt");
  ASSERT_TRUE(UploadFixture("mlp", "mlp.pt").ok());
  ASSERT_TRUE(UploadFixture("two_input", "two_input.pt").ok());

  ASSERT_TRUE(client_->Unload("two_input").ok());
  EXPECT_EQ(client_->ModelReady("two_input").value_or(true), false);
  auto unloaded = client_->Infer("two_input", FixtureInputs("two_input"));
  EXPECT_EQ(unloaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(repo_ + "/two_input/1/model.pt"));
  auto index = client_->Index();
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->size(), 2u);
  EXPECT_EQ((*index)[1].state, "UNAVAILABLE");
  EXPECT_EQ(client_->Index(/*ready_only=*/true).value().size(), 1u);

  ASSERT_TRUE(client_->Load("two_input").ok());
  ExpectInferMatches("two_input", "two_input");

  // A corrupt file dropped into the repository fails at start-up without
  // stopping the others.
  fs::create_directories(repo_ + "/broken/1");
  fs::copy_file(Fixture("corrupt.pt"), repo_ + "/broken/1/model.pt");
  StartServer();
  ExpectInferMatches("mlp", "mlp");
  ExpectInferMatches("two_input", "two_input");
  auto after = client_->Index();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 3u);
  EXPECT_EQ((*after)[0].name, "broken");
  EXPECT_EQ((*after)[0].state, "UNAVAILABLE");
  EXPECT_FALSE((*after)[0].reason.empty());
  EXPECT_EQ(client_->Infer("broken", {}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(InferenceServiceTest, ConcurrentRequestsAndReplacementUnderLoad) {
  REQUIRE_FIXTURE("mlp.pt");
  ASSERT_TRUE(UploadFixture("mlp", "mlp.pt").ok());
  const std::vector<NamedTensor> inputs = FixtureInputs("mlp");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        auto outputs = client_->Infer("mlp", inputs);
        if (!outputs.ok()) failures++;
      }
    });
  }
  // Replacing the model while requests run must not fail any of them.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(UploadFixture("mlp", "mlp.pt").ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// ModelInfer runs without the logging interceptor unless debug lines are logged
// (grpc_server.cc) and counts itself in flight, which shutdown's "draining N in
// flight" reads: counted while it runs, not after it has answered.
TEST_F(InferenceServiceTest, ModelInferCountsItselfInFlight) {
  REQUIRE_FIXTURE("resnet18.pt");
  ASSERT_TRUE(UploadFixture("resnet18", "resnet18.pt").ok());
  const std::vector<NamedTensor> one = FixtureInputs("resnet18");
  ASSERT_EQ(one.size(), 1u);
  const Tensor& x = one[0].tensor;
  ASSERT_EQ(x.dim(0), 1);
  // A batch of 32: a few hundred milliseconds, long enough to be seen running.
  constexpr int64_t kRows = 32;
  Dims dims = x.dims();
  dims[0] = kRows;
  Tensor batch = Tensor::Zeros(x.dtype(), dims);
  for (int64_t r = 0; r < kRows; ++r) {
    std::memcpy(static_cast<char*>(batch.raw_data()) + r * x.byte_size(), x.raw_data(),
                x.byte_size());
  }
  EXPECT_EQ(server_->in_flight(), 0);
  absl::StatusOr<std::vector<NamedTensor>> outputs;
  std::atomic<bool> answered{false};
  std::thread call([&] {
    outputs = client_->Infer("resnet18", {{one[0].name, batch}});
    answered = true;
  });
  int most = 0;
  while (!answered.load()) {
    most = std::max(most, server_->in_flight());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  call.join();
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ((*outputs)[0].tensor.dim(0), kRows);
  EXPECT_EQ(most, 1);
  EXPECT_EQ(server_->in_flight(), 0);
}

}  // namespace
}  // namespace kiln
