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

  // A base-128 varint of at most `max_bytes` bytes, its bytes appended to
  // `bytes` as they were (null: dropped); `*canonical`: without redundant
  // trailing zero groups.
  bool Varint(int max_bytes, uint64_t* out, std::string* bytes, bool* canonical) {
    uint64_t value = 0;
    for (int i = 0; i < max_bytes; ++i) {
      uint8_t b = 0;
      if (!Byte(&b)) return false;
      if (bytes != nullptr) bytes->push_back(static_cast<char>(b));
      if (i < 10) value |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *out = value;
        *canonical = i == 0 || b != 0;
        return true;
      }
    }
    return false;
  }

  // The next `n` bytes as views (each within one piece); false past the end.
  bool Views(uint64_t n, std::vector<absl::string_view>* out) {
    return Take(n, [out](absl::string_view bytes) { out->push_back(bytes); });
  }

  // The next `n` bytes appended to `out`; false past the end.
  bool Append(uint64_t n, std::string* out) {
    return Take(n, [out](absl::string_view bytes) { out->append(bytes.data(), bytes.size()); });
  }

 private:
  // Hands the next `n` bytes to `sink`, one view per piece they span.
  template <typename Sink>
  bool Take(uint64_t n, Sink sink) {
    while (n > 0) {
      if (done()) return false;
      const absl::string_view piece = pieces_[piece_];
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, piece.size() - offset_));
      sink(piece.substr(offset_, take));
      Advance(take);
      n -= take;
    }
    return true;
  }
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

// Splits the message: raw_input_contents entries into `raw`, every other
// field's bytes, exactly as they came, into `rest`. False for anything
// protobuf might judge otherwise than the split makes it look: an entry of
// field 7 not tagged by its one canonical byte or with a length not in its
// canonical encoding, a tag longer than protobuf reads (5 bytes), a varint
// longer than 10 bytes, a length of 2 GiB or more, a group, field number 0,
// a truncated field. The caller then hands the whole message to protobuf.
bool Split(absl::Span<const absl::string_view> pieces, std::string* rest, RawInputs* raw) {
  Cursor in(pieces);
  const uint64_t raw_tag = (kRawInputContents << 3) | kLengthDelimited;
  while (!in.done()) {
    std::string field_bytes;
    uint64_t tag = 0;
    bool canonical = false;
    if (!in.Varint(5, &tag, &field_bytes, &canonical) || tag > UINT32_MAX || (tag >> 3) == 0) {
      return false;
    }
    if ((tag >> 3) == kRawInputContents && (tag & 7) == kLengthDelimited) {
      if (field_bytes.size() != 1 || tag != raw_tag) return false;
      uint64_t length = 0;
      if (!in.Varint(5, &length, nullptr, &canonical) || !canonical || length > INT32_MAX) {
        return false;
      }
      std::vector<absl::string_view>& entry = raw->entries.emplace_back();
      if (!in.Views(length, &entry)) return false;
      continue;
    }
    switch (static_cast<uint32_t>(tag & 7)) {
      case kVarint: {
        uint64_t value = 0;
        if (!in.Varint(10, &value, &field_bytes, &canonical)) return false;
        break;
      }
      case kFixed64:
        if (!in.Append(8, &field_bytes)) return false;
        break;
      case kFixed32:
        if (!in.Append(4, &field_bytes)) return false;
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        if (!in.Varint(5, &length, &field_bytes, &canonical) || length > INT32_MAX) return false;
        rest->append(field_bytes);  // the payload straight after, without a detour
        field_bytes.clear();
        if (!in.Append(length, rest)) return false;
        break;
      }
      default:  // groups (deprecated) and invalid wire types
        return false;
    }
    rest->append(field_bytes);
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
