// kilnd's local transport (server/local/local_server.h, proto/local/local_wire.h):
// the server in-process with --local-socket, driven through the client
// library's local channel and, for the protocol's corner cases, a raw socket.
// Every answer is checked against the same request over gRPC.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/inference_client.h"
#include "client/npy.h"
#include "client/shared_memory.h"
#include "inference/grpc_service.pb.h"
#include "proto/local/local_wire.h"
#include "server/app/server.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using client::InferenceClient;
using client::NamedTensor;
using local_wire::FrameKind;
using ::testing::HasSubstr;

std::string Fixture(const std::string& file) {
  const char* dir = std::getenv("KILN_FIXTURES");
  return std::string(dir != nullptr && *dir != '\0' ? dir : KILN_FIXTURES_DIR) + "/" + file;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectSameTensor(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.dims(), want.dims());
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.byte_size()), 0);
}

// A raw connection to the socket, for what the client library never sends.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // The status of the next frame, which must be a kStatus frame.
  absl::Status NextStatus() {
    local_wire::Frame frame;
    absl::Status read = local_wire::ReadFrame(fd_, 1 << 20, &frame);
    if (!read.ok()) return absl::InternalError(absl::StrCat("no frame: ", read.ToString()));
    if (frame.kind != FrameKind::kStatus) return absl::InternalError("not a status frame");
    absl::Status status;
    std::string id;
    absl::Status decoded = local_wire::DecodeStatus(frame.Body(), &status, &id);
    return decoded.ok() ? status : decoded;
  }
  // Whether the server closed the connection (the next read sees its end).
  bool Closed() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

class LocalSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(Fixture("mlp.pt"))) GTEST_SKIP() << "fixture mlp.pt missing";
    std::string tmpl = (fs::temp_directory_path() / "kiln-local-test-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    socket_ = root_ + "/kilnd.sock";
  }

  void TearDown() override {
    grpc_.reset();
    server_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Starts the server with the local socket (and `tokens`, when given, as
  // --auth-tokens) and uploads mlp.pt as "mlp" over gRPC.
  void StartServer(const std::string& tokens = "") {
    server::ServerOptions options;
    options.port = 0;
    options.model_repository = root_ + "/models";
    options.threads = 2;
    options.local_socket = socket_;
    client::ClientOptions grpc_options;
    if (!tokens.empty()) {
      std::ofstream(root_ + "/tokens") << tokens;
      options.auth_tokens_file = root_ + "/tokens";
      grpc_options.token = "admin-token-0123456789";
    }
    auto server = server::Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto grpc = InferenceClient::Connect(server_->address(), grpc_options);
    ASSERT_TRUE(grpc.ok());
    grpc_ = *std::move(grpc);
    ASSERT_TRUE(grpc_->Upload("mlp", Slurp(Fixture("mlp.pt"))).ok());
    auto x = client::ReadNpy(Fixture("mlp.input.x.npy"));
    ASSERT_TRUE(x.ok());
    x_ = *std::move(x);
  }

  std::unique_ptr<InferenceClient> LocalClient(const std::string& token = "") {
    client::ClientOptions options;
    options.local_socket = socket_;
    options.token = token;
    options.timeout = std::chrono::seconds(60);
    auto client = InferenceClient::Connect(server_->address(), options);
    EXPECT_TRUE(client.ok());
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::string root_, socket_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<InferenceClient> grpc_;
  Tensor x_;
};

TEST_F(LocalSocketTest, InferAnswersWhatGrpcAnswers) {
  StartServer();
  struct stat st {};
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only kilnd's user may connect";
  auto over_grpc = grpc_->Infer("mlp", {{"x", x_}});
  ASSERT_TRUE(over_grpc.ok()) << over_grpc.status();
  auto local = LocalClient();
  for (int i = 0; i < 3; ++i) {  // one connection, several requests
    auto over_socket = local->Infer("mlp", {{"x", x_}});
    ASSERT_TRUE(over_socket.ok()) << over_socket.status();
    ASSERT_EQ(over_socket->size(), 1u);
    EXPECT_EQ((*over_socket)[0].name, (*over_grpc)[0].name);
    ExpectSameTensor((*over_socket)[0].tensor, (*over_grpc)[0].tensor);
  }
  auto want = client::ReadNpy(Fixture("mlp.output0.npy"));
  ASSERT_TRUE(want.ok());
  auto out = local->Infer("mlp", {{"x", x_}});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ((*out)[0].tensor.dims(), want->dims());
  // Statistics count requests over the socket like any other.
  auto stats = grpc_->Statistics("mlp");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].inference_count, 5u);
}

