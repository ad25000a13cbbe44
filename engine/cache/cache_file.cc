#include "engine/cache/cache_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/mapped_file.h"
#include "engine/common/status_macros.h"
#include "kiln/v1/graph.pb.h"

namespace kiln::cache {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'F', '0', '2'};
constexpr size_t kPrefixBytes = 8 + 8 + 8;
constexpr size_t kAlign = 64;

std::string LittleEndian(uint64_t v, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

uint64_t ReadLittleEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace

namespace {

// The envelope's prefix, header size and header, as three strings; the
// payload pieces follow them.
struct Envelope {
  std::string prefix, header_size, header_bytes, padding;
};

// Zeros after the header that put the payload at a multiple of 64 bytes from
// the file's start: mapped (page-aligned), its tensors are then aligned where
// they lie.
size_t PaddingAfterHeader(uint64_t header_size) {
  return (kAlign - (kPrefixBytes + 4 + header_size) % kAlign) % kAlign;
}

Envelope MakeEnvelope(absl::string_view kind, absl::string_view key,
                      const std::vector<absl::string_view>& payload) {
  uint64_t payload_size = 0;
  for (absl::string_view piece : payload) payload_size += piece.size();
  v1::CacheFileHeader header;
  header.set_format(kCacheFormat);
  header.set_kind(std::string(kind));
  header.set_key(std::string(key));
  header.set_payload_size(payload_size);
  Envelope e;
  e.header_bytes = header.SerializeAsString();
  e.header_size = LittleEndian(e.header_bytes.size(), 4);
  e.padding.assign(PaddingAfterHeader(e.header_bytes.size()), '\0');

  uint32_t crc = Crc32c(e.header_size);
  crc = Crc32c(e.header_bytes, crc);
  crc = Crc32c(e.padding, crc);
  for (absl::string_view piece : payload) crc = Crc32c(piece, crc);
  const std::string checksum = LittleEndian(crc, 8);
  const uint64_t body_size = 4 + e.header_bytes.size() + e.padding.size() + payload_size;
  e.prefix =
      absl::StrCat(absl::string_view(kMagic, sizeof(kMagic)), LittleEndian(body_size, 8), checksum);
  return e;
}

}  // namespace

absl::Status WriteCacheFile(const std::string& path, absl::string_view kind, absl::string_view key,
                            const std::vector<absl::string_view>& payload) {
  const Envelope e = MakeEnvelope(kind, key, payload);
  // Pieces, not one string: a payload may be hundreds of megabytes of weights.
  std::vector<absl::string_view> pieces = {e.prefix, e.header_size, e.header_bytes, e.padding};
  pieces.insert(pieces.end(), payload.begin(), payload.end());
  return WriteFileAtomically(path, pieces);
}

absl::Status WriteCacheFileTo(int fd, absl::string_view kind, absl::string_view key,
                              const std::vector<absl::string_view>& payload) {
  const Envelope e = MakeEnvelope(kind, key, payload);
  std::vector<absl::string_view> pieces = {e.prefix, e.header_size, e.header_bytes, e.padding};
  pieces.insert(pieces.end(), payload.begin(), payload.end());
  for (absl::string_view piece : pieces) {
    while (!piece.empty()) {
      const ssize_t n = ::write(fd, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::InternalError(
            absl::StrCat("cannot write a cache file to descriptor ", fd, ": ", std::strerror(errno)));
      }
      piece.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (::fdatasync(fd) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot sync descriptor ", fd, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Payload> ReadCacheFile(const std::string& path, absl::string_view kind,
                                      absl::string_view key) {
  // Mapped, not read: the payload's tensors point into the mapping, and the
  // engine gives their pages back once it has prepacked them
  // (engine/common/mapped_file.h).
  ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::Open(path));
  const char* file = mapped->data();
  const size_t file_size = mapped->size();
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("cache file '", path, "' is corrupt: ", why));
  };
  if (file_size < kPrefixBytes + 4) return corrupt(absl::StrCat("only ", file_size, " bytes"));
  if (std::memcmp(file, kMagic, sizeof(kMagic)) != 0) return corrupt("bad magic");
  const uint64_t body_size = ReadLittleEndian(file + 8, 8);
  if (body_size != file_size - kPrefixBytes) {
    return corrupt(absl::StrCat("body is ", file_size - kPrefixBytes, " bytes, header says ",
                                body_size, " (truncated?)"));
  }
  const absl::string_view body(file + kPrefixBytes, body_size);
  // Checked a piece at a time, each piece's pages given back after it: the
  // check alone would otherwise make the whole file resident.
  constexpr size_t kCheckChunk = 8 << 20;
  uint32_t crc = 0;
  for (size_t at = 0; at < body.size(); at += kCheckChunk) {
    const absl::string_view chunk = body.substr(at, kCheckChunk);
    crc = Crc32c(chunk, crc);
    ReleaseResidentPages(chunk.data(), chunk.size());
  }
  if (ReadLittleEndian(file + 16, 8) != crc) return corrupt("checksum mismatch");
  const uint64_t header_size = ReadLittleEndian(body.data(), 4);
  if (header_size > body.size() - 4) return corrupt("header size out of range");
  const size_t pad = PaddingAfterHeader(header_size);
  if (header_size + pad > body.size() - 4) return corrupt("header size out of range");
  v1::CacheFileHeader header;
  if (!header.ParseFromArray(body.data() + 4, static_cast<int>(header_size))) {
    return corrupt("unreadable header");
  }
  // The header is where every format had it: a file of another format is
  // stale, not corrupt, whatever follows its header.
  if (header.format() != kCacheFormat || header.kind() != kind || header.key() != key) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache file '", path, "' is stale: written for format ", header.format(),
                     " kind '", header.kind(), "' key '", header.key(), "', wanted format ",
                     kCacheFormat, " kind '", kind, "' key '", key, "'"));
  }
  const size_t payload_size = body.size() - 4 - header_size - pad;
  if (header.payload_size() != payload_size) return corrupt("payload size mismatch");
  // The same kind, key and checksum name the same bytes in any process, so
  // what is derived from them (packed weights) can be stored under where
  // they lie (engine/common/mapped_file.h).
  NameMappedContents(file, absl::StrCat(kind, ";", key, ";crc32c=", crc, ";bytes=", body_size));
  Payload payload;
  payload.data_ = body.data() + 4 + header_size + pad;
  payload.size_ = payload_size;
  // Shares the mapping's ownership.
  payload.owner_ = std::shared_ptr<const char>(mapped, payload.data_);
  return payload;
}

absl::StatusOr<std::string> PeekCacheFileKey(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
  char head[kPrefixBytes + 4];
  std::string header;
  bool ok = ::pread(fd, head, sizeof(head), 0) == static_cast<ssize_t>(sizeof(head)) &&
            std::memcmp(head, kMagic, sizeof(kMagic)) == 0;
  if (ok) {
    const uint64_t size = ReadLittleEndian(head + kPrefixBytes, 4);
    ok = size < (1 << 20);
    if (ok) {
      header.resize(size);
      ok = ::pread(fd, header.data(), size, sizeof(head)) == static_cast<ssize_t>(size);
    }
  }
  ::close(fd);
  v1::CacheFileHeader parsed;
  if (!ok || !parsed.ParseFromString(header)) {
    return absl::DataLossError(absl::StrCat("cache file '", path, "' has no readable header"));
  }
  return parsed.key();
}

}  // namespace kiln::cache
