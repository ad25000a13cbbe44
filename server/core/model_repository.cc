#include "server/core/model_repository.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxModelNameLength = 128;
// A model version's file: a torch.export archive is stored as model.pt2,
// anything else (TorchScript) as model.pt; the format is told by content.
constexpr char kModelFile[] = "model.pt";
constexpr char kExportModelFile[] = "model.pt2";
constexpr char kConfigFile[] = "config.json";
constexpr char kStagingDir[] = ".kiln-uploads";
// Deleted directories are renamed to this prefix first, then removed.
constexpr char kTrashPrefix[] = ".kiln-trash-";

uint32_t Le32(const unsigned char* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

absl::Status FsError(absl::string_view what, const fs::path& path, const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " '", path.string(), "': ", ec.message()));
}

// Creates `dir` (and missing parents) and makes each new entry durable by
// fsyncing the directory that holds it.
absl::Status CreateDirectoriesDurably(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, ec) && ec) return FsError("cannot create directory", *it, ec);
    const fs::path parent = it->parent_path().empty() ? fs::path(".") : it->parent_path();
    RETURN_IF_ERROR(cache::FsyncDirectory(parent.string()));
  }
  return absl::OkStatus();
}

bool IsVersionDir(const std::string& name) { return ParseVersion(name).ok(); }

}  // namespace

// Whether the zip file at `path` is a torch.export archive: its central
// directory (read alone, at the end of the file) names an archive_format or
// serialized_exported_program.json entry. Reads at most ~64 MiB of directory.
bool IsExportArchiveFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool found = false;
  if (::fstat(fd, &st) == 0 && st.st_size >= 22) {
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t tail = std::min<uint64_t>(size, 22 + 0xFFFF + 20);
    std::string buf(tail, '\0');
    if (::pread(fd, buf.data(), tail, static_cast<off_t>(size - tail)) ==
        static_cast<ssize_t>(tail)) {
      const auto* b = reinterpret_cast<const unsigned char*>(buf.data());
      for (uint64_t at = tail - 22 + 1; at-- > 0;) {
        if (Le32(b + at) != 0x06054b50) continue;
        uint64_t dir_size = Le32(b + at + 12);
        uint64_t dir_offset = Le32(b + at + 16);
        if ((dir_size == 0xFFFFFFFF || dir_offset == 0xFFFFFFFF) && at >= 20 &&
            Le32(b + at - 20) == 0x07064b50) {
          // zip64: the sizes live in the zip64 record the locator points at.
          uint64_t z64 = Le32(b + at - 20 + 8) | (uint64_t{Le32(b + at - 20 + 12)} << 32);
          unsigned char rec[56];
          if (::pread(fd, rec, sizeof(rec), static_cast<off_t>(z64)) == sizeof(rec) &&
              Le32(rec) == 0x06064b50) {
            dir_size = Le32(rec + 40) | (uint64_t{Le32(rec + 44)} << 32);
            dir_offset = Le32(rec + 48) | (uint64_t{Le32(rec + 52)} << 32);
          }
        }
        if (dir_offset > size || dir_size > size - dir_offset || dir_size > (64u << 20)) break;
        std::string dir(dir_size, '\0');
        if (::pread(fd, dir.data(), dir_size, static_cast<off_t>(dir_offset)) ==
            static_cast<ssize_t>(dir_size)) {
          found = dir.find("archive_format") != std::string::npos ||
                  dir.find("serialized_exported_program.json") != std::string::npos;
        }
        break;
      }
    }
  }
  ::close(fd);
  return found;
}

absl::Status ValidateModelName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("model name is empty");
  if (name.size() > kMaxModelNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("model name is ", name.size(),
                                                   " characters long, at most ",
                                                   kMaxModelNameLength, " allowed"));
  }
  if (name.front() == '.') {
    // Covers "." and "..", and keeps hidden entries (staging area, Kubernetes'
    // "..data") from ever being taken for models.
    return absl::InvalidArgumentError(
        absl::StrCat("model name '", absl::CHexEscape(name), "' must not start with '.'"));
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

absl::StatusOr<int64_t> ParseVersion(absl::string_view text) {
  int64_t version = 0;
  const bool digits_only =
      !text.empty() && text.size() <= 16 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits_only || text[0] == '0' || !absl::SimpleAtoi(text, &version) || version < 1 ||
      version > kMaxVersion) {
    // Printable or not, the text is the client's; quote only safe lengths.
    return absl::InvalidArgumentError(
        absl::StrCat("version '", absl::CHexEscape(text.substr(0, 32)),
                     "' is not a version: a whole number from 1 to ", kMaxVersion,
                     " (2^53), without sign or leading zeros"));
  }
  return version;
}