// The client writes each input from the tensor's own memory after the
// message (RawEntryHead, WriteFrame's pieces): a 3 MB image, far past what
// one write of the socket takes, and a 32-byte bias beside it.
TEST_F(LocalSocketTest, InputsSentFromTheirOwnMemoryAnswerAsOverGrpc) {
  StartServer();
  ASSERT_TRUE(grpc_->Upload("two_input", Slurp(Fixture("two_input.pt"))).ok());
  Tensor image = Tensor::Zeros(DType::kF32, {4, 3, 256, 256});
  Tensor bias = Tensor::Zeros(DType::kF32, {1, 8, 1, 1});
  uint32_t state = 12345;
  for (Tensor* t : {&image, &bias}) {
    float* data = static_cast<float*>(t->raw_data());
    for (int64_t i = 0; i < NumElements(t->dims()); ++i) {
      state = state * 1664525u + 1013904223u;
      data[i] = static_cast<float>(state >> 8) / static_cast<float>(1 << 24) - 0.5f;
    }
  }
  const std::vector<NamedTensor> inputs = {{"image", image}, {"bias", bias}};
  auto over_grpc = grpc_->Infer("two_input", inputs);
  ASSERT_TRUE(over_grpc.ok()) << over_grpc.status();
  auto local = LocalClient();
  for (int i = 0; i < 2; ++i) {
    auto over_socket = local->Infer("two_input", inputs);
    ASSERT_TRUE(over_socket.ok()) << over_socket.status();
    ASSERT_EQ(over_socket->size(), over_grpc->size());
    ExpectSameTensor((*over_socket)[0].tensor, (*over_grpc)[0].tensor);
  }
  // An input the model refuses is judged as over gRPC, and the connection stays.
  Tensor wrong = Tensor::Zeros(DType::kF32, {4, 5, 256, 256});
  auto refused = local->Infer("two_input", {{"image", wrong}, {"bias", bias}});
  auto refused_grpc = grpc_->Infer("two_input", {{"image", wrong}, {"bias", bias}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status(), refused_grpc.status());
  EXPECT_TRUE(local->Infer("two_input", inputs).ok());
}

// A frame written from many pieces (more than one sendmsg takes, empty ones
// among them) arrives as their concatenation, read into 1 MiB chunks.
TEST(LocalWireTest, AFrameFromPiecesIsTheirConcatenation) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::vector<std::string> storage;
  std::string want;
  for (int i = 0; i < 3000; ++i) {
    storage.push_back(std::string(static_cast<size_t>(i % 7 == 0 ? 0 : (i * 131) % 997),
                                  static_cast<char>('a' + i % 26)));
    want += storage.back();
  }
  std::vector<absl::string_view> pieces(storage.begin(), storage.end());
  local_wire::Frame frame;
  absl::Status read;
  std::thread reader([&] { read = local_wire::ReadFrame(fds[1], UINT32_MAX, &frame); });
  EXPECT_TRUE(local_wire::WriteFrame(fds[0], FrameKind::kInferRequest, pieces).ok());
  reader.join();
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(frame.kind, FrameKind::kInferRequest);
  EXPECT_EQ(frame.size(), want.size());
  EXPECT_TRUE(frame.Body() == want);
  // Read into 1 MiB chunks, the last one shorter.
  ASSERT_EQ(frame.chunks.size(), (want.size() + (1 << 20) - 1) >> 20);
  for (size_t i = 0; i + 1 < frame.chunks.size(); ++i) EXPECT_EQ(frame.chunks[i].size(), 1u << 20);
  ::close(fds[0]);
  ::close(fds[1]);
}

