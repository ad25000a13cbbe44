#include "server/core/upload_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

constexpr char kPartSuffix[] = ".part";

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

std::string Key(const std::string& sha256, uint64_t size) { return absl::StrCat(sha256, "-", size); }

// The declared size in a part's key "<sha256>-<size>"; nullopt for a name
// that is not one (then it is not a part).
std::optional<uint64_t> DeclaredSize(absl::string_view key) {
  const size_t dash = key.rfind('-');
  uint64_t size = 0;
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(key.substr(dash + 1), &size)) {
    return std::nullopt;
  }
  return size;
}

// The parts in `dir`, by key, with their declared sizes.
std::map<std::string, uint64_t> ListParts(const std::string& dir) {
  std::map<std::string, uint64_t> parts;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::EndsWith(name, kPartSuffix)) continue;
    const std::string key = name.substr(0, name.size() - strlen(kPartSuffix));
    if (std::optional<uint64_t> size = DeclaredSize(key)) parts[key] = *size;
  }
  return parts;
}

}  // namespace

int UploadStore::SweepExpired() {
  std::lock_guard<std::mutex> lock(mu_);
  return SweepExpiredLocked();
}

int UploadStore::SweepExpiredLocked() {
  int removed = 0;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& [key, size] : ListParts(dir_)) {
    if (active_.count(key) > 0) continue;  // an upload is writing it
    const fs::path path = fs::path(dir_) / absl::StrCat(key, kPartSuffix);
    std::error_code ec;
    const auto mtime = fs::last_write_time(path, ec);
    if (ec || now - mtime < limits_.ttl) continue;
    std::error_code size_ec;
    const uintmax_t kept = fs::file_size(path, size_ec);
    if (fs::remove(path, ec)) {
      ++removed;
      spdlog::info("removed an abandoned upload ({} of {} bytes, no write for {} s or more, "
                   "--partial-upload-ttl-s)",
                   size_ec ? 0 : kept, size, limits_.ttl.count());
    }
  }
  return removed;
}

absl::Status UploadStore::CheckRoomLocked(const std::string& key, uint64_t size) {
  std::map<std::string, uint64_t> parts = ListParts(dir_);
  if (parts.count(key) > 0) return absl::OkStatus();  // a resume: counted already
  for (const std::string& active : active_) {
    if (std::optional<uint64_t> s = DeclaredSize(active)) parts.emplace(active, *s);
  }
  parts.erase(key);
  uint64_t held = 0;
  for (const auto& [k, s] : parts) held += s;
  const std::string advice = absl::StrCat(
      "; finish or resume one of them, or wait until abandoned ones expire (after ",
      limits_.ttl.count(), " s without a write, --partial-upload-ttl-s)");
  if (parts.size() >= static_cast<size_t>(limits_.max_partial_uploads)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot start another upload: ", parts.size(),
        " partial uploads are already kept or in progress, the server's limit "
        "(--max-partial-uploads ",
        limits_.max_partial_uploads, ")", advice));
  }
  if (size > limits_.max_partial_bytes || held > limits_.max_partial_bytes - size) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot start an upload of ", size, " bytes: partial uploads already hold ", held,
        " of the ", limits_.max_partial_bytes,
        " bytes they may declare together (--max-partial-upload-bytes)", advice));
  }
  return absl::OkStatus();
}

std::string UploadStore::PartPath(const std::string& sha256, uint64_t size) const {
  return (fs::path(dir_) / absl::StrCat(Key(sha256, size), kPartSuffix)).string();
}

uint64_t UploadStore::Received(const std::string& sha256, uint64_t size) const {
  struct stat st;
  if (::stat(PartPath(sha256, size).c_str(), &st) != 0) return 0;
  return std::min<uint64_t>(static_cast<uint64_t>(st.st_size), size);
}

absl::StatusOr<std::unique_ptr<UploadStore::Session>> UploadStore::Begin(const std::string& sha256,
                                                                         uint64_t size,
                                                                         uint64_t offset) {
  const std::string key = Key(sha256, size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_.count(key) > 0) {
      return absl::AbortedError(absl::StrCat("another upload of the file with SHA-256 ", sha256,
                                             " is in progress; retry later"));
    }
    // Abandoned parts first, so they never stand in a live upload's way.
    SweepExpiredLocked();
    RETURN_IF_ERROR(CheckRoomLocked(key, size));
    active_.insert(key);
  }
  auto release_on_error = [&](absl::Status s) {
    Release(key);
    return s;
  };
  const std::string path = PartPath(sha256, size);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return release_on_error(ErrnoError("cannot open", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return release_on_error(ErrnoError("cannot stat", path));
  }
  const uint64_t kept = static_cast<uint64_t>(st.st_size);
  if (offset > kept || offset > size) {
    ::close(fd);
    return release_on_error(absl::FailedPreconditionError(
        absl::StrCat("upload resumes at byte ", offset, ", but the server kept only ", kept,
                     " bytes of this file; resume at ", std::min(kept, size))));
  }
  if (::ftruncate(fd, static_cast<off_t>(offset)) != 0 ||
      ::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
    ::close(fd);
    return release_on_error(ErrnoError("cannot position", path));
  }
  return std::unique_ptr<Session>(new Session(this, key, path, fd, offset, size, sha256));
}

void UploadStore::Release(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  active_.erase(key);
}

UploadStore::Session::Session(UploadStore* store, std::string key, std::string path, int fd,
                              uint64_t received, uint64_t size, std::string sha256)
    : store_(store),
      key_(std::move(key)),
      path_(std::move(path)),
      fd_(fd),
      received_(received),
      size_(size),
      sha256_(std::move(sha256)) {}

UploadStore::Session::~Session() {
  if (fd_ >= 0) {
    // Keep what arrived for a resume; make it durable first.
    if (!done_) ::fdatasync(fd_);
    ::close(fd_);
  }
  store_->Release(key_);
}

absl::Status UploadStore::Session::Append(absl::string_view chunk) {
  if (chunk.size() > size_ - received_) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload sends more than the declared ", size_, " bytes"));
  }
  const char* p = chunk.data();
  size_t left = chunk.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path_);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  received_ += chunk.size();
  return absl::OkStatus();
}

absl::StatusOr<std::string> UploadStore::Session::Finish() {
  if (received_ != size_) {
    return absl::FailedPreconditionError(
        absl::StrCat("upload incomplete: received ", received_, " of ", size_,
                     " bytes; the bytes are kept, resume at byte ", received_));
  }
  if (::fsync(fd_) != 0) return ErrnoError("cannot fsync", path_);
  // Hash what is on disk, not what streamed by: a resumed upload came in
  // several calls, and the disk is what gets installed.
  ASSIGN_OR_RETURN(cache::FileDigest digest, cache::Sha256File(path_));
  if (digest.size != size_ || digest.sha256 != sha256_) {
    ::unlink(path_.c_str());
    done_ = true;
    return absl::InvalidArgumentError(absl::StrCat("upload is corrupt: declared SHA-256 ", sha256_,
                                                   " and ", size_, " bytes, received SHA-256 ",
                                                   digest.sha256, " and ", digest.size,
                                                   " bytes; the bytes were discarded"));
  }
  done_ = true;
  return path_;
}

}  // namespace kiln::server