absl::Status CheckVersion(int64_t version, absl::string_view zero_means) {
  if ((version >= 1 && version <= kMaxVersion) || (version == 0 && !zero_means.empty())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "version ", version, " is out of range: versions are 1 to ", kMaxVersion, " (2^53)",
      zero_means.empty() ? "" : absl::StrCat(", or 0 for ", zero_means)));
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  return cache::WriteFileAtomically(path, bytes);
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Open(const std::string& root) {
  RETURN_IF_ERROR(CreateDirectoriesDurably(root));
  std::unique_ptr<ModelRepository> repo(new ModelRepository(root));
  RETURN_IF_ERROR(CreateDirectoriesDurably(repo->StagingDir()));
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code entry_ec;
    if (name.rfind(kTrashPrefix, 0) == 0) {
      fs::remove_all(entry.path(), entry_ec);  // a delete that a crash interrupted
      continue;
    }
    if (!entry.is_directory(entry_ec) || !ValidateModelName(name).ok()) continue;
    cache::SweepTempFiles(entry.path().string());
    for (const fs::directory_entry& version : fs::directory_iterator(entry.path(), entry_ec)) {
      const std::string dir = version.path().filename().string();
      if (IsVersionDir(dir)) {
        cache::SweepTempFiles(version.path().string());
        // Empty: an install that a crash interrupted before its file was moved in.
        if (fs::is_empty(version.path(), entry_ec)) fs::remove(version.path(), entry_ec);
      } else if (!dir.empty() && std::all_of(dir.begin(), dir.end(), [](char c) {
                   return c >= '0' && c <= '9';
                 })) {
        // Digits, but not a version Kiln serves (0, a leading zero, past 2^53):
        // say so rather than skip it silently.
        spdlog::warn("model '{}': directory '{}' is not served: {}", name, dir.substr(0, 32),
                     std::string(ParseVersion(dir).status().message()));
      }
    }
  }
  if (ec) return FsError("cannot list model repository", root, ec);
  // Kept uploads are UploadStore's: it expires them (--partial-upload-ttl-s).
  cache::SweepTempFiles(repo->StagingDir());
  return repo;
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

std::vector<int64_t> ModelRepository::Versions(absl::string_view name) const {
  std::vector<int64_t> versions;
  if (!ValidateModelName(name).ok()) return versions;
  std::error_code ec;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(root_) / std::string(name), ec)) {
    absl::StatusOr<int64_t> version = ParseVersion(entry.path().filename().string());
    std::error_code file_ec;
    if (version.ok() && (fs::is_regular_file(entry.path() / kModelFile, file_ec) ||
                         fs::is_regular_file(entry.path() / kExportModelFile, file_ec))) {
      versions.push_back(*version);
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

bool ModelRepository::HasModel(absl::string_view name) const { return !Versions(name).empty(); }

std::string ModelRepository::ModelPath(absl::string_view name, int64_t version) const {
  const fs::path dir = fs::path(root_) / std::string(name) / std::to_string(version);
  std::error_code ec;
  if (fs::is_regular_file(dir / kExportModelFile, ec)) return (dir / kExportModelFile).string();
  return (dir / kModelFile).string();
}

// Installs `file` as the version's model under the name its format asks for,
// and removes a file of the other name a previous upload left.
absl::Status ModelRepository::PlaceModel(absl::string_view name, int64_t version,
                                         const std::string& file) {
  const fs::path dir = fs::path(root_) / std::string(name) / std::to_string(version);
  const bool pt2 = IsExportArchiveFile(file);
  const fs::path path = dir / (pt2 ? kExportModelFile : kModelFile);
  if (::rename(file.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename '", file, "' to '", path.string(),
                                            "': ", std::strerror(errno)));
  }
  std::error_code ec;
  fs::remove(dir / (pt2 ? kModelFile : kExportModelFile), ec);
  return absl::OkStatus();
}

std::string ModelRepository::ConfigPath(absl::string_view name) const {
  return (fs::path(root_) / std::string(name) / kConfigFile).string();
}

std::string ModelRepository::StagingDir() const {
  return (fs::path(root_) / kStagingDir).string();
}

absl::StatusOr<std::string> ModelRepository::ReadModel(absl::string_view name,
                                                       int64_t version) const {
  RETURN_IF_ERROR(ValidateModelName(name));
  const std::string path = ModelPath(name, version);
  absl::StatusOr<std::string> bytes = cache::ReadFileToString(path);
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", version,
                                            " (no file ", path, ")"));
  }
  return bytes;
}

