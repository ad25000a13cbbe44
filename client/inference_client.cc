#include "client/inference_client.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/sha256.h"
#include "engine/common/status_macros.h"
#include "inference/grpc_service.grpc.pb.h"
#include "kiln/v1/repository_service.grpc.pb.h"
#include "proto/local/entry_head.h"
#include "proto/local/local_wire.h"

namespace kiln::client {
namespace {

// raw_input_contents: entries sent after the message (local_wire::EntryHead).
constexpr int kRawInputs = inference::ModelInferRequest::kRawInputContentsFieldNumber;

using inference::GRPCInferenceService;

// grpc::StatusCode and absl::StatusCode share the canonical numbering.
absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Copies one typed output (servers other than Kiln may answer this way).
template <typename T, typename Src>
Tensor FromTyped(DType dtype, Dims dims, const google::protobuf::RepeatedField<Src>& src) {
  Tensor t = Tensor::Zeros(dtype, std::move(dims));
  for (int i = 0; i < src.size(); ++i) t.data<T>()[i] = static_cast<T>(src.Get(i));
  return t;
}

// Output `i` of `response`; raw bytes are moved out of the response into the
// tensor, not copied.
absl::StatusOr<Tensor> DecodeOutput(inference::ModelInferResponse& response, int i) {
  const auto& output = response.outputs(i);
  const std::optional<DType> dtype = DTypeFromName(output.datatype());
  if (!dtype.has_value()) {
    return absl::UnimplementedError(absl::StrCat(
        "output '", output.name(), "': unsupported datatype '", output.datatype(), "'"));
  }
  Dims dims(output.shape().begin(), output.shape().end());
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", output.name(), "': negative dimension in shape ", DimsToString(dims)));
    }
  }
  const size_t expected = static_cast<size_t>(NumElements(dims)) * DTypeSize(*dtype);
  if (i < response.raw_output_contents_size()) {
    const std::string& raw = response.raw_output_contents(i);
    if (raw.size() != expected) {
      return absl::InvalidArgumentError(absl::StrCat("output '", output.name(), "': ", raw.size(),
                                                     " raw bytes, expected ", expected, " for ",
                                                     output.datatype(), " ", DimsToString(dims)));
    }
    auto bytes = std::make_shared<std::string>(std::move(*response.mutable_raw_output_contents(i)));
    return Tensor::Wrap(*dtype, std::move(dims), bytes->data(), bytes);
  }
  const auto& c = output.contents();
  const int64_t n = NumElements(dims);
  auto check = [&](int size) -> absl::Status {
    if (size == n) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("output '", output.name(), "': ", size, " typed values, expected ", n));
  };
  switch (*dtype) {
    case DType::kBool:
      RETURN_IF_ERROR(check(c.bool_contents_size()));
      return FromTyped<bool>(*dtype, std::move(dims), c.bool_contents());
    case DType::kUInt8:
      RETURN_IF_ERROR(check(c.uint_contents_size()));
      return FromTyped<uint8_t>(*dtype, std::move(dims), c.uint_contents());
    case DType::kInt8:
      RETURN_IF_ERROR(check(c.int_contents_size()));
      return FromTyped<int8_t>(*dtype, std::move(dims), c.int_contents());
    case DType::kInt16:
      RETURN_IF_ERROR(check(c.int_contents_size()));
      return FromTyped<int16_t>(*dtype, std::move(dims), c.int_contents());
    case DType::kInt32:
      RETURN_IF_ERROR(check(c.int_contents_size()));
      return FromTyped<int32_t>(*dtype, std::move(dims), c.int_contents());
    case DType::kInt64:
      RETURN_IF_ERROR(check(c.int64_contents_size()));
      return FromTyped<int64_t>(*dtype, std::move(dims), c.int64_contents());
    case DType::kF32:
      RETURN_IF_ERROR(check(c.fp32_contents_size()));
      return FromTyped<float>(*dtype, std::move(dims), c.fp32_contents());
    case DType::kF64:
      RETURN_IF_ERROR(check(c.fp64_contents_size()));
      return FromTyped<double>(*dtype, std::move(dims), c.fp64_contents());
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", output.name(), "': no raw_output_contents for ", output.datatype()));
  }
}

Duration ToDuration(const inference::StatisticDuration& d) { return {d.count(), d.ns()}; }

