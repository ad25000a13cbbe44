// Reads a serialized inference.ModelInferRequest without copying its tensors'
// bytes. protobuf's parser copies each raw_input_contents entry into a string
// of the message, and the decoder (tensor_codec.h) then copies it again into
// the input's tensor: for a 4.8 MB input about 0.5 ms per copy on the machine
// docs/performance.md describes. Here protobuf parses every other field, and
// each raw_input_contents entry stays where it arrived (gRPC's slices, the
// local socket's frame) as views that the decoder copies from once.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "inference/grpc_service.pb.h"

namespace kiln::server {

// raw_input_contents entries left in the buffers they arrived in.
struct RawInputs {
  // Entry i is raw_input_contents[i]: the concatenation of its pieces.
  std::vector<std::vector<absl::string_view>> entries;
  // Bytes no buffer of the front's holds (HTTP's JSON "data", converted),
  // for entries to point into; a deque, so that they never move.
  std::deque<std::string> owned;
};

// Parses the ModelInferRequest whose serialized bytes are the concatenation of
// `pieces`: its raw_input_contents entries into `raw` (views into `pieces`,
// whose bytes must outlive them), every other field into `request`. Bytes the
// reader does not take apart itself (a group, say) go to protobuf whole, and
// then the entries stay in `request`, `raw` empty. False when the bytes are
// not a well-formed ModelInferRequest.
bool ReadInferRequest(absl::Span<const absl::string_view> pieces,
                       inference::ModelInferRequest* request, RawInputs* raw);

}  // namespace kiln::server
