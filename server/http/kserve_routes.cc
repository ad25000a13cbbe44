#include "server/http/kserve_routes.h"

#include <grpcpp/server_context.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "inference/grpc_service.pb.h"
#include "server/http/http_status.h"
#include "server/http/json_codec.h"
#include "server/core/infer_pipeline.h"
#include "server/grpc/inference_service.h"
#include "server/security/access_policy.h"

namespace kiln::server::http {
namespace {

constexpr char kHeaderLength[] = "Inference-Header-Content-Length";
// The gRPC handler of RepositoryModelLoad answers with the model's contract in
// this trailing metadata entry (RepositoryModelLoadResponse has no fields);
// over HTTP it is the response body.
constexpr char kContractTrailer[] = "kiln-contract";
// Path pieces: a model name, an optional version.
constexpr char kModel[] = "/v2/models/([^/]+)(?:/versions/([^/]+))?";

// The gRPC status as Kiln's status: the codes are the same canonical codes.
absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

HttpResponse Json(std::string body, int status = 200) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

// A failed request: its HTTP status and {"error": ...}. Failures inside the
// shared handlers are logged there; the ones found here are logged here.
HttpResponse Error(const absl::Status& status, absl::string_view what = {},
                   absl::string_view model = {}) {
  if (!what.empty()) {
    spdlog::warn("HTTP {} '{}' failed: {}: {}", std::string(what), absl::CHexEscape(model),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  }
  return Json(ErrorBody(status), HttpStatusFor(status.code()));
}

// Calls one of the service's unary handlers as gRPC would, outside a call:
// with a server context of its own (no deadline, never cancelled) that
// carries the HTTP request's Authorization as gRPC metadata, for the
// handler's own check (the route's was made already, so it passes).
template <typename Request, typename Response>
absl::Status Call(InferenceService* service,
                  grpc::Status (InferenceService::*method)(grpc::ServerContext*, const Request*,
                                                           Response*),
                  const HttpRequest& http, const Request& request, Response* response,
                  grpc::ServerContext* context = nullptr) {
  grpc::ServerContext local;
  if (context == nullptr) context = &local;
  // The spouse owns the metadata's strings (the context holds views of
  // them): it lives until the handler has returned.
  grpc::testing::ServerContextTestSpouse spouse(context);
  if (const std::string authorization = http.Header("authorization"); !authorization.empty()) {
    spouse.AddClientMetadata("authorization", authorization);
  }
  return FromGrpc((service->*method)(context, &request, response));
}

const std::string& Name(const HttpRequest& req) { return req.params.at(0); }
std::string Version(const HttpRequest& req) {
  return req.params.size() > 1 ? req.params[1] : std::string();
}

HttpResponse Infer(InferenceService* service, const HttpRequest& req) {
  inference::ModelInferRequest request;
  request.set_model_name(Name(req));
  request.set_model_version(Version(req));
  std::optional<size_t> header_length;
  if (const std::string value = req.Header(absl::AsciiStrToLower(kHeaderLength)); !value.empty()) {
    size_t n = 0;
    if (!absl::SimpleAtoi(value, &n)) {
      return Error(absl::InvalidArgumentError(absl::StrCat(
                       kHeaderLength, " must be a byte count, got '", absl::CHexEscape(value), "'")),
                   "infer", Name(req));
    }
    header_length = n;
  }
  OutputFormat format;
  absl::Status parsed = ParseInferRequest(req.body, header_length, &request, &format);
  if (!parsed.ok()) return Error(parsed, "infer", Name(req));
  inference::ModelInferResponse response;
  // The inference path gRPC's ModelInfer takes (server/core/infer_pipeline.h); this
  // thread waits for it. HTTP/1.1 has no deadline header: the time limits are
  // the server's --request-timeout-s and the request's "timeout" parameter. A
  // client that hangs up cancels the request (the engine looks between nodes).
  InferCall call;
  call.cancelled = req.client_gone;
  absl::Status status = service->pipeline().InferSync(request, &response, std::move(call));
  if (!status.ok()) return Error(status, "infer", Name(req));
  absl::StatusOr<EncodedResponse> encoded = EncodeInferResponse(response, format);
  if (!encoded.ok()) return Error(encoded.status(), "infer", Name(req));
  HttpResponse out = Json(std::move(encoded->body));
  if (encoded->header_length.has_value()) {
    out.content_type = "application/octet-stream";
    out.headers.emplace_back(kHeaderLength, std::to_string(*encoded->header_length));
  }
  return out;
}

// The body of a load: Triton's JSON parameters, or the model file itself.
absl::Status LoadParameters(const HttpRequest& req, inference::RepositoryModelLoadRequest* load) {
  const std::string type = absl::AsciiStrToLower(req.Header("content-type"));
  const size_t first = req.body.find_first_not_of(" \t\r\n");
  const bool json = type.rfind("application/json", 0) == 0 ||
                    (type.empty() && first != std::string::npos && req.body[first] == '{');
  if (json || first == std::string::npos) {
    return ParseRepositoryParameters(req.body, load->mutable_parameters());
  }
  // The file as the body; the rest in the query, under the gRPC names.
  std::string version = req.HasQuery("version") ? req.Query("version") : "1";
  auto& params = *load->mutable_parameters();
  // The name only says where the file goes; its format is told by its content.
  params[absl::StrCat("file:", version, "/model.pt")].set_bytes_param(req.body);
  for (const char* key : {"config", "sha256"}) {
    if (req.HasQuery(key)) params[key].set_string_param(req.Query(key));
  }
  for (const auto& [key, value] : req.query) {
    if (key != "version" && key != "config" && key != "sha256") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown query parameter '", absl::CHexEscape(key), "' (expected version, config, sha256)"));
    }
  }
  return absl::OkStatus();
}

HttpResponse Load(InferenceService* service, const HttpRequest& req) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(Name(req));
  absl::Status parsed = LoadParameters(req, &request);
  if (!parsed.ok()) return Error(parsed, "load", Name(req));
  inference::RepositoryModelLoadResponse response;
  grpc::ServerContext context;
  absl::Status status =
      Call(service, &InferenceService::RepositoryModelLoad, req, request, &response, &context);
  if (!status.ok()) return Error(status);
  // The contract the gRPC handler sends as trailing metadata. The test
  // spouse is grpc++'s public way to read a context's metadata outside a call.
  const auto trailers = grpc::testing::ServerContextTestSpouse(&context).GetTrailingMetadata();
  const auto contract = trailers.find(kContractTrailer);
  return Json(contract != trailers.end() ? contract->second : std::string());
}

// `handler` behind the access check of `rpc`: a refused request is answered
// 401 or 403 (with the challenge RFC 6750 asks for) before anything runs.
std::function<HttpResponse(const HttpRequest&)> Authorized(
    const security::Authenticator* auth, security::Rpc rpc,
    std::function<HttpResponse(const HttpRequest&)> handler) {
  if (auth == nullptr || !auth->enabled() ||
      security::RequiredAccess(rpc) == security::Access::kPublic) {
    return handler;
  }
  return [auth, rpc, handler = std::move(handler)](const HttpRequest& req) {
    const absl::Status status = auth->Check(rpc, req.Header("authorization"));
    if (status.ok()) return handler(req);
    spdlog::warn("refused HTTP {} {}: {}", req.method, absl::CHexEscape(req.path),
                 std::string(status.message()));
    HttpResponse response = Error(status);
    if (status.code() == absl::StatusCode::kUnauthenticated) {
      response.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="kiln")");
    }
    return response;
  };
}

}  // namespace

