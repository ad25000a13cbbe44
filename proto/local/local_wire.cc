#include "proto/local/local_wire.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::local_wire {
namespace {

constexpr size_t kHeaderBytes = 5;
// ReadFrame grows a body by at most this much per read.
constexpr size_t kReadStep = size_t{1} << 20;

void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

bool KnownKind(uint8_t kind) {
  return kind >= static_cast<uint8_t>(FrameKind::kAuthorization) &&
         kind <= static_cast<uint8_t>(FrameKind::kStatus);
}

// Reads exactly `n` bytes; how many it got before the stream ended or failed.
size_t ReadFully(int fd, char* data, size_t n, int* error) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, data + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *error = r < 0 ? errno : 0;
      return got;
    }
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

size_t Frame::size() const {
  size_t n = 0;
  for (const std::string& chunk : chunks) n += chunk.size();
  return n;
}

std::string Frame::Body() const {
  std::string body;
  body.reserve(size());
  for (const std::string& chunk : chunks) body += chunk;
  return body;
}

absl::Status WriteFrame(int fd, FrameKind kind, absl::string_view body) {
  return WriteFrame(fd, kind, absl::MakeConstSpan(&body, 1));
}

absl::Status WriteFrame(int fd, FrameKind kind, absl::Span<const absl::string_view> body) {
  size_t size = 0;
  for (absl::string_view piece : body) size += piece.size();
  if (size > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("a local-socket frame holds at most 4 GiB, this one ", size, " bytes"));
  }
  char header[kHeaderBytes];
  PutU32(static_cast<uint32_t>(size), header);
  header[4] = static_cast<char>(kind);
  std::vector<iovec> parts;
  parts.reserve(body.size() + 1);
  parts.push_back({header, kHeaderBytes});
  for (absl::string_view piece : body) {
    if (!piece.empty()) parts.push_back({const_cast<char*>(piece.data()), piece.size()});
  }
  iovec* next = parts.data();
  size_t left_parts = parts.size();
  while (left_parts > 0) {
    msghdr message{};
    message.msg_iov = next;
    message.msg_iovlen = std::min<size_t>(left_parts, IOV_MAX);
    const ssize_t w = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      return absl::UnavailableError(
          absl::StrCat("local socket: the peer has gone (", std::strerror(errno), ")"));
    }
    size_t left = static_cast<size_t>(w);
    while (left_parts > 0 && left >= next->iov_len) {
      left -= next->iov_len;
      ++next;
      --left_parts;
    }
    if (left_parts > 0) {
      next->iov_base = static_cast<char*>(next->iov_base) + left;
      next->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status ReadFrame(int fd, uint32_t max_body_bytes, Frame* frame) {
  char header[kHeaderBytes];
  int error = 0;
  const size_t got = ReadFully(fd, header, kHeaderBytes, &error);
  if (got == 0 && error == 0) return absl::OutOfRangeError("local socket: the peer closed");
  if (got < kHeaderBytes) {
    return absl::UnavailableError(absl::StrCat(
        "local socket: the stream ended inside a frame header",
        error != 0 ? absl::StrCat(" (", std::strerror(error), ")") : std::string()));
  }
  const uint32_t size = GetU32(header);
  const auto kind = static_cast<uint8_t>(header[4]);
  if (!KnownKind(kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("local socket: unknown frame kind ", kind, " (Kiln's local protocol: "
                     "a 4-byte little-endian size, a kind 1-4, then the body)"));
  }
  if (size > max_body_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("local socket: a frame of ", size,
                                                   " bytes is past the limit of ", max_body_bytes));
  }
  frame->kind = static_cast<FrameKind>(kind);
  frame->chunks.clear();
  size_t got_body = 0;
  while (got_body < size) {
    const size_t step = std::min<size_t>(size - got_body, kReadStep);
    std::string& chunk = frame->chunks.emplace_back();
    chunk.resize(step);
    const size_t n = ReadFully(fd, chunk.data(), step, &error);
    got_body += n;
    if (n < step) {
      return absl::UnavailableError(absl::StrCat(
          "local socket: the stream ended inside a frame of ", size, " bytes",
          error != 0 ? absl::StrCat(" (", std::strerror(error), ")") : std::string()));
    }
  }
  return absl::OkStatus();
}

std::string EncodeStatus(const absl::Status& status, absl::string_view request_id) {
  std::string body(8, '\0');
  PutU32(static_cast<uint32_t>(status.code()), body.data());
  PutU32(static_cast<uint32_t>(request_id.size()), body.data() + 4);
  body.append(request_id.data(), request_id.size());
  body.append(status.message().data(), status.message().size());
  return body;
}

absl::Status DecodeStatus(absl::string_view body, absl::Status* status, std::string* request_id) {
  if (body.size() < 8) return absl::InvalidArgumentError("local socket: a status frame too short");
  const uint32_t code = GetU32(body.data());
  const uint32_t id_size = GetU32(body.data() + 4);
  if (id_size > body.size() - 8) {
    return absl::InvalidArgumentError("local socket: a status frame's id runs past its end");
  }
  if (code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(absl::StrCat("local socket: unknown status code ", code));
  }
  request_id->assign(body.data() + 8, id_size);
  absl::string_view message = body.substr(8 + id_size);
  *status = code == 0 ? absl::OkStatus()
                      : absl::Status(static_cast<absl::StatusCode>(code), message);
  return absl::OkStatus();
}

}  // namespace kiln::local_wire
