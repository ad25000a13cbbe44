#include "server/core/infer_request_reader.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kiln::server {
namespace {

// ModelInferRequest's raw_input_contents: field 7, length-delimited.
constexpr uint32_t kRawInputContents = 7;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads forward through the concatenation of the pieces.
class Cursor {
 public:
  explicit Cursor(absl::Span<const absl::string_view> pieces) : pieces_(pieces) { SkipEmpty(); }

  bool done() const { return piece_ == pieces_.size(); }

  bool Byte(uint8_t* out) {
    if (done()) return false;
    *out = static_cast<uint8_t>(pieces_[piece_][offset_]);
    Advance(1);
    return true;
  }

  // A base-128 varint of at most 10 bytes.
  bool Varint(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = 0;
      if (!Byte(&b)) return false;
      value |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;
  }

  // The next `n` bytes as views (each within one piece); false past the end.
  bool Views(uint64_t n, std::vector<absl::string_view>* out) {
    while (n > 0) {
      if (done()) return false;
      const absl::string_view piece = pieces_[piece_];
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, piece.size() - offset_));
      if (out != nullptr) out->push_back(piece.substr(offset_, take));
      Advance(take);
      n -= take;
    }
    return true;
  }

  // The next `n` bytes appended to `out`; false past the end.
  bool Append(uint64_t n, std::string* out) {
    while (n > 0) {
      if (done()) return false;
      const absl::string_view piece = pieces_[piece_];
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, piece.size() - offset_));
      out->append(piece.data() + offset_, take);
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == pieces_[piece_].size()) {
      ++piece_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (piece_ < pieces_.size() && pieces_[piece_].empty()) ++piece_;
  }

  absl::Span<const absl::string_view> pieces_;
  size_t piece_ = 0;
  size_t offset_ = 0;
};

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Splits the message: raw_input_contents entries into `raw`, every other
// field's bytes (tag and value, re-encoded canonically) into `rest`. False on
// anything else: a truncated field, a group, field number 0.
bool Split(absl::Span<const absl::string_view> pieces, std::string* rest, RawInputs* raw) {
  Cursor in(pieces);
  while (!in.done()) {
    uint64_t tag = 0;
    if (!in.Varint(&tag) || tag > UINT32_MAX || (tag >> 3) == 0) return false;
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire = static_cast<uint32_t>(tag & 7);
    if (field == kRawInputContents && wire == kLengthDelimited) {
      uint64_t length = 0;
      if (!in.Varint(&length)) return false;
      std::vector<absl::string_view>& entry = raw->entries.emplace_back();
      if (!in.Views(length, &entry)) return false;
      continue;
    }
    AppendVarint(tag, rest);
    switch (wire) {
      case kVarint: {
        uint64_t value = 0;
        if (!in.Varint(&value)) return false;
        AppendVarint(value, rest);
        break;
      }
      case kFixed64:
        if (!in.Append(8, rest)) return false;
        break;
      case kFixed32:
        if (!in.Append(4, rest)) return false;
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        if (!in.Varint(&length)) return false;
        AppendVarint(length, rest);
        if (!in.Append(length, rest)) return false;
        break;
      }
      default:  // groups (deprecated) and invalid wire types
        return false;
    }
  }
  return true;
}

}  // namespace

bool ReadInferRequest(absl::Span<const absl::string_view> pieces,
                       inference::ModelInferRequest* request, RawInputs* raw) {
  raw->entries.clear();
  std::string rest;
  if (Split(pieces, &rest, raw)) return request->ParseFromString(rest);
  // What Split does not take apart, protobuf's own parser decides on.
  raw->entries.clear();
  std::string whole;
  for (absl::string_view piece : pieces) whole.append(piece.data(), piece.size());
  return request->ParseFromString(whole);
}

}  // namespace kiln::server