// An answer larger than one chunk of a frame (local_wire::Frame) reaches the
// client whole: a stand-in for kilnd on the socket answers with a 5 MB output.
TEST(LocalChannelTest, AnAnswerReadInChunksParsesWhole) {
  std::string tmpl = (fs::temp_directory_path() / "kiln-local-test-XXXXXX").string();
  const std::string root = ::mkdtemp(tmpl.data());
  const std::string path = root + "/s";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  Tensor want = Tensor::Zeros(DType::kF32, {5, 1 << 18});
  float* data = static_cast<float*>(want.raw_data());
  for (int64_t i = 0; i < want.num_elements(); ++i) data[i] = static_cast<float>(i % 10007) * 0.5f;
  std::thread server([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    local_wire::Frame request;
    ASSERT_TRUE(local_wire::ReadFrame(fd, UINT32_MAX, &request).ok());
    inference::ModelInferResponse response;
    response.set_model_name("big");
    auto* output = response.add_outputs();
    output->set_name("y");
    output->set_datatype("FP32");
    for (int64_t d : want.dims()) output->add_shape(d);
    response.add_raw_output_contents()->assign(static_cast<const char*>(want.raw_data()),
                                               want.byte_size());
    ASSERT_TRUE(local_wire::WriteFrame(fd, FrameKind::kInferResponse, response.SerializeAsString())
                    .ok());
    ::close(fd);
  });
  client::ClientOptions options;
  options.local_socket = path;
  auto client = InferenceClient::Connect("localhost:1", options);
  ASSERT_TRUE(client.ok());
  auto out = (*client)->Infer("big", {{"x", Tensor::Zeros(DType::kF32, {1})}});
  server.join();
  ::close(listener);
  std::error_code ec;
  fs::remove_all(root, ec);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "y");
  ExpectSameTensor((*out)[0].tensor, want);
}

TEST_F(LocalSocketTest, SharedMemoryInputs) {
  StartServer();
  const std::string key = "/kiln-local-test-" + std::to_string(::getpid());
  auto buffer = client::SharedMemoryBuffer::Create(key, x_.byte_size());
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memcpy((*buffer)->data(), x_.raw_data(), x_.byte_size());
  ASSERT_TRUE(grpc_->RegisterSystemSharedMemory("in", key, 0, x_.byte_size()).ok());
  auto local = LocalClient();
  auto from_shm = local->InferFromSharedMemory("mlp", {{"x", x_.dtype(), x_.dims(), "in", 0}});
  ASSERT_TRUE(from_shm.ok()) << from_shm.status();
  auto over_grpc = grpc_->Infer("mlp", {{"x", x_}});
  ASSERT_TRUE(over_grpc.ok());
  ExpectSameTensor((*from_shm)[0].tensor, (*over_grpc)[0].tensor);
  // A range outside the region is the same INVALID_ARGUMENT as over gRPC.
  auto outside = local->InferFromSharedMemory("mlp", {{"x", x_.dtype(), x_.dims(), "in", 64}});
  EXPECT_TRUE(absl::IsInvalidArgument(outside.status())) << outside.status();
  ASSERT_TRUE(grpc_->UnregisterSystemSharedMemory("in").ok());
}

TEST_F(LocalSocketTest, ErrorsAreStatusesAndTheConnectionStays) {
  StartServer();
  auto local = LocalClient();
  auto unknown = local->Infer("nope", {{"x", x_}});
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("nope"));
  Tensor wrong = Tensor::Zeros(DType::kF32, {1, 3});
  auto bad_shape = local->Infer("mlp", {{"x", wrong}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad_shape.status())) << bad_shape.status();
  auto fine = local->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(fine.ok()) << fine.status();
}

TEST_F(LocalSocketTest, MalformedFramesGetAStatusAndNeverHurtTheServer) {
  StartServer();
  {  // A body that is not a ModelInferRequest: refused, the connection stays.
    RawConnection raw(socket_);
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(local_wire::WriteFrame(raw.fd(), FrameKind::kInferRequest, "\xff\xff\xff").ok());
    absl::Status status = raw.NextStatus();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    inference::ModelInferRequest request;
    request.set_model_name("nope");
    request.set_id("req-7");
    ASSERT_TRUE(local_wire::WriteFrame(raw.fd(), FrameKind::kInferRequest,
                                       request.SerializeAsString()).ok());
    local_wire::Frame frame;
    ASSERT_TRUE(local_wire::ReadFrame(raw.fd(), 1 << 20, &frame).ok());
    absl::Status carried;
    std::string id;
    ASSERT_TRUE(local_wire::DecodeStatus(frame.Body(), &carried, &id).ok());
    EXPECT_TRUE(absl::IsNotFound(carried)) << carried;
    EXPECT_EQ(id, "req-7") << "an error names the request it answers";
  }
  {  // An unknown kind: a status, then the connection is closed.
    RawConnection raw(socket_);
    const char frame[] = {0, 0, 0, 0, 9};
    ASSERT_EQ(::write(raw.fd(), frame, sizeof(frame)), static_cast<ssize_t>(sizeof(frame)));
    absl::Status status = raw.NextStatus();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("unknown frame kind"));
    EXPECT_TRUE(raw.Closed());
  }
  {  // A size past the limit: refused before anything is read or allocated.
    RawConnection raw(socket_);
    const unsigned char frame[] = {0xff, 0xff, 0xff, 0xff, 2};
    ASSERT_EQ(::write(raw.fd(), frame, sizeof(frame)), static_cast<ssize_t>(sizeof(frame)));
    absl::Status status = raw.NextStatus();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("past the limit"));
    EXPECT_TRUE(raw.Closed());
  }
  {  // A frame kilnd only sends, and a stream cut inside a frame.
    RawConnection raw(socket_);
    ASSERT_TRUE(local_wire::WriteFrame(raw.fd(), FrameKind::kInferResponse, "").ok());
    EXPECT_TRUE(absl::IsInvalidArgument(raw.NextStatus()));
    RawConnection cut(socket_);
    const char half[] = {100, 0, 0, 0, 2, 1, 2};
    ASSERT_EQ(::write(cut.fd(), half, sizeof(half)), static_cast<ssize_t>(sizeof(half)));
    // A frame that announces 512 MiB (under the limit) and sends a few bytes:
    // kilnd holds memory only for what arrived.
    RawConnection big(socket_);
    const unsigned char announce[] = {0, 0, 0, 0x20, 2, 1, 2, 3};
    ASSERT_EQ(::write(big.fd(), announce, sizeof(announce)),
              static_cast<ssize_t>(sizeof(announce)));
  }
  auto local = LocalClient();
  auto fine = local->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(fine.ok()) << fine.status();
}

