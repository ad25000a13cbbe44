// The on-disk model repository, in Triton's layout:
//   REPO/NAME/config.json      optional load configuration (JSON)
//   REPO/NAME/1/model.pt       the TorchScript archive (Kiln serves version 1 only)
// Every write is atomic (temp file in the same directory, fsync, rename, fsync
// the directory), so a crash leaves either the old file or the new one.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// OK when `name` can name a model directory: non-empty, at most 128 characters
// of [A-Za-z0-9_.-], and not "." or "..". InvalidArgument saying why otherwise.
absl::Status ValidateModelName(absl::string_view name);

// Replaces `path` with `bytes` atomically; the parent directory must exist.
// Fails with Internal (carrying errno's text) on any I/O error, leaving the old
// file, if any, in place and no temp file behind.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);

class ModelRepository {
 public:
  // Opens (creating if missing) the repository at `root` and removes temp
  // files left over from interrupted writes.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Open(const std::string& root);

  const std::string& root() const { return root_; }

  // Names of the models that have a model file, sorted. Directories whose name
  // is not a valid model name are skipped.
  std::vector<std::string> List() const;

  bool HasModel(absl::string_view name) const;

  // The model file's bytes; NotFound when absent.
  absl::StatusOr<std::string> ReadModel(absl::string_view name) const;

  // The config.json text, or nullopt when the model has none.
  absl::StatusOr<std::optional<std::string>> ReadConfig(absl::string_view name) const;

  // Stores the model file (creating NAME/1/) atomically.
  absl::Status WriteModel(absl::string_view name, absl::string_view bytes);

  // Stores config.json atomically, or removes it when `json` is nullopt.
  absl::Status WriteConfig(absl::string_view name, const std::optional<std::string>& json);

  std::string ModelPath(absl::string_view name) const;
  std::string ConfigPath(absl::string_view name) const;

 private:
  explicit ModelRepository(std::string root) : root_(std::move(root)) {}

  std::string root_;
};

}  // namespace kiln::server
