#include "server/local/local_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inference/grpc_service.pb.h"
#include "proto/local/entry_head.h"
#include "proto/local/local_wire.h"
#include "server/core/call_log.h"
#include "server/core/infer_request_reader.h"
#include "server/core/inference_core.h"
#include "server/core/thread_name.h"
#include "server/security/access_policy.h"

namespace kiln::server {
namespace {

using local_wire::FrameKind;

// How long writing an answer may wait for a client that does not read.
constexpr time_t kSendTimeoutSeconds = 10;

absl::StatusOr<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("local socket path '", path, "' must be 1 to ", sizeof(address.sun_path) - 1,
                     " bytes long"));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

// Makes room for a socket at `address`: removes a socket file no server
// answers on; refuses anything else.
absl::Status ClearStaleSocket(const sockaddr_un& address) {
  struct stat st {};
  if (::lstat(address.sun_path, &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "local socket path '", address.sun_path, "' exists and is not a socket"));
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  const bool answered =
      ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(probe);
  if (answered) {
    return absl::FailedPreconditionError(absl::StrCat(
        "local socket path '", address.sun_path, "' is in use by another server"));
  }
  ::unlink(address.sun_path);
  return absl::OkStatus();
}

}  // namespace

struct LocalServer::Connection {
  explicit Connection(int fd) : fd(fd) {}
  ~Connection() { ::close(fd); }

  // Answers from whichever thread ends a request, one frame at a time. A
  // write that fails (the client gone, or not reading for
  // kSendTimeoutSeconds) may have left half a frame: the connection ends,
  // its reader included.
  absl::Status Write(FrameKind kind, absl::string_view body) {
    return Write(kind, absl::MakeConstSpan(&body, 1));
  }
  absl::Status Write(FrameKind kind, absl::Span<const absl::string_view> body) {
    std::lock_guard<std::mutex> lock(write_mu);
    absl::Status written = local_wire::WriteFrame(fd, kind, body);
    if (!written.ok()) ::shutdown(fd, SHUT_RDWR);
    return written;
  }

  // `response` as a kInferResponse frame: the message, then each output's
  // bytes as a raw_output_contents entry written from its tensor (`raw`:
  // the answer's outputs, EncodeOutputs; local_wire::EntryHead).
  absl::Status WriteResponse(const inference::ModelInferResponse& response,
                             const RawOutputs& raw) {
    local_wire::EntriesAfterMessage body(
        response.SerializeAsString(), inference::ModelInferResponse::kRawOutputContentsFieldNumber);
    for (size_t i = 0; i < raw.entries.size(); ++i) body.Add(raw.bytes(i));
    return Write(FrameKind::kInferResponse, body.pieces());
  }

  const int fd;
  std::mutex write_mu;
  // The last kAuthorization frame's value; the reader thread's alone.
  std::string authorization;
  // The client has gone (its stream ended): requests still running are cancelled.
  std::atomic<bool> closed{false};
};

LocalServer::LocalServer(LocalServerOptions options, InferenceCore* core,
                         const security::Authenticator* auth, int listen_fd)
    : options_(std::move(options)), core_(core), auth_(auth), listen_fd_(listen_fd) {}

absl::StatusOr<std::unique_ptr<LocalServer>> LocalServer::Start(
    const LocalServerOptions& options, InferenceCore* core, const security::Authenticator* auth) {
  absl::StatusOr<sockaddr_un> address = SocketAddress(options.path);
  if (!address.ok()) return address.status();
  if (absl::Status cleared = ClearStaleSocket(*address); !cleared.ok()) return cleared;
  // Non-blocking: an accept after poll() must never wait (Stop() wakes the poll).
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  // Owner only before anyone can connect (a connect before listen() fails).
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0 ||
      ::chmod(options.path.c_str(), 0600) != 0 || ::listen(fd, 64) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(options.path.c_str());
    return absl::UnavailableError(absl::StrCat("cannot listen on local socket '", options.path,
                                               "': ", std::strerror(error)));
  }
  std::unique_ptr<LocalServer> server(new LocalServer(options, core, auth, fd));
  if (::pipe2(server->wake_fds_, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(options.path.c_str());
    server->stopped_ = true;
    return absl::UnavailableError(absl::StrCat("pipe: ", std::strerror(error)));
  }
  server->acceptor_ = std::thread([s = server.get()] {
    NameThisThread("kiln-local");
    s->AcceptLoop();
  });
  return server;
}

LocalServer::~LocalServer() { Stop(); }

void LocalServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("local socket: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0 || stopping_.load()) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      if (!stopping_.load()) spdlog::error("local socket: accept: {}", std::strerror(errno));
      return;
    }
    // A client that stops reading its answers holds a compute thread for at
    // most this long (the thread that ends a request writes its answer).
    const timeval send_timeout{kSendTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    auto connection = std::make_shared<Connection>(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    if (static_cast<int>(connections_.size()) >= options_.max_connections) {
      (void)connection->Write(
          FrameKind::kStatus,
          local_wire::EncodeStatus(
              absl::ResourceExhaustedError(absl::StrCat(
                  "kilnd serves at most ", options_.max_connections,
                  " local-socket connections at once; close one or use gRPC")),
              ""));
      continue;
    }
    connections_.push_back(connection);
    ++readers_;
    std::thread([this, connection] {
      NameThisThread("kiln-local-conn");
      Serve(connection);
    }).detach();
  }
}

