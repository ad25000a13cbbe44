#include "server/model_repository.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxModelNameLength = 128;
constexpr char kVersionDir[] = "1";
constexpr char kModelFile[] = "model.pt";
constexpr char kConfigFile[] = "config.json";
// Temp files start with this prefix so Open() can sweep them after a crash.
constexpr char kTempPrefix[] = ".kiln-tmp-";

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

absl::Status FsError(absl::string_view what, const fs::path& path, const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " '", path.string(), "': ", ec.message()));
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

absl::Status FsyncDirectory(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open directory", dir.string());
  if (::fsync(fd.get()) != 0) return ErrnoError("cannot fsync directory", dir.string());
  return absl::OkStatus();
}

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(::getpid(), "-", rng());
}

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

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return ErrnoError("cannot read", path);
  return std::move(ss).str();
}

absl::Status CreateDirectories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FsError("cannot create directory", dir, ec);
  return absl::OkStatus();
}

// Removes leftover temp files directly inside `dir`.
void SweepTempFiles(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(kTempPrefix, 0) == 0) fs::remove(entry.path(), ec);
  }
}

}  // namespace

absl::Status ValidateModelName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("model name is empty");
  if (name.size() > kMaxModelNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("model name is ", name.size(),
                                                   " characters long, at most ",
                                                   kMaxModelNameLength, " allowed"));
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("model name '", name, "' is not allowed"));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) {
      // The name may hold control bytes; show the offending one as a code.
      return absl::InvalidArgumentError(absl::StrCat(
          "model name contains character ", static_cast<int>(static_cast<unsigned char>(c)),
          "; only letters, digits, '_', '.' and '-' are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string temp =
      (dir / absl::StrCat(kTempPrefix, target.filename().string(), "-", RandomSuffix())).string();

  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("cannot create", temp);
  absl::Status status = WriteAll(fd.get(), bytes, temp);
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
  return FsyncDirectory(dir);
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Open(const std::string& root) {
  RETURN_IF_ERROR(CreateDirectories(root));
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    std::error_code entry_ec;
    if (!entry.is_directory(entry_ec)) continue;
    SweepTempFiles(entry.path());
    SweepTempFiles(entry.path() / kVersionDir);
  }
  if (ec) return FsError("cannot list model repository", root, ec);
  return std::unique_ptr<ModelRepository>(new ModelRepository(root));
}

std::vector<std::string> ModelRepository::List() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(root_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!ValidateModelName(name).ok()) continue;
    if (HasModel(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool ModelRepository::HasModel(absl::string_view name) const {
  std::error_code ec;
  return ValidateModelName(name).ok() && fs::is_regular_file(ModelPath(name), ec);
}

std::string ModelRepository::ModelPath(absl::string_view name) const {
  return (fs::path(root_) / std::string(name) / kVersionDir / kModelFile).string();
}

std::string ModelRepository::ConfigPath(absl::string_view name) const {
  return (fs::path(root_) / std::string(name) / kConfigFile).string();
}

absl::StatusOr<std::string> ModelRepository::ReadModel(absl::string_view name) const {
  RETURN_IF_ERROR(ValidateModelName(name));
  if (!HasModel(name)) {
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' has no file ", ModelPath(name), " in the repository"));
  }
  return ReadFile(ModelPath(name));
}

absl::StatusOr<std::optional<std::string>> ModelRepository::ReadConfig(
    absl::string_view name) const {
  RETURN_IF_ERROR(ValidateModelName(name));
  const std::string path = ConfigPath(name);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<std::string>();
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return std::optional<std::string>(std::move(text));
}

absl::Status ModelRepository::WriteModel(absl::string_view name, absl::string_view bytes) {
  RETURN_IF_ERROR(ValidateModelName(name));
  const fs::path path(ModelPath(name));
  RETURN_IF_ERROR(CreateDirectories(path.parent_path()));
  return WriteFileAtomically(path.string(), bytes);
}

absl::Status ModelRepository::WriteConfig(absl::string_view name,
                                          const std::optional<std::string>& json) {
  RETURN_IF_ERROR(ValidateModelName(name));
  const fs::path path(ConfigPath(name));
  if (json.has_value()) {
    RETURN_IF_ERROR(CreateDirectories(path.parent_path()));
    return WriteFileAtomically(path.string(), *json);
  }
  std::error_code ec;
  if (fs::remove(path, ec) && !ec) return FsyncDirectory(path.parent_path());
  if (ec) return FsError("cannot remove", path, ec);
  return absl::OkStatus();
}

}  // namespace kiln::server
