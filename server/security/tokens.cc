#include "server/security/tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln::server::security {
namespace {

std::array<uint8_t, 32> Digest(absl::string_view token) {
  std::array<uint8_t, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  return digest;
}

// RFC 6750's b64token: what may follow "Bearer " in an Authorization header.
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
         c == '~' || c == '+' || c == '/' || c == '=';
}

}  // namespace

absl::string_view RoleName(Role role) { return role == Role::kAdmin ? "admin" : "infer"; }

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text) {
  TokenTable table;
  std::vector<int> lines;  // the line of each entry, for duplicates
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat("line ", line_number, ": ");
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "expected 'ROLE TOKEN' (two fields), found ", fields.size(), " fields"));
    }
    Role role;
    if (fields[0] == "infer") {
      role = Role::kInfer;
    } else if (fields[0] == "admin") {
      role = Role::kAdmin;
    } else {
      // The role field is not secret, but it may be a token written first:
      // say only how long it is.
      return absl::InvalidArgumentError(absl::StrCat(
          where, "unknown role (a word of ", fields[0].size(),
          " characters); the roles are 'infer' and 'admin', and the role comes first"));
    }
    const absl::string_view token = fields[1];
    if (token.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "the token has ", token.size(), " characters, fewer than the ",
                       kMinTokenLength, " required (make one with `openssl rand -hex 32`)"));
    }
    for (char c : token) {
      if (!IsTokenChar(c)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where,
            "the token has a character a bearer token cannot carry (allowed: letters, digits and "
            "- . _ ~ + / =)"));
      }
    }
    Entry entry{Digest(token), role};
    for (size_t i = 0; i < table.entries_.size(); ++i) {
      if (table.entries_[i].digest == entry.digest) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the same token is already given on line ", lines[i],
                         "; give each token once, with its one role"));
      }
    }
    table.entries_.push_back(entry);
    lines.push_back(line_number);
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(
        "the token file holds no token (expected lines 'ROLE TOKEN', ROLE infer or admin)");
  }
  return table;
}

std::optional<Role> TokenTable::Find(absl::string_view token) const {
  // Hashing first makes every comparison 32 bytes whatever the lengths; every
  // entry is compared, and the match is selected without a branch on it.
  const std::array<uint8_t, 32> digest = Digest(token);
  int found = -1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int equal = CRYPTO_memcmp(digest.data(), entries_[i].digest.data(), digest.size()) == 0;
    const int mask = -equal;  // all ones when equal
    found = (found & ~mask) | (static_cast<int>(i) & mask);
  }
  if (found < 0) return std::nullopt;
  return entries_[found].role;
}

}  // namespace kiln::server::security