void LocalServer::Serve(const std::shared_ptr<Connection>& connection) {
  for (;;) {
    local_wire::Frame frame;
    absl::Status read = local_wire::ReadFrame(connection->fd, options_.max_message_bytes, &frame);
    if (absl::IsInvalidArgument(read)) {
      // The stream cannot be trusted past a bad header: say why, then close.
      (void)connection->Write(FrameKind::kStatus, local_wire::EncodeStatus(read, ""));
      break;
    }
    if (!read.ok()) break;  // the client has gone
    if (frame.kind == FrameKind::kInferRequest) {
      StartInfer(connection, std::move(frame.chunks));
      continue;
    }
    if (frame.kind == FrameKind::kAuthorization) {
      std::string authorization = frame.Body();
      absl::Status checked = absl::OkStatus();
      if (auth_ != nullptr) {
        checked = auth_->Authenticate(security::Rpc::kModelInfer, authorization).status();
      }
      if (checked.ok()) connection->authorization = std::move(authorization);
      if (!connection->Write(FrameKind::kStatus, local_wire::EncodeStatus(checked, "")).ok()) {
        break;
      }
      continue;
    }
    (void)connection->Write(
        FrameKind::kStatus,
        local_wire::EncodeStatus(absl::InvalidArgumentError(
                                     "local socket: kilnd receives authorization and "
                                     "infer-request frames only"),
                                 ""));
    break;
  }
  connection->closed.store(true);
  ::shutdown(connection->fd, SHUT_RD);
  std::lock_guard<std::mutex> lock(mu_);
  connections_.remove(connection);
  --readers_;
  idle_.notify_all();  // under the lock: Stop() cannot return before it is done
}

void LocalServer::StartInfer(const std::shared_ptr<Connection>& connection,
                             std::vector<std::string> chunks) {
  struct Call {
    inference::ModelInferRequest request;
    inference::ModelInferResponse response;
    RawOutputs outputs;  // the answer's raw outputs (InferCall::raw_outputs)
  };
  auto call = std::make_shared<Call>();
  // The tensors' bytes stay in `chunks` until the decoder copies them into the
  // inputs, before core_->ModelInfer returns (server/core/infer_request_reader.h).
  RawInputs raw;
  const std::vector<absl::string_view> pieces(chunks.begin(), chunks.end());
  if (!ReadInferRequest(pieces, &call->request, &raw)) {
    (void)connection->Write(
        FrameKind::kStatus,
        local_wire::EncodeStatus(
            absl::InvalidArgumentError("local socket: the infer-request frame is not a "
                                       "serialized inference.ModelInferRequest"),
            ""));
    return;
  }
  absl::StatusOr<security::Caller> caller = security::Caller::Unchecked();
  if (auth_ != nullptr) caller = auth_->Authenticate(security::Rpc::kModelInfer, connection->authorization);
  if (!caller.ok()) {
    (void)connection->Write(FrameKind::kStatus,
                            local_wire::EncodeStatus(caller.status(), call->request.id()));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_;
  }
  if (options_.in_flight != nullptr) options_.in_flight->fetch_add(1);
  InferCall infer;
  infer.cancelled = [connection] { return connection->closed.load(); };
  infer.raw_outputs = &call->outputs;
  core_->ModelInfer(*caller, call->request, &call->response, std::move(infer),
                    [this, connection, call](const absl::Status& status) {
                      if (status.ok()) {
                        (void)connection->WriteResponse(call->response, call->outputs);
                        call->outputs.entries.clear();
                      } else {
                        LogFailedCall("ModelInfer (local socket)", call->request.model_name(),
                                      status);
                        (void)connection->Write(
                            FrameKind::kStatus,
                            local_wire::EncodeStatus(status, call->request.id()));
                      }
                      RequestEnded();
                    },
                    &raw);
}

void LocalServer::RequestEnded() {
  if (options_.in_flight != nullptr) options_.in_flight->fetch_sub(1);
  std::lock_guard<std::mutex> lock(mu_);
  --requests_;
  idle_.notify_all();
}

void LocalServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_.store(true);
  const char wake = 1;
  (void)!::write(wake_fds_[1], &wake, 1);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
  std::unique_lock<std::mutex> lock(mu_);
  // Readers see the end of their stream; answers still being computed go out.
  for (const std::shared_ptr<Connection>& connection : connections_) {
    ::shutdown(connection->fd, SHUT_RD);
  }
  idle_.wait(lock, [this] { return readers_ == 0 && requests_ == 0; });
  ::unlink(options_.path.c_str());
}

}  // namespace kiln::server