std::vector<Route> KserveRoutes(InferenceService* service, const security::Authenticator* auth) {
  using security::Rpc;
  std::vector<Route> routes;
  auto add = [&](const char* method, Rpc rpc, std::string pattern,
                 std::function<HttpResponse(const HttpRequest&)> handler) {
    routes.push_back({method, std::move(pattern), Authorized(auth, rpc, std::move(handler))});
  };
  auto get = [&](Rpc rpc, std::string pattern,
                 std::function<HttpResponse(const HttpRequest&)> handler) {
    add("GET", rpc, std::move(pattern), std::move(handler));
  };
  auto post = [&](Rpc rpc, std::string pattern,
                  std::function<HttpResponse(const HttpRequest&)> handler) {
    add("POST", rpc, std::move(pattern), std::move(handler));
  };

  get(Rpc::kServerLive, "/v2/health/live", [service](const HttpRequest& req) {
    inference::ServerLiveResponse response;
    absl::Status s = Call(service, &InferenceService::ServerLive, req, {}, &response);
    if (!s.ok()) return Error(s);
    return Json(response.live() ? R"({"live":true})" : R"({"live":false})",
                response.live() ? 200 : 503);
  });
  get(Rpc::kServerReady, "/v2/health/ready", [service](const HttpRequest& req) {
    inference::ServerReadyResponse response;
    absl::Status s = Call(service, &InferenceService::ServerReady, req, {}, &response);
    if (!s.ok()) return Error(s);
    return Json(response.ready() ? R"({"ready":true})" : R"({"ready":false})",
                response.ready() ? 200 : 503);
  });
  get(Rpc::kServerMetadata, "/v2", [service](const HttpRequest& req) {
    inference::ServerMetadataResponse response;
    absl::Status s = Call(service, &InferenceService::ServerMetadata, req, {}, &response);
    return s.ok() ? Json(ServerMetadataJson(response)) : Error(s);
  });
  // Before the metadata route, which would take "stats" for a model name.
  get(Rpc::kModelStatistics, "/v2/models/stats", [service](const HttpRequest& req) {
    inference::ModelStatisticsResponse response;
    absl::Status s = Call(service, &InferenceService::ModelStatistics, req, {}, &response);
    return s.ok() ? Json(ModelStatisticsJson(response)) : Error(s);
  });
  get(Rpc::kModelStatistics, absl::StrCat(kModel, "/stats"), [service](const HttpRequest& req) {
    inference::ModelStatisticsRequest request;
    request.set_name(Name(req));
    request.set_version(Version(req));
    inference::ModelStatisticsResponse response;
    absl::Status s = Call(service, &InferenceService::ModelStatistics, req, request, &response);
    return s.ok() ? Json(ModelStatisticsJson(response)) : Error(s);
  });
  get(Rpc::kModelReady, absl::StrCat(kModel, "/ready"), [service](const HttpRequest& req) {
    inference::ModelReadyRequest request;
    request.set_name(Name(req));
    request.set_version(Version(req));
    inference::ModelReadyResponse response;
    absl::Status s = Call(service, &InferenceService::ModelReady, req, request, &response);
    if (!s.ok()) return Error(s);
    // KServe's body; Triton's status: 400 for a model that is not ready (or
    // not known), so a probe needs only the status.
    return Json(ModelReadyJson(Name(req), response.ready()), response.ready() ? 200 : 400);
  });
  get(Rpc::kModelMetadata, kModel, [service](const HttpRequest& req) {
    inference::ModelMetadataRequest request;
    request.set_name(Name(req));
    request.set_version(Version(req));
    inference::ModelMetadataResponse response;
    absl::Status s = Call(service, &InferenceService::ModelMetadata, req, request, &response);
    return s.ok() ? Json(ModelMetadataJson(response)) : Error(s);
  });
  post(Rpc::kModelInfer, absl::StrCat(kModel, "/infer"),
       [service](const HttpRequest& req) { return Infer(service, req); });

  post(Rpc::kRepositoryIndex, "/v2/repository/index", [service](const HttpRequest& req) {
    inference::RepositoryIndexRequest request;
    absl::Status s = ParseRepositoryIndexRequest(req.body, &request);
    if (!s.ok()) return Error(s, "repository index");
    inference::RepositoryIndexResponse response;
    s = Call(service, &InferenceService::RepositoryIndex, req, request, &response);
    return s.ok() ? Json(RepositoryIndexJson(response)) : Error(s);
  });
  post(Rpc::kRepositoryModelLoad, "/v2/repository/models/([^/]+)/load",
       [service](const HttpRequest& req) { return Load(service, req); });
  post(Rpc::kRepositoryModelUnload, "/v2/repository/models/([^/]+)/unload",
       [service](const HttpRequest& req) {
         inference::RepositoryModelUnloadRequest request;
         request.set_model_name(Name(req));
         absl::Status s = ParseRepositoryParameters(req.body, request.mutable_parameters());
         if (!s.ok()) return Error(s, "unload", Name(req));
         inference::RepositoryModelUnloadResponse response;
         s = Call(service, &InferenceService::RepositoryModelUnload, req, request, &response);
         return s.ok() ? Json(std::string()) : Error(s);
       });

  // The system shared-memory extension (server/core/shared_memory.h), Triton's routes.
  auto status = [service](const HttpRequest& req, const std::string& name) {
    inference::SystemSharedMemoryStatusRequest request;
    request.set_name(name);
    inference::SystemSharedMemoryStatusResponse response;
    absl::Status s =
        Call(service, &InferenceService::SystemSharedMemoryStatus, req, request, &response);
    return s.ok() ? Json(SharedMemoryStatusJson(response)) : Error(s);
  };
  auto unregister = [service](const HttpRequest& req, const std::string& name) {
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(name);
    inference::SystemSharedMemoryUnregisterResponse response;
    absl::Status s =
        Call(service, &InferenceService::SystemSharedMemoryUnregister, req, request, &response);
    return s.ok() ? Json(std::string()) : Error(s);
  };
  get(Rpc::kSystemSharedMemoryStatus, "/v2/systemsharedmemory/status",
      [status](const HttpRequest& req) { return status(req, ""); });
  get(Rpc::kSystemSharedMemoryStatus, "/v2/systemsharedmemory/region/([^/]+)/status",
      [status](const HttpRequest& req) { return status(req, Name(req)); });
  post(Rpc::kSystemSharedMemoryRegister, "/v2/systemsharedmemory/region/([^/]+)/register",
       [service](const HttpRequest& req) {
         inference::SystemSharedMemoryRegisterRequest request;
         request.set_name(Name(req));
         absl::Status s = ParseSharedMemoryRegister(req.body, &request);
         if (!s.ok()) return Error(s, "shared-memory register", Name(req));
         inference::SystemSharedMemoryRegisterResponse response;
         s = Call(service, &InferenceService::SystemSharedMemoryRegister, req, request, &response);
         return s.ok() ? Json(std::string()) : Error(s);
       });
  post(Rpc::kSystemSharedMemoryUnregister, "/v2/systemsharedmemory/unregister",
       [unregister](const HttpRequest& req) { return unregister(req, ""); });
  post(Rpc::kSystemSharedMemoryUnregister, "/v2/systemsharedmemory/region/([^/]+)/unregister",
       [unregister](const HttpRequest& req) { return unregister(req, Name(req)); });
  return routes;
}

}  // namespace kiln::server::http
