// An answer's raw outputs kept in their tensors (EncodeOutputs with
// `raw_outputs`, InferCall::raw_outputs), for a front that sends each one's
// bytes from the tensor after the rest of the message (proto/local/entry_head.h)
// instead of copying them into raw_output_contents and serializing them.
#pragma once

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/common/tensor.h"

namespace kiln::server {

struct RawOutputs {
  // entries[i] goes with response.outputs(i): its tensor, or nullopt for an
  // output written to shared memory (an empty entry on the wire).
  std::vector<std::optional<Tensor>> entries;

  absl::string_view bytes(size_t i) const {
    if (!entries[i].has_value()) return absl::string_view();
    return absl::string_view(static_cast<const char*>(entries[i]->raw_data()),
                             entries[i]->byte_size());
  }
};

}  // namespace kiln::server
