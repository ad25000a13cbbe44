// Bearer tokens and their roles, from the file --auth-tokens names: one
// "ROLE TOKEN" pair per line, blank lines and lines starting with '#' ignored,
// ROLE one of `infer` and `admin`. Only each token's SHA-256 is kept, and a
// presented token is looked up by comparing its digest with every entry in
// constant time, so neither the time taken nor a memory dump gives a token
// away.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server::security {

enum class Role { kInfer, kAdmin };

// "infer" or "admin".
absl::string_view RoleName(Role role);

// Tokens shorter than this are refused at start-up: a bearer token is a
// password that every client sends.
constexpr size_t kMinTokenLength = 16;

class TokenTable {
 public:
  // Parses the file's text. InvalidArgument naming the line (never quoting
  // the token) for a line that is not "ROLE TOKEN", an unknown role, a token
  // shorter than kMinTokenLength or with characters outside RFC 6750's
  // token68 set, a token given twice, or a file without any token.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text);

  // The role of `token`, or nullopt when it is not in the table. Takes the
  // same time whichever entry (or none) matches.
  std::optional<Role> Find(absl::string_view token) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::array<uint8_t, 32> digest;
    Role role;
  };
  std::vector<Entry> entries_;
};

}  // namespace kiln::server::security