// A PEM file named by a TLS option, whole.
absl::StatusOr<std::string> ReadTlsFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(flag, ": cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat(flag, ": cannot read '", path, "'"));
  return ss.str();
}

}  // namespace

// A connection to kilnd's local socket (ClientOptions::local_socket), made on
// the first inference and again after it breaks; one call at a time.
class LocalChannel {
 public:
  explicit LocalChannel(const ClientOptions& options) : options_(options) {}
  ~LocalChannel() { Close(); }

  // `request` without raw_input_contents; `inputs` follow it as its raw
  // entries, written from their own memory.
  absl::Status Infer(const inference::ModelInferRequest& request,
                     const std::vector<NamedTensor>& inputs,
                     inference::ModelInferResponse* response) {
    local_wire::EntriesAfterMessage body(request.SerializeAsString(), kRawInputs);
    for (const NamedTensor& input : inputs) {
      body.Add(absl::string_view(static_cast<const char*>(input.tensor.raw_data()),
                                 input.tensor.byte_size()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) RETURN_IF_ERROR(Open());
    absl::Status sent =
        local_wire::WriteFrame(fd_, local_wire::FrameKind::kInferRequest, body.pieces());
    if (!sent.ok()) {
      // kilnd restarted since the last call: one fresh connection.
      Close();
      RETURN_IF_ERROR(Open());
      RETURN_IF_ERROR(
          local_wire::WriteFrame(fd_, local_wire::FrameKind::kInferRequest, body.pieces()));
    }
    local_wire::Frame frame;
    absl::Status read = ReadAnswer(&frame);
    if (!read.ok()) return read;
    if (frame.kind == local_wire::FrameKind::kInferResponse) {
      if (!ParseChunks(frame.chunks, response)) {
        Close();
        return absl::InternalError("local socket: kilnd's answer does not parse");
      }
      return absl::OkStatus();
    }
    return StatusOf(frame);
  }

 private:
  // Parses a message from the chunks a frame was read into, in place.
  static bool ParseChunks(const std::vector<std::string>& chunks,
                          google::protobuf::MessageLite* message) {
    if (chunks.size() == 1) return message->ParseFromString(chunks[0]);
    std::deque<google::protobuf::io::ArrayInputStream> arrays;  // they never move
    std::vector<google::protobuf::io::ZeroCopyInputStream*> streams;
    for (const std::string& chunk : chunks) {
      streams.push_back(&arrays.emplace_back(chunk.data(), static_cast<int>(chunk.size())));
    }
    google::protobuf::io::ConcatenatingInputStream stream(streams.data(),
                                                          static_cast<int>(streams.size()));
    return message->ParseFromZeroCopyStream(&stream);
  }

  absl::Status Open() {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string& path = options_.local_socket;
    if (path.size() >= sizeof(address.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("local socket path '", path, "' is too long"));
    }
    std::memcpy(address.sun_path, path.data(), path.size());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      const int error = errno;
      Close();
      return absl::UnavailableError(absl::StrCat("cannot connect to kilnd's local socket '", path,
                                                 "': ", std::strerror(error)));
    }
    if (options_.token.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(local_wire::WriteFrame(fd_, local_wire::FrameKind::kAuthorization,
                                           "Bearer " + options_.token));
    local_wire::Frame frame;
    RETURN_IF_ERROR(ReadAnswer(&frame));
    absl::Status accepted = StatusOf(frame);
    if (!accepted.ok()) Close();
    return accepted;
  }

  absl::Status ReadAnswer(local_wire::Frame* frame) {
    absl::Status read = local_wire::ReadFrame(fd_, UINT32_MAX, frame);
    if (!read.ok()) {
      Close();
      return absl::UnavailableError(
          absl::StrCat("kilnd's local socket closed before answering: ", read.message()));
    }
    return absl::OkStatus();
  }

  // The status a kStatus frame carries (anything else here is kilnd breaking
  // the protocol).
  absl::Status StatusOf(const local_wire::Frame& frame) {
    if (frame.kind != local_wire::FrameKind::kStatus) {
      Close();
      return absl::InternalError("local socket: kilnd answered with an unexpected frame");
    }
    absl::Status status;
    std::string id;
    absl::Status decoded = local_wire::DecodeStatus(frame.Body(), &status, &id);
    if (!decoded.ok()) {
      Close();
      return decoded;
    }
    return status;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  const ClientOptions& options_;
  std::mutex mu_;
  int fd_ = -1;
};

namespace {

// What ModelInfer sends for `request` (which carries no raw_input_contents)
// followed by `inputs`' bytes as its raw_input_contents entries, taken from
// the tensors' own memory (local_wire::EntryHead), so the bytes go to the socket
// without the two copies that filling the message and serializing it make
// (about 0.5 ms each for a 4.8 MB input on the machine docs/performance.md
// describes). gRPC releases the slices that borrow a tensor's bytes when it
// has written them or given up; `Release` counts those, and the caller waits
// for them all (Wait) before the tensors may go.
class BorrowedInputs {
 public:
  BorrowedInputs(const inference::ModelInferRequest& request,
                 const std::vector<NamedTensor>& inputs) {
    std::vector<grpc::Slice> slices;
    slices.emplace_back(request.SerializeAsString());
    for (const NamedTensor& input : inputs) {
      const size_t bytes = input.tensor.byte_size();
      const local_wire::EntryHead head(kRawInputs, bytes);
      slices.emplace_back(head.view().data(), head.view().size());
      if (bytes == 0) continue;
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        state_->lent++;
      }
      auto* state = new std::shared_ptr<State>(state_);
      slices.emplace_back(const_cast<void*>(input.tensor.raw_data()), bytes, &Release, state);
    }
    buffer_ = grpc::ByteBuffer(slices.data(), slices.size());
  }
  ~BorrowedInputs() { Wait(); }

  const grpc::ByteBuffer& buffer() const { return buffer_; }

  // Drops this object's references and waits until gRPC has released every
  // borrowed slice.
  void Wait() {
    buffer_.Clear();
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->released.wait(lock, [&] { return state_->lent == 0; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable released;
    int lent = 0;
  };
  static void Release(void* arg) {
    auto* state = static_cast<std::shared_ptr<State>*>(arg);
    {
      std::lock_guard<std::mutex> lock((*state)->mu);
      if (--(*state)->lent == 0) (*state)->released.notify_all();
    }
    delete state;
  }
  std::shared_ptr<State> state_ = std::make_shared<State>();
  grpc::ByteBuffer buffer_;
};

}  // namespace

struct InferenceClient::Impl {
  ClientOptions options;
  std::unique_ptr<LocalChannel> local;  // set when options.local_socket is
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<GRPCInferenceService::Stub> stub;
  std::unique_ptr<kiln::v1::ModelRepositoryService::Stub> kiln;

  // A fresh context per call (gRPC forbids reuse), with the deadline applied.
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto context = std::make_unique<grpc::ClientContext>();
    if (options.timeout.count() > 0) {
      context->set_deadline(std::chrono::system_clock::now() + options.timeout);
    }
    // Per call rather than as call credentials: gRPC sends those only over
    // TLS, and a token must also reach a kilnd behind a TLS-terminating proxy.
    if (!options.token.empty()) context->AddMetadata("authorization", "Bearer " + options.token);
    return context;
  }

  // ModelInfer over gRPC with `inputs` appended to `request` from their own
  // memory (BorrowedInputs).
  absl::Status ModelInfer(const inference::ModelInferRequest& request,
                          const std::vector<NamedTensor>& inputs,
                          inference::ModelInferResponse* response) const {
    BorrowedInputs borrowed(request, inputs);
    grpc::TemplatedGenericStub<grpc::ByteBuffer, inference::ModelInferResponse> generic(channel);
    grpc::CompletionQueue cq;
    grpc::Status status;
    {
      std::unique_ptr<grpc::ClientContext> context = Context();
      auto call = generic.PrepareUnaryCall(
          context.get(), "/inference.GRPCInferenceService/ModelInfer", borrowed.buffer(), &cq);
      call->StartCall();
      call->Finish(response, &status, &status);
      void* tag = nullptr;
      bool ok = false;
      if (!cq.Next(&tag, &ok)) return absl::InternalError("gRPC's completion queue shut down");
    }
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
    borrowed.Wait();
    return FromGrpcStatus(status);
  }
};

InferenceClient::InferenceClient(std::string target, std::unique_ptr<Impl> impl)
    : target_(std::move(target)), impl_(std::move(impl)) {}

InferenceClient::~InferenceClient() = default;

absl::StatusOr<std::unique_ptr<InferenceClient>> InferenceClient::Connect(const std::string& target,
                                                                          ClientOptions options) {
  if (target.empty()) return absl::InvalidArgumentError("server address is empty");
  grpc::ChannelArguments args;
  // Model uploads and large tensors exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (!options.local_socket.empty()) impl->local = std::make_unique<LocalChannel>(impl->options);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls || !options.tls_ca_file.empty() || !options.tls_cert_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadTlsFile(options.tls_ca_file, "--tls-ca"));
    }
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("a client certificate needs both --tls-cert and --tls-key");
    }
    if (!options.tls_cert_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadTlsFile(options.tls_cert_file, "--tls-cert"));
      ASSIGN_OR_RETURN(ssl.pem_private_key, ReadTlsFile(options.tls_key_file, "--tls-key"));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  impl->channel = grpc::CreateCustomChannel(target, credentials, args);
  impl->stub = GRPCInferenceService::NewStub(impl->channel);
  impl->kiln = kiln::v1::ModelRepositoryService::NewStub(impl->channel);
  return std::unique_ptr<InferenceClient>(new InferenceClient(target, std::move(impl)));
}

absl::StatusOr<bool> InferenceClient::Live() {
  inference::ServerLiveRequest request;
  inference::ServerLiveResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ServerLive(impl_->Context().get(), request, &response)));
  return response.live();
}

