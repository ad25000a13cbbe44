// SHA-256 of a byte string, as lowercase hex: the content identity of a model file.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

std::string Sha256Hex(absl::string_view bytes);

}  // namespace kiln
