// The HTTP transport of kilnd: listens on HOST:PORT, reads requests on a pool
// of threads, and hands each one, body read and bounded, to the handler of the
// first route whose method and path pattern match. It knows nothing of the
// protocol spoken over it (server/http/kserve_routes.h has the routes). With
// TLS files in its options it serves HTTPS (server/security/tls.h).
//
// Threading: cpp-httplib's model, a fixed pool of `threads` threads, each
// serving one connection at a time for as long as the client keeps it alive;
// a handler runs on that thread and may block (an inference waits for its
// compute thread to finish it). More connections than threads wait for one to be free.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/security/tls.h"

namespace kiln::server::http {

struct HttpRequest {
  std::string method;
  std::string path;
  std::vector<std::string> params;          // the route pattern's capture groups, in order
  std::map<std::string, std::string> headers;  // names in lower case
  std::multimap<std::string, std::string> query;
  std::string body;
  // Whether the client has hung up (closed or shut down its side of the
  // connection) while the handler runs: cheap to call often (it looks at the
  // socket at most once a millisecond; the socket is found on the first
  // call). False when the connection's socket cannot be found.
  std::function<bool()> client_gone;

  // A header's value (`name` in lower case), empty when absent.
  std::string Header(const std::string& name) const;
  // A query parameter's first value, empty when absent.
  std::string Query(const std::string& name) const;
  bool HasQuery(const std::string& name) const { return query.count(name) > 0; }
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // Bytes sent after `body`, in order, from where they lie (an answer's
  // binary outputs in their tensors); `tail_owner` keeps them alive until
  // they are sent.
  std::vector<absl::string_view> tail;
  std::shared_ptr<const void> tail_owner;
};

struct Route {
  std::string method;   // "GET" or "POST"
  std::string pattern;  // an ECMAScript regex matching the whole path
  std::function<HttpResponse(const HttpRequest&)> handler;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: a free port
  int threads = 8;
  // Larger bodies are read past without being kept, and refused with 413
  // (also when sent chunked).
  uint64_t max_body_bytes = 1ull << 30;
  // Requests being handled now: incremented and decremented around each one
  // (shared with the gRPC front end, for the shutdown log). May be null.
  std::atomic<int>* in_flight = nullptr;
  // HTTPS with these files (server/security/tls.h); plain HTTP when empty.
  security::TlsFiles tls;
};

class HttpServer {
 public:
  // Binds HOST:PORT and starts serving `routes` on a thread of its own. Fails
  // with Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           std::vector<Route> routes);
  ~HttpServer();

  // The bound port (the chosen one when options.port was 0).
  int port() const { return port_; }

  // Stops accepting connections and waits for the requests being handled to
  // finish; idle kept-alive connections end within a keep-alive timeout.
  // Idempotent.
  void Stop();

 private:
  struct Impl;
  HttpServer() = default;

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread listener_;
  std::atomic<bool> stopped_{false};
};

}  // namespace kiln::server::http