absl::StatusOr<bool> InferenceClient::Ready() {
  inference::ServerReadyRequest request;
  inference::ServerReadyResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ServerReady(impl_->Context().get(), request, &response)));
  return response.ready();
}

absl::StatusOr<bool> InferenceClient::ModelReady(const std::string& name) {
  inference::ModelReadyRequest request;
  request.set_name(name);
  inference::ModelReadyResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ModelReady(impl_->Context().get(), request, &response)));
  return response.ready();
}

absl::StatusOr<ServerMetadata> InferenceClient::GetServerMetadata() {
  inference::ServerMetadataRequest request;
  inference::ServerMetadataResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ServerMetadata(impl_->Context().get(), request, &response)));
  ServerMetadata metadata;
  metadata.name = response.name();
  metadata.version = response.version();
  metadata.extensions.assign(response.extensions().begin(), response.extensions().end());
  return metadata;
}

absl::Status InferenceClient::Upload(const std::string& name, absl::string_view file_bytes,
                                     std::optional<std::string> config_json, int64_t version) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(name);
  auto& params = *request.mutable_parameters();
  params[absl::StrCat("file:", version, "/model.pt")].set_bytes_param(file_bytes.data(),
                                                                     file_bytes.size());
  params["sha256"].set_string_param(Sha256Hex(file_bytes));
  if (config_json.has_value()) params["config"].set_string_param(std::move(*config_json));
  inference::RepositoryModelLoadResponse response;
  return FromGrpcStatus(
      impl_->stub->RepositoryModelLoad(impl_->Context().get(), request, &response));
}

