// The text of an nlohmann JSON value, for any text that may hold bytes from a
// client or a model file (names, messages, ops): bytes that are not UTF-8 are
// replaced with U+FFFD, where nlohmann's plain dump() throws (type_error 316),
// on whatever thread writes it: an HTTP handler, a compute thread answering a
// profiled request, the log. Use it instead of dump().
#pragma once

#include <string>

namespace kiln {

// `Json` is nlohmann::json or nlohmann::ordered_json; compact; `ascii`: escape
// every non-ASCII character (for gRPC metadata).
template <typename Json>
std::string JsonText(const Json& value, bool ascii = false) {
  return value.dump(-1, ' ', ascii, Json::error_handler_t::replace);
}

}  // namespace kiln