TEST_F(LocalSocketTest, AClientThatNeverReadsIsCutOffAndHoldsNoThread) {
  StartServer();
  RawConnection flood(socket_);
  ASSERT_TRUE(flood.connected());
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  for (int64_t d : x_.dims()) input->add_shape(d);
  request.add_raw_input_contents()->assign(static_cast<const char*>(x_.raw_data()),
                                           x_.byte_size());
  const std::string frame = request.SerializeAsString();
  // Requests, never an answer read: the answers fill the socket's buffer and
  // the thread writing them waits; it gives up after 10 s and ends the connection.
  std::thread writer([&] {
    for (int i = 0; i < 20000; ++i) {
      if (!local_wire::WriteFrame(flood.fd(), FrameKind::kInferRequest, frame).ok()) break;
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  auto out = LocalClient()->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(40));
  ::shutdown(flood.fd(), SHUT_RDWR);
  writer.join();
}

TEST_F(LocalSocketTest, ConcurrentClients) {
  StartServer();
  auto want = grpc_->Infer("mlp", {{"x", x_}});
  ASSERT_TRUE(want.ok());
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto local = LocalClient();
      for (int i = 0; i < 10; ++i) {
        auto out = local->Infer("mlp", {{"x", x_}});
        if (out.ok() && std::memcmp((*out)[0].tensor.raw_data(), (*want)[0].tensor.raw_data(),
                                    (*want)[0].tensor.byte_size()) == 0) {
          ++good;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), 40);
}

TEST_F(LocalSocketTest, TokensAreCheckedAsOverGrpc) {
  StartServer("admin admin-token-0123456789\ninfer infer-token-0123456789\n");
  auto anonymous = LocalClient()->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(absl::IsUnauthenticated(anonymous.status())) << anonymous.status();
  auto wrong = LocalClient("not-a-token-0123456789")->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(absl::IsUnauthenticated(wrong.status())) << wrong.status();
  EXPECT_THAT(std::string(wrong.status().message()), ::testing::Not(HasSubstr("not-a-token-0123456789")));
  auto infer = LocalClient("infer-token-0123456789")->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(infer.ok()) << infer.status();
}

TEST_F(LocalSocketTest, StalePathsAndShutdown) {
  // A socket file a killed kilnd left is replaced.
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ::close(fd);
  }
  StartServer();
  auto fine = LocalClient()->Infer("mlp", {{"x", x_}});
  EXPECT_TRUE(fine.ok()) << fine.status();
  // A second server may not take a path the first one serves.
  server::ServerOptions second;
  second.port = 0;
  second.model_repository = root_ + "/models2";
  second.local_socket = socket_;
  auto taken = server::Server::Start(second);
  EXPECT_TRUE(absl::IsFailedPrecondition(taken.status())) << taken.status();
  // Shutdown removes the file.
  server_->Shutdown(std::chrono::milliseconds(100));
  EXPECT_FALSE(fs::exists(socket_));
  // A path that is not a socket is never removed.
  std::ofstream(socket_) << "data";
  auto not_socket = server::Server::Start(second);
  EXPECT_TRUE(absl::IsFailedPrecondition(not_socket.status())) << not_socket.status();
  EXPECT_EQ(Slurp(socket_), "data");
}

}  // namespace
}  // namespace kiln