absl::StatusOr<ModelFileStatus> InferenceClient::QueryModelFile(const std::string& sha256,
                                                               uint64_t size) {
  kiln::v1::QueryModelFileRequest request;
  request.set_sha256(sha256);
  request.set_size(size);
  kiln::v1::QueryModelFileResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->kiln->QueryModelFile(impl_->Context().get(), request, &response)));
  return ModelFileStatus{response.present(), response.received_bytes()};
}

absl::StatusOr<UploadResult> InferenceClient::UploadFile(const std::string& name,
                                                         const std::string& path,
                                                         const UploadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read '", path, "'"));
  return UploadBytes(name, ss.str(), options);
}

absl::StatusOr<UploadResult> InferenceClient::UploadBytes(const std::string& name,
                                                          absl::string_view bytes,
                                                          const UploadOptions& options) {
  UploadResult result;
  result.sha256 = Sha256Hex(bytes);
  result.size = bytes.size();
  const size_t chunk_bytes = std::max<size_t>(options.chunk_bytes, 1);
  absl::Status last;
  for (int attempt = 1; attempt <= std::max(options.max_attempts, 1); ++attempt) {
    result.attempts = attempt;
    if (attempt > 1) {
      // Give a restarting server or a congested link a moment.
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * (attempt - 1)));
    }
    // Where to start: nowhere when the server has the file, else after the
    // bytes it kept from an earlier, interrupted attempt.
    absl::StatusOr<ModelFileStatus> held = QueryModelFile(result.sha256, bytes.size());
    if (!held.ok()) {
      last = held.status();
      if (absl::IsUnavailable(last)) continue;
      return last;
    }
    const uint64_t offset = held->present ? bytes.size() : held->received_bytes;
    if (attempt == 1) {
      result.already_on_server = held->present;
      result.resumed_from = offset;
    }

    auto context = impl_->Context();
    kiln::v1::UploadModelResponse response;
    std::unique_ptr<grpc::ClientWriter<kiln::v1::UploadModelRequest>> writer =
        impl_->kiln->UploadModel(context.get(), &response);
    kiln::v1::UploadModelRequest message;
    kiln::v1::UploadHeader* header = message.mutable_header();
    header->set_model_name(name);
    header->set_version(options.version);
    header->set_total_size(bytes.size());
    header->set_sha256(result.sha256);
    header->set_offset(offset);
    if (options.config_json.has_value()) header->set_config_json(*options.config_json);
    bool ok = writer->Write(message);
    if (options.progress) options.progress(offset, bytes.size());
    uint64_t end = bytes.size();
    if (options.stop_after_bytes > 0) end = std::min<uint64_t>(end, options.stop_after_bytes);
    for (uint64_t pos = offset; ok && pos < end; pos += chunk_bytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_bytes, end - pos));
      message.Clear();
      message.set_chunk(bytes.data() + pos, n);
      ok = writer->Write(message);
      if (ok) result.bytes_sent += n;
      if (ok && options.progress) options.progress(pos + n, bytes.size());
    }
    writer->WritesDone();
    last = FromGrpcStatus(writer->Finish());
    if (last.ok()) {
      result.version = response.version();
      result.unchanged = response.unchanged();
      result.load_ms = response.load_ms();
      result.dry_run = response.dry_run();
      result.contract_json = response.contract_json();
      return result;
    }
    // A lost connection resumes; anything the server decided is final.
    if (!absl::IsUnavailable(last) || options.stop_after_bytes > 0) return last;
  }
  return last;
}

