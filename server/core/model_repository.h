// The on-disk model repository, in Triton's layout:
//   REPO/NAME/config.json          optional load configuration (JSON)
//   REPO/NAME/VERSION/model.pt2    a torch.export archive (torch.export.save); VERSION is 1, 2, ...
//   REPO/NAME/VERSION/model.pt     or a TorchScript archive (torch.jit.save)
//   REPO/.kiln-uploads/            uploads in progress (kept to resume them)
// A directory that KServe's storage initializer or a volume filled is served
// as it is; hidden entries (Kubernetes' "..data" links, our own staging area)
// are never models. Every write is atomic (temp file in the same directory,
// fsync, rename, fsync of the directory), so a crash leaves either the old
// file or the new one, and an upload becomes a model file only by one rename
// of a complete, verified file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// OK when `name` can name a model directory: 1 to 128 characters of
// [A-Za-z0-9_.-], not starting with '.' (so never ".", ".." or a hidden
// directory). InvalidArgument saying why otherwise.
absl::Status ValidateModelName(absl::string_view name);

// The largest version: 2^53, exact in a JSON number. Every way in (the load
// parameters, the streamed upload, the repository scan) keeps to 1..kMaxVersion.
inline constexpr int64_t kMaxVersion = int64_t{1} << 53;

// Parses a version: a decimal integer from 1 to 2^53 without sign, spaces or
// leading zeros (so it is also a safe directory name). InvalidArgument
// otherwise.
absl::StatusOr<int64_t> ParseVersion(absl::string_view text);

// OK for 1..kMaxVersion, and for 0 when `zero_means` says what 0 stands for
// ("the next version", "every version"); InvalidArgument otherwise.
absl::Status CheckVersion(int64_t version, absl::string_view zero_means = "");

// Replaces `path` with `bytes` atomically; the parent directory must exist.
// Fails with Internal (carrying errno's text) on any I/O error, leaving the old
// file, if any, in place and no temp file behind.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);

// Whether the zip file at `path` is a torch.export archive (.pt2): its central
// directory names an archive_format or serialized_exported_program.json entry.
bool IsExportArchiveFile(const std::string& path);

class ModelRepository {
 public:
  // Opens (creating if missing) the repository at `root`, creates the staging
  // area, and removes what interrupted writes and deletes left behind (temp
  // files, half-deleted directories). Kept uploads are left to UploadStore,
  // which expires them.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Open(const std::string& root);

  const std::string& root() const { return root_; }

  // Names of the models that have at least one version, sorted. Directories
  // whose name is not a valid model name are skipped.
  std::vector<std::string> List() const;

  // Versions of `name` that have a model file, ascending.
  std::vector<int64_t> Versions(absl::string_view name) const;

  bool HasModel(absl::string_view name) const;

  std::string ModelPath(absl::string_view name, int64_t version) const;
  std::string ConfigPath(absl::string_view name) const;
  // Where uploads are staged: inside the repository, so installing one is a
  // rename on the same file system.
  std::string StagingDir() const;

  // The model file's bytes; NotFound when absent.
  absl::StatusOr<std::string> ReadModel(absl::string_view name, int64_t version) const;

  // The config.json text, or nullopt when the model has none.
  absl::StatusOr<std::optional<std::string>> ReadConfig(absl::string_view name) const;

  // Stores `bytes` as NAME/VERSION/model.pt2 (a torch.export archive) or
  // model.pt (anything else) atomically.
  absl::Status WriteModel(absl::string_view name, int64_t version, absl::string_view bytes);

  // Moves the complete, fsynced file `staged_path` (on the repository's file
  // system) into place as NAME/VERSION/model.pt2 or model.pt with one rename, replacing any
  // file there, and makes the new directory entries durable.
  absl::Status InstallModel(absl::string_view name, int64_t version,
                            const std::string& staged_path);

  // Copies an existing file (hard link when possible) to a new temp file in the
  // staging area and returns its path; the caller installs or removes it.
  absl::StatusOr<std::string> CloneToStaging(const std::string& path) const;

  // Stores config.json atomically, or removes it when `json` is nullopt.
  absl::Status WriteConfig(absl::string_view name, const std::optional<std::string>& json);

  // Removes NAME/VERSION (version > 0) or the whole model directory
  // (version 0). The directory is first renamed out of the repository, so a
  // crash never leaves a half-deleted model that start-up would try to serve.
  // NotFound when there is nothing to delete.
  absl::Status Delete(absl::string_view name, int64_t version);

 private:
  absl::Status PlaceModel(absl::string_view name, int64_t version, const std::string& file);
  explicit ModelRepository(std::string root) : root_(std::move(root)) {}

  std::string root_;
};

}  // namespace kiln::server
