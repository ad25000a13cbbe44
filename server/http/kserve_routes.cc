#include "server/http/kserve_routes.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "inference/grpc_service.pb.h"
#include "server/core/call_log.h"
#include "server/core/inference_core.h"
#include "server/http/http_status.h"
#include "server/http/json_codec.h"
#include "server/security/access_policy.h"

namespace kiln::server::http {
namespace {

using security::Caller;

// A route's handler, given the caller its Authorization header identified.
using Handler = std::function<HttpResponse(const HttpRequest&, const Caller&)>;

constexpr char kHeaderLength[] = "Inference-Header-Content-Length";
// Path pieces: a model name, an optional version.
constexpr char kModel[] = "/v2/models/([^/]+)(?:/versions/([^/]+))?";

HttpResponse Json(std::string body, int status = 200) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

// A failed request: its HTTP status and {"error": ...}. Failures inside the
// core are logged there; the ones found here, and an inference's, are logged
// here under HTTP's name.
HttpResponse Error(const absl::Status& status, absl::string_view what = {},
                   absl::string_view model = {}) {
  if (!what.empty()) LogFailedCall(absl::StrCat("HTTP ", what), model, status);
  return Json(ErrorBody(status), HttpStatusFor(status.code()));
}

const std::string& Name(const HttpRequest& req) { return req.params.at(0); }
std::string Version(const HttpRequest& req) {
  return req.params.size() > 1 ? req.params[1] : std::string();
}

HttpResponse Infer(InferenceCore* core, const HttpRequest& req, const Caller& caller) {
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
  RawInputs raw;  // the inputs' bytes, left in req.body where they came binary
  absl::Status parsed = ParseInferRequest(req.body, header_length, &request, &format, &raw);
  if (!parsed.ok()) return Error(parsed, "infer", Name(req));
  inference::ModelInferResponse response;
  // The inference path gRPC's ModelInfer takes (server/core/infer_pipeline.h);
  // this thread waits for it. HTTP/1.1 has no deadline header: the time limits are
  // the server's --request-timeout-s and the request's "timeout" parameter. A
  // client that hangs up cancels the request (the engine looks between nodes).
  // The outputs stay in their tensors (server/core/raw_outputs.h): JSON data
  // is written from them, binary outputs sent from them after the JSON.
  InferCall call;
  call.cancelled = req.client_gone;
  auto outputs = std::make_shared<RawOutputs>();
  call.raw_outputs = outputs.get();
  absl::Status status = core->ModelInferSync(caller, request, &response, std::move(call), &raw);
  if (!status.ok()) return Error(status, "infer", Name(req));
  absl::StatusOr<EncodedResponse> encoded = EncodeInferResponse(response, format, outputs.get());
  if (!encoded.ok()) return Error(encoded.status(), "infer", Name(req));
  HttpResponse out = Json(std::move(encoded->body));
  if (encoded->header_length.has_value()) {
    out.content_type = "application/octet-stream";
    out.headers.emplace_back(kHeaderLength, std::to_string(*encoded->header_length));
    out.tail = std::move(encoded->binary);
    out.tail_owner = std::move(outputs);
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

HttpResponse Load(InferenceCore* core, const HttpRequest& req, const Caller& caller) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(Name(req));
  absl::Status parsed = LoadParameters(req, &request);
  if (!parsed.ok()) return Error(parsed, "load", Name(req));
  absl::StatusOr<ModelLoadResult> loaded = core->RepositoryModelLoad(caller, request);
  if (!loaded.ok()) return Error(loaded.status());
  return Json(loaded->contract_json.value_or(std::string()));
}

// `handler` behind the access check of `rpc`: a refused request is answered
// 401 or 403 (with the challenge RFC 6750 asks for) before anything runs.
std::function<HttpResponse(const HttpRequest&)> Authorized(const security::Authenticator* auth,
                                                           security::Rpc rpc, Handler handler) {
  return [auth, rpc, handler = std::move(handler)](const HttpRequest& req) {
    absl::StatusOr<Caller> caller = auth == nullptr
                                        ? Caller::Unchecked()
                                        : auth->Authenticate(rpc, req.Header("authorization"));
    if (caller.ok()) return handler(req, *caller);
    const absl::Status& status = caller.status();
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

std::vector<Route> KserveRoutes(InferenceCore* core, const security::Authenticator* auth) {
  using security::Rpc;
  std::vector<Route> routes;
  auto add = [&](const char* method, Rpc rpc, std::string pattern, Handler handler) {
    routes.push_back({method, std::move(pattern), Authorized(auth, rpc, std::move(handler))});
  };
  auto get = [&](Rpc rpc, std::string pattern, Handler handler) {
    add("GET", rpc, std::move(pattern), std::move(handler));
  };
  auto post = [&](Rpc rpc, std::string pattern, Handler handler) {
    add("POST", rpc, std::move(pattern), std::move(handler));
  };

  get(Rpc::kServerLive, "/v2/health/live", [core](const HttpRequest&, const Caller& caller) {
    inference::ServerLiveResponse response;
    absl::Status s = core->ServerLive(caller, &response);
    if (!s.ok()) return Error(s);
    return Json(response.live() ? R"({"live":true})" : R"({"live":false})",
                response.live() ? 200 : 503);
  });
  get(Rpc::kServerReady, "/v2/health/ready", [core](const HttpRequest&, const Caller& caller) {
    inference::ServerReadyResponse response;
    absl::Status s = core->ServerReady(caller, &response);
    if (!s.ok()) return Error(s);
    return Json(response.ready() ? R"({"ready":true})" : R"({"ready":false})",
                response.ready() ? 200 : 503);
  });
  get(Rpc::kServerMetadata, "/v2", [core](const HttpRequest&, const Caller& caller) {
    inference::ServerMetadataResponse response;
    absl::Status s = core->ServerMetadata(caller, &response);
    return s.ok() ? Json(ServerMetadataJson(response)) : Error(s);
  });
  // A model's statistics, or every model's (no name in the path).
  auto statistics = [core](const HttpRequest& req, const Caller& caller) {
    inference::ModelStatisticsRequest request;
    if (!req.params.empty()) {
      request.set_name(Name(req));
      request.set_version(Version(req));
    }
    inference::ModelStatisticsResponse response;
    absl::Status s = core->ModelStatistics(caller, request, &response);
    return s.ok() ? Json(ModelStatisticsJson(response)) : Error(s);
  };
  // Before the metadata route, which would take "stats" for a model name.
  get(Rpc::kModelStatistics, "/v2/models/stats", statistics);
  get(Rpc::kModelStatistics, absl::StrCat(kModel, "/stats"), statistics);
  get(Rpc::kModelReady, absl::StrCat(kModel, "/ready"),
      [core](const HttpRequest& req, const Caller& caller) {
        inference::ModelReadyRequest request;
        request.set_name(Name(req));
        request.set_version(Version(req));
        inference::ModelReadyResponse response;
        absl::Status s = core->ModelReady(caller, request, &response);
        if (!s.ok()) return Error(s);
        // KServe's body; Triton's status: 400 for a model that is not ready
        // (or not known), so a probe needs only the status.
        return Json(ModelReadyJson(Name(req), response.ready()), response.ready() ? 200 : 400);
      });
  get(Rpc::kModelMetadata, kModel, [core](const HttpRequest& req, const Caller& caller) {
    inference::ModelMetadataRequest request;
    request.set_name(Name(req));
    request.set_version(Version(req));
    inference::ModelMetadataResponse response;
    absl::Status s = core->ModelMetadata(caller, request, &response);
    return s.ok() ? Json(ModelMetadataJson(response)) : Error(s);
  });
  post(Rpc::kModelInfer, absl::StrCat(kModel, "/infer"),
       [core](const HttpRequest& req, const Caller& caller) { return Infer(core, req, caller); });

  post(Rpc::kRepositoryIndex, "/v2/repository/index",
       [core](const HttpRequest& req, const Caller& caller) {
         inference::RepositoryIndexRequest request;
         absl::Status s = ParseRepositoryIndexRequest(req.body, &request);
         if (!s.ok()) return Error(s, "repository index");
         inference::RepositoryIndexResponse response;
         s = core->RepositoryIndex(caller, request, &response);
         return s.ok() ? Json(RepositoryIndexJson(response)) : Error(s);
       });
  post(Rpc::kRepositoryModelLoad, "/v2/repository/models/([^/]+)/load",
       [core](const HttpRequest& req, const Caller& caller) { return Load(core, req, caller); });
  post(Rpc::kRepositoryModelUnload, "/v2/repository/models/([^/]+)/unload",
       [core](const HttpRequest& req, const Caller& caller) {
         inference::RepositoryModelUnloadRequest request;
         request.set_model_name(Name(req));
         absl::Status s = ParseRepositoryParameters(req.body, request.mutable_parameters());
         if (!s.ok()) return Error(s, "unload", Name(req));
         s = core->RepositoryModelUnload(caller, request);
         return s.ok() ? Json(std::string()) : Error(s);
       });

  // The system shared-memory extension (server/core/shared_memory.h), Triton's
  // routes: the region is the path's name, or every region without one.
  auto region = [](const HttpRequest& req) {
    return req.params.empty() ? std::string() : Name(req);
  };
  auto status = [core, region](const HttpRequest& req, const Caller& caller) {
    inference::SystemSharedMemoryStatusRequest request;
    request.set_name(region(req));
    inference::SystemSharedMemoryStatusResponse response;
    absl::Status s = core->SystemSharedMemoryStatus(caller, request, &response);
    return s.ok() ? Json(SharedMemoryStatusJson(response)) : Error(s);
  };
  auto unregister = [core, region](const HttpRequest& req, const Caller& caller) {
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(region(req));
    absl::Status s = core->SystemSharedMemoryUnregister(caller, request);
    return s.ok() ? Json(std::string()) : Error(s);
  };
  get(Rpc::kSystemSharedMemoryStatus, "/v2/systemsharedmemory/status", status);
  get(Rpc::kSystemSharedMemoryStatus, "/v2/systemsharedmemory/region/([^/]+)/status", status);
  post(Rpc::kSystemSharedMemoryRegister, "/v2/systemsharedmemory/region/([^/]+)/register",
       [core](const HttpRequest& req, const Caller& caller) {
         inference::SystemSharedMemoryRegisterRequest request;
         request.set_name(Name(req));
         absl::Status s = ParseSharedMemoryRegister(req.body, &request);
         if (!s.ok()) return Error(s, "shared-memory register", Name(req));
         s = core->SystemSharedMemoryRegister(caller, request);
         return s.ok() ? Json(std::string()) : Error(s);
       });
  post(Rpc::kSystemSharedMemoryUnregister, "/v2/systemsharedmemory/unregister", unregister);
  post(Rpc::kSystemSharedMemoryUnregister, "/v2/systemsharedmemory/region/([^/]+)/unregister",
       unregister);
  return routes;
}

}  // namespace kiln::server::http