absl::Status InferenceClient::Delete(const std::string& name, int64_t version) {
  kiln::v1::DeleteModelRequest request;
  request.set_model_name(name);
  request.set_version(version);
  kiln::v1::DeleteModelResponse response;
  return FromGrpcStatus(impl_->kiln->DeleteModel(impl_->Context().get(), request, &response));
}

absl::StatusOr<CacheStatistics> InferenceClient::GetCacheStatistics(const std::string& name,
                                                                    int64_t version) {
  kiln::v1::CacheStatisticsRequest request;
  request.set_model_name(name);
  request.set_version(version);
  kiln::v1::CacheStatisticsResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->kiln->CacheStatistics(impl_->Context().get(), request, &response)));
  CacheStatistics stats;
  for (const auto& m : response.models()) {
    ModelCacheStatistics s;
    s.name = m.model_name();
    s.version = m.version();
    s.sha256 = m.sha256();
    s.state = m.state();
    s.load_ms = m.load_ms();
    s.graph_source = m.graph_source();
    s.import_ms = m.import_ms();
    s.plan_memory_hits = m.plan_memory_hits();
    s.plan_disk_hits = m.plan_disk_hits();
    s.plan_misses = m.plan_misses();
    s.plan_evictions = m.plan_evictions();
    s.compile_count = m.compile_count();
    s.compile_ms = m.compile_ms();
    s.bytes_held = m.bytes_held();
    s.weight_bytes = m.weight_bytes();
    stats.models.push_back(std::move(s));
  }
  const auto& t = response.totals();
  stats.totals = CacheTotals{t.memory_limit_bytes(), t.memory_bytes(),     t.memory_entries(),
                             t.evictions(),          t.disk_dir(),         t.disk_graph_hits(),
                             t.disk_graph_misses(),  t.disk_plan_hits(),   t.disk_plan_misses(),
                             t.disk_corrupt(),       t.disk_writes(),      t.packed_hits(),
                             t.packed_writes(),      t.disk_bytes(),       t.disk_limit_bytes(),
                             t.disk_evictions()};
  return stats;
}

