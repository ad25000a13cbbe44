// Kiln's local inference protocol: the Open Inference Protocol's ModelInfer
// over a Unix domain socket, for clients on the same machine as kilnd
// (kilnd --local-socket PATH; the client's ClientOptions::local_socket).
//
// Why a second transport: a gRPC call costs kilnd about 0.7 ms of CPU on the
// thread that receives it (HTTP/2 framing and its cold code after an idle
// gap) before the model runs, more than a small CNN's budget for serving
// (docs/performance.md). Here a request is one read of one frame.
//
// The messages are the gRPC protocol's own (inference.ModelInferRequest and
// ModelInferResponse, shared-memory inputs included), so nothing about
// validation, batching or statistics differs; only the framing is Kiln's:
//
//   frame  = size (4 bytes, little endian: the bytes after the kind)
//            kind (1 byte)
//            body (size bytes)
//   kinds  = kAuthorization   client -> kilnd: the "authorization" value
//                             ("Bearer TOKEN") for the requests that follow
//                             on this connection; answered by a kStatus frame
//            kInferRequest    client -> kilnd: a serialized ModelInferRequest
//            kInferResponse   kilnd -> client: a serialized ModelInferResponse
//            kStatus          kilnd -> client: a request's error (or the
//                             answer to kAuthorization): EncodeStatus's body
//
// One answer per request. A client that sends several requests before
// reading matches answers by the request's id (ModelInferResponse.id, and the
// id in a kStatus body), since they finish in any order. A frame kilnd cannot
// read (an unknown kind, a size past its limit, a body that does not parse)
// is answered by a kStatus frame, then the connection is closed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln::local_wire {

enum class FrameKind : uint8_t {
  kAuthorization = 1,
  kInferRequest = 2,
  kInferResponse = 3,
  kStatus = 4,
};

struct Frame {
  FrameKind kind = FrameKind::kStatus;
  // The body in the 1 MiB pieces it was read into (the last one shorter):
  // memory is taken as bytes arrive, never for a declared size ahead of
  // them, and no byte is copied to grow the body.
  std::vector<std::string> chunks;

  size_t size() const;
  std::string Body() const;  // the chunks joined (for small frames)
};

// Writes one frame (header and body in one writev where possible). Unavailable
// when the peer has gone; never raises SIGPIPE.
absl::Status WriteFrame(int fd, FrameKind kind, absl::string_view body);
// The same, the body given as pieces written one after another from where
// they lie (one sendmsg for up to IOV_MAX of them).
absl::Status WriteFrame(int fd, FrameKind kind, absl::Span<const absl::string_view> body);

// Reads one frame. OutOfRange at a clean end of the stream (the peer closed
// between frames), Unavailable for a read error or a stream cut inside a
// frame, InvalidArgument for an unknown kind or a size past `max_body_bytes`
// (the body is not read: the stream cannot be trusted after it). The body
// grows as its bytes arrive, never to a declared size ahead of them.
absl::Status ReadFrame(int fd, uint32_t max_body_bytes, Frame* frame);

// A kStatus body: the code (4 bytes, little endian), the request id's length
// (4 bytes) and bytes, then the message.
std::string EncodeStatus(const absl::Status& status, absl::string_view request_id);
// InvalidArgument when `body` is not one; otherwise the status it carries
// (OK included) in `status`, and its request id.
absl::Status DecodeStatus(absl::string_view body, absl::Status* status, std::string* request_id);

}  // namespace kiln::local_wire
