// cpp-httplib (Debian's libcpp-httplib) does the HTTP/1.1 work: parsing,
// keep-alive, chunked bodies, the thread pool. What this file adds:
//  - bodies read through a content reader that keeps at most max_body_bytes,
//    so a chunked body cannot grow without bound (httplib 0.11 checks the
//    limit only against a declared Content-Length, and then reads past the
//    body); either way the body is read to its end and answered with 413;
//  - every error answered with the JSON body {"error": ...}, including the
//    ones httplib produces (unknown route, malformed request, 413);
//  - a handler can tell whether its client has hung up
//    (HttpRequest::client_gone): httplib does not hand handlers their socket,
//    so it is found by the request's addresses and then polled;
//  - one socket bound once (no SO_REUSEPORT, as for gRPC in server.cc), and
//    TCP_NODELAY: a small response must not wait for the client's delayed ACK.
#include "server/http/http_server.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/core/thread_name.h"
#include "server/http/http_status.h"

namespace kiln::server::http {
namespace {

// Requests one kept-alive connection may carry before it is closed, and how
// long an idle one is kept. A client that keeps its connection (as HTTP
// clients and Triton's do) pays the TCP handshake once.
constexpr size_t kKeepAliveMaxRequests = 100000;
constexpr time_t kKeepAliveTimeoutS = 5;
// A client that stops sending in the middle of a request is dropped after this.
constexpr time_t kReadTimeoutS = 60;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The answer's body, then its tail's pieces written from where they lie (no
// joined copy); httplib sends Content-Length and asks for the bytes from an
// offset on until all are written.
void SetContentWithTail(HttpResponse response, httplib::Response& res) {
  auto content = std::make_shared<HttpResponse>(std::move(response));
  size_t length = content->body.size();
  for (absl::string_view piece : content->tail) length += piece.size();
  res.set_content_provider(
      length, content->content_type,
      [content](size_t offset, size_t, httplib::DataSink& sink) {
        absl::string_view piece = content->body;
        size_t i = 0;
        while (offset >= piece.size() && i < content->tail.size()) {
          offset -= piece.size();
          piece = content->tail[i++];
        }
        if (offset >= piece.size()) return false;  // past the end: httplib stops asking first
        return sink.write(piece.data() + offset, piece.size() - offset);
      });
}

void SetError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(ErrorBody(message), "application/json");
}

// A socket address as httplib writes it into Request::remote_addr/local_addr.
bool SameEndpoint(const sockaddr_storage& a, socklen_t len, const std::string& ip, int port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  return ip == host && port == std::atoi(serv);
}

// The socket `req` came on: the one of this process whose peer and local
// addresses are the request's; -1 when none is. The socket stays open while
// the handler runs (httplib closes it after the connection's last request).
int ConnectionSocket(const std::string& remote_addr, int remote_port, const std::string& local_addr,
                     int local_port) {
  if (remote_port < 0 || local_port < 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
      continue;
    }
    if (SameEndpoint(peer, peer_len, remote_addr, remote_port) &&
        SameEndpoint(local, local_len, local_addr, local_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

// HttpRequest::client_gone for the connection `req` came on: the peer has
// closed or shut down its side (POLLRDHUP also when bytes it sent are still
// unread, such as a TLS close_notify), or the connection failed. The socket
// is looked for on the first call only (most handlers never ask: probes,
// metadata), then looked at once a millisecond at most; once gone, always
// gone; never gone when the socket cannot be found.
std::function<bool()> ClientGone(const httplib::Request& req) {
  struct State {
    std::string remote_addr, local_addr;
    int remote_port = -1, local_port = -1;
    std::once_flag found;
    int fd = -1;
    std::atomic<int64_t> next_check_ns{0};
    std::atomic<bool> gone{false};
  };
  auto state = std::make_shared<State>();
  state->remote_addr = req.remote_addr;
  state->remote_port = req.remote_port;
  state->local_addr = req.local_addr;
  state->local_port = req.local_port;
  return [state] {
    if (state->gone.load(std::memory_order_relaxed)) return true;
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    if (now < state->next_check_ns.load(std::memory_order_relaxed)) return false;
    state->next_check_ns.store(now + 1'000'000, std::memory_order_relaxed);
    std::call_once(state->found, [&] {
      state->fd = ConnectionSocket(state->remote_addr, state->remote_port, state->local_addr,
                                   state->local_port);
    });
    if (state->fd < 0) return false;
    pollfd p{state->fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      state->gone.store(true);
      return true;
    }
    return false;
  };
}

}  // namespace

struct HttpServer::Impl {
  std::unique_ptr<httplib::Server> server;
  HttpServerOptions options;
  std::atomic<bool> listener_done{false};
};

std::string HttpRequest::Header(const std::string& name) const {
  const auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string HttpRequest::Query(const std::string& name) const {
  const auto it = query.find(name);
  return it == query.end() ? std::string() : it->second;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              std::vector<Route> routes) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP threads must be >= 1, got ", options.threads));
  }
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->impl_ = std::make_unique<Impl>();
  http->impl_->options = options;
  if (options.tls.enabled()) {
    // cpp-httplib's SSLServer with an OpenSSL context set up by the same code
    // as gRPC's credentials are checked with; each connection's handshake
    // runs on the thread that then serves it.
    absl::Status tls = absl::OkStatus();
    auto ssl = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      tls = security::ConfigureSslContext(options.tls, &ctx);
      return tls.ok();
    });
    if (!tls.ok()) return tls;
    if (!ssl->is_valid()) return absl::InternalError("cannot set up TLS for HTTP");
    http->impl_->server = std::move(ssl);
  } else {
    http->impl_->server = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *http->impl_->server;
  const int threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_tcp_nodelay(true);
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.set_keep_alive_max_count(kKeepAliveMaxRequests);
  server.set_keep_alive_timeout(kKeepAliveTimeoutS);
  server.set_read_timeout(kReadTimeoutS, 0);
  server.set_payload_max_length(options.max_body_bytes);

  // Errors httplib answers by itself (no route, a request it cannot parse,
  // 413 for a declared Content-Length over the limit) get a JSON body too.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    if (res.status == 404) {
      message = absl::StrCat("no route for ", req.method, " ", absl::CHexEscape(req.path));
    } else if (res.status == 413) {
      message = "the request body is larger than the server accepts";
    } else {
      message = absl::StrCat("the request could not be handled (HTTP ", res.status, ")");
    }
    res.set_content(ErrorBody(message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  // A handler that throws (it should not: handlers return statuses) is a 500,
  // never a dead daemon.
  server.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("http {} {}: exception: {}", req.method, absl::CHexEscape(req.path), what);
        SetError(res, 500, absl::StrCat("internal error: ", what));
      });