absl::Status InferenceClient::Load(const std::string& name,
                                   std::optional<std::string> config_json) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(name);
  if (config_json.has_value()) {
    (*request.mutable_parameters())["config"].set_string_param(std::move(*config_json));
  }
  inference::RepositoryModelLoadResponse response;
  return FromGrpcStatus(
      impl_->stub->RepositoryModelLoad(impl_->Context().get(), request, &response));
}

absl::Status InferenceClient::Unload(const std::string& name) {
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(name);
  inference::RepositoryModelUnloadResponse response;
  return FromGrpcStatus(
      impl_->stub->RepositoryModelUnload(impl_->Context().get(), request, &response));
}

absl::StatusOr<std::vector<ModelIndexEntry>> InferenceClient::Index(bool ready_only) {
  inference::RepositoryIndexRequest request;
  request.set_ready(ready_only);
  inference::RepositoryIndexResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->RepositoryIndex(impl_->Context().get(), request, &response)));
  std::vector<ModelIndexEntry> index;
  for (const auto& model : response.models()) {
    index.push_back({model.name(), model.version(), model.state(), model.reason()});
  }
  return index;
}

absl::StatusOr<ModelMetadata> InferenceClient::Metadata(const std::string& name,
                                                        const std::string& version) {
  inference::ModelMetadataRequest request;
  request.set_name(name);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ModelMetadata(impl_->Context().get(), request, &response)));
  auto convert = [](const auto& tensors) {
    std::vector<TensorMetadata> out;
    for (const auto& t : tensors) {
      out.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    return out;
  };
  ModelMetadata metadata;
  metadata.name = response.name();
  metadata.versions.assign(response.versions().begin(), response.versions().end());
  metadata.platform = response.platform();
  metadata.inputs = convert(response.inputs());
  metadata.outputs = convert(response.outputs());
  metadata.properties.insert(response.properties().begin(), response.properties().end());
  return metadata;
}

absl::StatusOr<std::vector<NamedTensor>> InferenceClient::Infer(
    const std::string& name, const std::vector<NamedTensor>& inputs,
    const std::vector<std::string>& outputs, const std::string& version) {
  return InferImpl(name, inputs, outputs, version, /*profile=*/false, nullptr);
}

absl::StatusOr<InferenceClient::ProfiledInfer> InferenceClient::InferProfiled(
    const std::string& name, const std::vector<NamedTensor>& inputs, const std::string& version) {
  ProfiledInfer result;
  inference::ModelInferResponse response;
  ASSIGN_OR_RETURN(result.outputs,
                   InferImpl(name, inputs, {}, version, /*profile=*/true, &response));
  auto it = response.parameters().find("profile");
  if (it == response.parameters().end() ||
      it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::UnimplementedError(
        absl::StrCat("the server at ", target_, " answered without a profile (not Kiln, or a "
                     "Kiln without profiles)"));
  }
  result.profile_json = it->second.string_param();
  return result;
}