absl::StatusOr<std::optional<std::string>> ModelRepository::ReadConfig(
    absl::string_view name) const {
  RETURN_IF_ERROR(ValidateModelName(name));
  absl::StatusOr<std::string> text = cache::ReadFileToString(ConfigPath(name));
  if (absl::IsNotFound(text.status())) return std::optional<std::string>();
  if (!text.ok()) return text.status();
  return std::optional<std::string>(*std::move(text));
}

absl::Status ModelRepository::WriteModel(absl::string_view name, int64_t version,
                                         absl::string_view bytes) {
  RETURN_IF_ERROR(ValidateModelName(name));
  if (version < 1) return absl::InvalidArgumentError(absl::StrCat("bad version ", version));
  const fs::path dir = fs::path(root_) / std::string(name) / std::to_string(version);
  RETURN_IF_ERROR(CreateDirectoriesDurably(dir));
  // Written under a temporary name, then placed under the name its format asks for.
  const fs::path temp = dir / absl::StrCat(cache::kTempPrefix, "model-", cache::UniqueSuffix());
  RETURN_IF_ERROR(WriteFileAtomically(temp.string(), bytes));
  RETURN_IF_ERROR(PlaceModel(name, version, temp.string()));
  return cache::FsyncDirectory(dir.string());
}

absl::Status ModelRepository::InstallModel(absl::string_view name, int64_t version,
                                           const std::string& staged_path) {
  RETURN_IF_ERROR(ValidateModelName(name));
  if (version < 1) return absl::InvalidArgumentError(absl::StrCat("bad version ", version));
  const fs::path dir = fs::path(root_) / std::string(name) / std::to_string(version);
  RETURN_IF_ERROR(CreateDirectoriesDurably(dir));
  RETURN_IF_ERROR(PlaceModel(name, version, staged_path));
  // The rename is durable once both directories are.
  RETURN_IF_ERROR(cache::FsyncDirectory(dir.string()));
  return cache::FsyncDirectory(StagingDir());
}

absl::StatusOr<std::string> ModelRepository::CloneToStaging(const std::string& path) const {
  const std::string temp =
      (fs::path(StagingDir()) / absl::StrCat(cache::kTempPrefix, "clone-", cache::UniqueSuffix()))
          .string();
  // Files are only ever replaced by rename, never written in place, so two
  // names for one inode never see each other's changes.
  if (::link(path.c_str(), temp.c_str()) == 0) return temp;
  std::error_code ec;
  fs::copy_file(path, temp, ec);
  if (ec) return FsError("cannot copy", path, ec);
  return temp;
}

absl::Status ModelRepository::WriteConfig(absl::string_view name,
                                          const std::optional<std::string>& json) {
  RETURN_IF_ERROR(ValidateModelName(name));
  const fs::path path(ConfigPath(name));
  if (json.has_value()) {
    RETURN_IF_ERROR(CreateDirectoriesDurably(path.parent_path()));
    return WriteFileAtomically(path.string(), *json);
  }
  std::error_code ec;
  if (fs::remove(path, ec) && !ec) return cache::FsyncDirectory(path.parent_path().string());
  if (ec) return FsError("cannot remove", path, ec);
  return absl::OkStatus();
}

absl::Status ModelRepository::Delete(absl::string_view name, int64_t version) {
  RETURN_IF_ERROR(ValidateModelName(name));
  const fs::path model_dir = fs::path(root_) / std::string(name);
  const fs::path target = version > 0 ? model_dir / std::to_string(version) : model_dir;
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    return absl::NotFoundError(absl::StrCat("model '", name, "'",
                                            version > 0 ? absl::StrCat(" version ", version) : "",
                                            " is not in the repository"));
  }
  // One rename takes it out of the repository; removing the trash may then
  // be interrupted without consequence (Open finishes it).
  const fs::path trash =
      fs::path(root_) / absl::StrCat(kTrashPrefix, name, "-", cache::UniqueSuffix());
  if (::rename(target.c_str(), trash.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot move '", target.string(), "' out: ", std::strerror(errno)));
  }
  RETURN_IF_ERROR(cache::FsyncDirectory(target.parent_path().string()));
  if (target.parent_path() != fs::path(root_)) RETURN_IF_ERROR(cache::FsyncDirectory(root_));
  fs::remove_all(trash, ec);
  if (ec) return FsError("cannot remove", trash, ec);
  return absl::OkStatus();
}

}  // namespace kiln::server