  std::atomic<int>* in_flight = options.in_flight;
  for (Route& route : routes) {
    auto handler = std::make_shared<std::function<HttpResponse(const HttpRequest&)>>(
        std::move(route.handler));
    // Runs `handler` on the request and writes its answer.
    auto dispatch = [handler, in_flight](const httplib::Request& req, httplib::Response& res,
                                         std::string body) {
      const auto start = std::chrono::steady_clock::now();
      // Counted while the handler runs, also when it throws.
      struct Count {
        std::atomic<int>* n;
        explicit Count(std::atomic<int>* n) : n(n) {
          if (n != nullptr) n->fetch_add(1);
        }
        ~Count() {
          if (n != nullptr) n->fetch_sub(1);
        }
      } count(in_flight);
      HttpRequest request;
      request.method = req.method;
      request.path = req.path;
      for (size_t i = 1; i < req.matches.size(); ++i) request.params.push_back(req.matches[i]);
      for (const auto& [name, value] : req.headers) request.headers.emplace(Lower(name), value);
      for (const auto& [name, value] : req.params) request.query.emplace(name, value);
      request.body = std::move(body);
      request.client_gone = ClientGone(req);
      HttpResponse response = (*handler)(request);
      res.status = response.status;
      for (auto& [name, value] : response.headers) res.set_header(name.c_str(), value);
      if (!response.tail.empty()) {
        SetContentWithTail(std::move(response), res);
      } else if (!response.body.empty() || response.status != 200) {
        res.set_content(std::move(response.body), response.content_type.c_str());
      }
      // Probes come every few seconds: trace, not debug.
      const bool probe = req.path.rfind("/v2/health/", 0) == 0;
      spdlog::log(probe ? spdlog::level::trace : spdlog::level::debug, "http {} {} {} in {:.1f} ms",
                  req.method, absl::CHexEscape(req.path), res.status,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            start)
                      .count());
    };
    if (route.method == "GET") {
      server.Get(route.pattern, [dispatch](const httplib::Request& req, httplib::Response& res) {
        dispatch(req, res, std::string());
      });
    } else if (route.method == "POST") {
      const uint64_t max_body = options.max_body_bytes;
      server.Post(route.pattern, [dispatch, max_body](const httplib::Request& req,
                                                      httplib::Response& res,
                                                      const httplib::ContentReader& reader) {
        // HTTP/1.1: without Content-Length or Transfer-Encoding there is no
        // body (`curl -X POST URL` sends neither; httplib would read to EOF).
        if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
          dispatch(req, res, std::string());
          return;
        }
        if (req.is_multipart_form_data()) {
          // Read past it (httplib would call a receiver we do not give it),
          // then refuse it: the protocol sends JSON or raw bytes.
          reader([](const httplib::MultipartFormData&) { return true; },
                 [](const char*, size_t) { return true; });
          SetError(res, 415,
                   "multipart/form-data bodies are not accepted: send JSON, or a model file as "
                   "the body (application/octet-stream)");
          return;
        }
        std::string body;
        // Room for a declared length within the limit, taken at once: the
        // body is not copied as it grows, and pages not yet written cost no
        // memory (a large allocation is a lazily mapped one).
        if (req.has_header("Content-Length")) {
          const uint64_t declared = req.get_header_value<uint64_t>("Content-Length");
          try {
            if (declared <= max_body) body.reserve(static_cast<size_t>(declared));
          } catch (const std::bad_alloc&) {
            // No address space for it now (a limit on it): grown as it arrives.
          }
        }
        bool too_large = false;
        const bool read = reader([&](const char* data, size_t n) {
          if (too_large) return true;  // read past the rest, keeping nothing
          if (body.size() + n > max_body) {
            // Read to its end all the same: the connection stays in step, and
            // the client is not left writing into a socket nobody reads.
            too_large = true;
            std::string().swap(body);
            return true;
          }
          body.append(data, n);
          return true;
        });
        if (too_large || res.status == 413) {
          SetError(res, 413,
                   absl::StrCat("the request body is larger than the server's limit of ",
                                max_body, " bytes"));
          return;
        }
        if (!read) {
          SetError(res, 400, "the request body could not be read");
          return;
        }
        dispatch(req, res, std::move(body));
      });
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unsupported route method ", route.method));
    }
  }

  if (options.port == 0) {
    http->port_ = server.bind_to_any_port(options.host);
  } else if (server.bind_to_port(options.host, options.port)) {
    http->port_ = options.port;
  } else {
    http->port_ = -1;
  }
  if (http->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", options.host, ":", options.port));
  }
  Impl* impl = http->impl_.get();
  http->listener_ = std::thread([impl] {
    NameThisThread("kiln-http");  // its worker pool starts here and inherits it
    impl->server->listen_after_bind();
    impl->listener_done = true;
  });
  // stop() does nothing until the listener runs: wait for it, so that a
  // Stop() right after Start() cannot miss it and wait forever.
  while (!impl->server->is_running() && !impl->listener_done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return http;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (stopped_.exchange(true)) return;
  if (impl_ != nullptr && impl_->server != nullptr) impl_->server->stop();
  // listen_after_bind() returns once the pool's threads have finished.
  if (listener_.joinable()) listener_.join();
}

}  // namespace kiln::server::http