absl::StatusOr<std::vector<NamedTensor>> InferenceClient::InferImpl(
    const std::string& name, const std::vector<NamedTensor>& inputs,
    const std::vector<std::string>& outputs, const std::string& version, bool profile,
    inference::ModelInferResponse* response_out, const std::vector<SharedMemoryTensor>& shared) {
  inference::ModelInferRequest request;
  request.set_model_name(name);
  request.set_model_version(version);
  for (const SharedMemoryTensor& input : shared) {
    auto* tensor = request.add_inputs();
    tensor->set_name(input.name);
    tensor->set_datatype(std::string(DTypeName(input.dtype)));
    int64_t count = 1;
    for (int64_t d : input.dims) {
      tensor->add_shape(d);
      count *= d;
    }
    auto& params = *tensor->mutable_parameters();
    params["shared_memory_region"].set_string_param(input.region);
    params["shared_memory_offset"].set_uint64_param(input.offset);
    params["shared_memory_byte_size"].set_uint64_param(static_cast<uint64_t>(count) *
                                                       DTypeSize(input.dtype));
  }
  for (const NamedTensor& input : inputs) {
    auto* tensor = request.add_inputs();
    tensor->set_name(input.name);
    tensor->set_datatype(std::string(DTypeName(input.tensor.dtype())));
    for (int64_t d : input.tensor.dims()) tensor->add_shape(d);
    // Its bytes follow the message from the tensor's own memory (local_wire::EntryHead).
  }
  for (const std::string& output : outputs) request.add_outputs()->set_name(output);
  if (profile) (*request.mutable_parameters())["profile"].set_bool_param(true);

  inference::ModelInferResponse local;
  inference::ModelInferResponse& response = response_out != nullptr ? *response_out : local;
  if (impl_->local != nullptr) {
    if (impl_->options.timeout.count() > 0) {
      (*request.mutable_parameters())["timeout"].set_int64_param(
          std::chrono::duration_cast<std::chrono::microseconds>(impl_->options.timeout).count());
    }
    RETURN_IF_ERROR(impl_->local->Infer(request, inputs, &response));
  } else {
    RETURN_IF_ERROR(impl_->ModelInfer(request, inputs, &response));
  }
  std::vector<NamedTensor> result;
  for (int i = 0; i < response.outputs_size(); ++i) {
    ASSIGN_OR_RETURN(Tensor tensor, DecodeOutput(response, i));
    result.push_back({response.outputs(i).name(), std::move(tensor)});
  }
  return result;
}

absl::StatusOr<std::vector<NamedTensor>> InferenceClient::InferFromSharedMemory(
    const std::string& name, const std::vector<SharedMemoryTensor>& shared_inputs,
    const std::vector<NamedTensor>& inputs, const std::string& version) {
  return InferImpl(name, inputs, {}, version, /*profile=*/false, nullptr, shared_inputs);
}

absl::Status InferenceClient::RegisterSystemSharedMemory(const std::string& name,
                                                         const std::string& key, uint64_t offset,
                                                         uint64_t byte_size) {
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  inference::SystemSharedMemoryRegisterResponse response;
  return FromGrpcStatus(
      impl_->stub->SystemSharedMemoryRegister(impl_->Context().get(), request, &response));
}

absl::Status InferenceClient::UnregisterSystemSharedMemory(const std::string& name) {
  inference::SystemSharedMemoryUnregisterRequest request;
  request.set_name(name);
  inference::SystemSharedMemoryUnregisterResponse response;
  return FromGrpcStatus(
      impl_->stub->SystemSharedMemoryUnregister(impl_->Context().get(), request, &response));
}

absl::StatusOr<std::vector<SharedMemoryRegionStatus>> InferenceClient::SystemSharedMemoryStatus(
    const std::string& name) {
  inference::SystemSharedMemoryStatusRequest request;
  request.set_name(name);
  inference::SystemSharedMemoryStatusResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(
      impl_->stub->SystemSharedMemoryStatus(impl_->Context().get(), request, &response)));
  std::vector<SharedMemoryRegionStatus> regions;
  for (const auto& [n, r] : response.regions()) {
    regions.push_back({r.name(), r.key(), r.offset(), r.byte_size()});
  }
  std::sort(regions.begin(), regions.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return regions;
}

absl::StatusOr<std::vector<ModelStatistics>> InferenceClient::Statistics(const std::string& name) {
  inference::ModelStatisticsRequest request;
  request.set_name(name);
  inference::ModelStatisticsResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ModelStatistics(impl_->Context().get(), request, &response)));
  std::vector<ModelStatistics> stats;
  for (const auto& m : response.model_stats()) {
    ModelStatistics s;
    s.name = m.name();
    s.version = m.version();
    s.last_inference_ms = m.last_inference();
    s.inference_count = m.inference_count();
    s.execution_count = m.execution_count();
    const auto& infer = m.inference_stats();
    s.success = ToDuration(infer.success());
    s.fail = ToDuration(infer.fail());
    s.queue = ToDuration(infer.queue());
    s.compute_input = ToDuration(infer.compute_input());
    s.compute_infer = ToDuration(infer.compute_infer());
    s.compute_output = ToDuration(infer.compute_output());
    s.cache_hit = ToDuration(infer.cache_hit());
    s.cache_miss = ToDuration(infer.cache_miss());
    for (const auto& usage : m.memory_usage()) s.memory_bytes += usage.byte_size();
    stats.push_back(std::move(s));
  }
  return stats;
}

}  // namespace kiln::client
