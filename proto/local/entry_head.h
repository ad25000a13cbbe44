// What precedes a length-delimited field's bytes on protobuf's wire: its tag
// and its length. Protobuf's wire format lets a repeated field's entries
// follow the rest of the message, so a sender can serialize a ModelInfer
// message without its raw_input_contents / raw_output_contents and send each
// entry as EntryHead + the bytes from where they lie (a tensor, a string),
// instead of copying them into the message and again into its serialization.
// Used by the client (both transports) and kilnd's local socket.
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln::local_wire {

class EntryHead {
 public:
  EntryHead(int field_number, uint64_t bytes) {
    using google::protobuf::internal::WireFormatLite;
    using google::protobuf::io::CodedOutputStream;
    uint8_t* end = CodedOutputStream::WriteTagToArray(
        WireFormatLite::MakeTag(field_number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), bytes_);
    end = CodedOutputStream::WriteVarint64ToArray(bytes, end);
    size_ = static_cast<size_t>(end - bytes_);
  }
  absl::string_view view() const {
    return absl::string_view(reinterpret_cast<const char*>(bytes_), size_);
  }

 private:
  uint8_t bytes_[16];  // a tag of at most 5 bytes, a varint of at most 10
  size_t size_ = 0;
};

// A serialized message followed by entries of its length-delimited field
// `field_number`, as the pieces to write one after another (WriteFrame): the
// message, then each entry's head and its bytes, left where they lie. The
// bytes must outlive the pieces.
class EntriesAfterMessage {
 public:
  EntriesAfterMessage(std::string message, int field_number)
      : message_(std::move(message)), field_number_(field_number) {
    pieces_.push_back(message_);
  }
  EntriesAfterMessage(const EntriesAfterMessage&) = delete;  // pieces_ points into it
  EntriesAfterMessage& operator=(const EntriesAfterMessage&) = delete;

  void Add(absl::string_view bytes) {
    pieces_.push_back(heads_.emplace_back(field_number_, bytes.size()).view());
    pieces_.push_back(bytes);
  }
  absl::Span<const absl::string_view> pieces() const { return pieces_; }

 private:
  const std::string message_;
  const int field_number_;
  std::deque<EntryHead> heads_;  // never move once added
  std::vector<absl::string_view> pieces_;
};

}  // namespace kiln::local_wire
