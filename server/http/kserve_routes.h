// The routes of the Open Inference Protocol's HTTP/REST binding (KServe v2
// REST, with Triton's binary tensor data, model repository and statistics
// extensions). Each handler only translates: the HTTP request becomes the
// protobuf request of the operation (server/http/json_codec.h), the core both
// protocols share answers it (server/core/inference_core.h), and its answer or
// its status goes back as JSON (server/http/http_status.h). So both protocols
// serve the same models with the same validation and the same messages.
//
//   GET  /v2/health/live                                   200 {"live": true}
//   GET  /v2/health/ready                                  200 {"ready": true}, else 503
//   GET  /v2                                               server metadata
//   GET  /v2/models/stats                                  statistics of every model
//   GET  /v2/models/NAME[/versions/V]                      model metadata
//   GET  /v2/models/NAME[/versions/V]/ready                200 when ready, else 400
//   GET  /v2/models/NAME[/versions/V]/stats                statistics
//   POST /v2/models/NAME[/versions/V]/infer                inference (JSON or binary tensors)
//   POST /v2/repository/index                              the repository's models
//   POST /v2/repository/models/NAME/load                   load, or upload a model file
//   POST /v2/repository/models/NAME/unload                 unload
//
// A load answers the model's contract (server/core/model_contract.h) as its
// body. An upload sends the model file either as the whole body (Content-Type
// application/octet-stream; query parameters version (default 1), config and
// sha256), or, as Triton's clients do, in a JSON body
// {"parameters": {"file:1/model.pt": "<base64>", "config": "<json>"}}.
//
// Each route names the RPC it translates to; before its handler runs, the
// request's Authorization header is checked for that RPC by the policy both
// protocols share (server/security/access_policy.h): 401 without a valid
// bearer token (with WWW-Authenticate: Bearer), 403 when the token's role may
// not make the call. The caller it finds is what the core is told.
#pragma once

#include <vector>

#include "server/http/http_server.h"

namespace kiln::server {
class InferenceCore;
namespace security {
class Authenticator;
}  // namespace security
}  // namespace kiln::server

namespace kiln::server::http {

// The routes above over `core`, checked by `auth` (null: no checks); both
// must outlive the HTTP server.
std::vector<Route> KserveRoutes(InferenceCore* core, const security::Authenticator* auth = nullptr);

}  // namespace kiln::server::http
