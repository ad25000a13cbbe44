#include "engine/cache/file_io.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string ToHex(const unsigned char* bytes, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    hex.push_back(kHex[bytes[i] >> 4]);
    hex.push_back(kHex[bytes[i] & 15]);
  }
  return hex;
}

}  // namespace

std::string UniqueSuffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(::getpid(), "-", rng());
}

absl::Status FsyncDirectory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoError("cannot fsync directory", dir);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::vector<absl::string_view>& pieces) {
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string temp =
      (dir / absl::StrCat(kTempPrefix, target.filename().string(), "-", UniqueSuffix())).string();

  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("cannot create", temp);
  absl::Status status;
  for (absl::string_view piece : pieces) {
    status = WriteAll(fd.get(), piece, temp);
    if (!status.ok()) break;
  }
  // Data first, then the rename: otherwise a crash could leave the new name
  // pointing at a file whose blocks never reached the disk.
  if (status.ok() && ::fsync(fd.get()) != 0) status = ErrnoError("cannot fsync", temp);
  if (status.ok() && ::close(fd.release()) != 0) status = ErrnoError("cannot close", temp);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("cannot rename into", path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  // Without this the rename itself may be lost on power failure.
  return FsyncDirectory(dir.string());
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    return ErrnoError("cannot open", path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("cannot stat", path);
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot read", path);
    }
    if (n == 0) break;  // shrank while reading
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

int SweepTempFiles(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(kTempPrefix, 0) == 0 && fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  // Only allocation can fail here; that is not a client's doing.
  ENGINE_CHECK(ctx_ != nullptr);
  ENGINE_CHECK(EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) == 1);
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256Hasher::Update(absl::string_view bytes) {
  ENGINE_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size()) == 1);
}

std::string Sha256Hasher::FinishRaw() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ENGINE_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len) == 1);
  return std::string(reinterpret_cast<const char*>(digest), len);
}

std::string Sha256Hasher::FinishHex() {
  const std::string raw = FinishRaw();
  return ToHex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

absl::StatusOr<FileDigest> Sha256File(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    return ErrnoError("cannot open", path);
  }
  Sha256Hasher hasher;
  FileDigest digest;
  std::string buf(1 << 20, '\0');
  while (true) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot read", path);
    }
    if (n == 0) break;
    hasher.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
    digest.size += static_cast<uint64_t>(n);
  }
  digest.sha256 = hasher.FinishHex();
  return digest;
}

namespace {

uint32_t Crc32cSoftware(const unsigned char* p, size_t n, uint32_t crc) {
  static const auto* table = [] {
    auto* t = new uint32_t[256];
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const unsigned char* p, size_t n,
                                                          uint32_t crc) {
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}

}  // namespace

uint32_t Crc32c(absl::string_view bytes, uint32_t crc) {
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  crc = ~crc;
  crc = hardware ? Crc32cHardware(p, bytes.size(), crc) : Crc32cSoftware(p, bytes.size(), crc);
  return ~crc;
}

bool IsSha256Hex(absl::string_view hex) {
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace kiln::cache
