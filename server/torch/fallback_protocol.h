// What both ends of the fallback worker's socket agree on (fallback_worker.h):
// the descriptors the worker gets, the arena's alignment, and the framing of
// messages (a 4-byte little-endian size, then the serialized message).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace kiln::server::fallback_protocol {

inline constexpr int kSocketFd = 3;
inline constexpr int kArenaFd = 4;
// Tensors start at multiples of this in the arena (at::from_blob and Kiln's
// kernels want aligned data).
inline constexpr uint64_t kAlign = 64;
// A control message is small (offsets, an op's attributes); a size past this
// is a broken peer.
inline constexpr uint32_t kMaxMessage = 64u << 20;

inline uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Writes all of `n` bytes; false when the peer is gone. kilnd sends with
// MSG_NOSIGNAL (a dead worker is an error, not a SIGPIPE); the worker, whose
// seccomp filter allows write(2) but no socket calls, writes.
inline bool WriteAll(int fd, const char* data, size_t n, bool from_kilnd) {
  while (n > 0) {
    const ssize_t w = from_kilnd ? ::send(fd, data, n, MSG_NOSIGNAL) : ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

inline bool WriteMessage(int fd, const std::string& message, bool from_kilnd) {
  const uint32_t size = static_cast<uint32_t>(message.size());
  unsigned char head[4] = {static_cast<unsigned char>(size), static_cast<unsigned char>(size >> 8),
                           static_cast<unsigned char>(size >> 16),
                           static_cast<unsigned char>(size >> 24)};
  return WriteAll(fd, reinterpret_cast<const char*>(head), 4, from_kilnd) &&
         WriteAll(fd, message.data(), message.size(), from_kilnd);
}

inline uint32_t DecodeSize(const unsigned char head[4]) {
  return static_cast<uint32_t>(head[0]) | (static_cast<uint32_t>(head[1]) << 8) |
         (static_cast<uint32_t>(head[2]) << 16) | (static_cast<uint32_t>(head[3]) << 24);
}

}  // namespace kiln::server::fallback_protocol
