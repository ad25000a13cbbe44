// kilnd's local transport, beside server/grpc/ and server/http/: ModelInfer
// over a Unix domain socket (proto/local/local_wire.h has the protocol and
// why it exists) for clients on the same machine, with the system
// shared-memory extension's inputs the fast path.
//
// The socket file is made with mode 0600: only kilnd's own user (and root)
// may connect. With --auth-tokens a connection also sends its bearer token
// (a kAuthorization frame) and every request is checked against it as a gRPC
// call's would be. Each connection has a thread that reads its frames and
// hands each request to the core; the answer is written from the thread that
// finishes the request, so no thread wakes in between. A client that stops
// reading its answers holds that thread for at most 10 s, then is cut off.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "absl/status/statusor.h"

namespace kiln::server {

class InferenceCore;
namespace security {
class Authenticator;
}  // namespace security

struct LocalServerOptions {
  // The socket's path. A socket file already there that no server answers on
  // (one a killed kilnd left) is replaced; anything else there is an error.
  std::string path;
  // The largest frame a client may send.
  uint32_t max_message_bytes = 1u << 30;
  // Connections open at once; one past it is answered RESOURCE_EXHAUSTED and closed.
  int max_connections = 64;
  // Requests being handled now (shared with the other fronts). May be null.
  std::atomic<int>* in_flight = nullptr;
};

class LocalServer {
 public:
  // Binds and listens on options.path, serving ModelInfer over `core`
  // checked by `auth` (null: no checks); both must outlive the server.
  // InvalidArgument for a path too long for a socket address, FailedPrecondition
  // when the path is taken, Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<LocalServer>> Start(const LocalServerOptions& options,
                                                            InferenceCore* core,
                                                            const security::Authenticator* auth);
  // Stop().
  ~LocalServer();

  const std::string& path() const { return options_.path; }

  // Stops accepting, ends every connection, waits for the requests in
  // flight to finish and removes the socket file. Idempotent.
  void Stop();

 private:
  struct Connection;

  LocalServer(LocalServerOptions options, InferenceCore* core,
              const security::Authenticator* auth, int listen_fd);
  void AcceptLoop();
  void Serve(const std::shared_ptr<Connection>& connection);
  // Decodes and starts one request; its answer is written when it ends.
  void StartInfer(const std::shared_ptr<Connection>& connection,
                  std::vector<std::string> chunks);
  void RequestEnded();

  const LocalServerOptions options_;
  InferenceCore* const core_;
  const security::Authenticator* const auth_;
  int listen_fd_;
  int wake_fds_[2] = {-1, -1};  // a byte in it ends AcceptLoop
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::condition_variable idle_;
  std::list<std::shared_ptr<Connection>> connections_;  // open ones, guarded by mu_
  int readers_ = 0;   // connection threads running (detached), guarded by mu_
  int requests_ = 0;  // in flight, guarded by mu_
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace kiln::server
