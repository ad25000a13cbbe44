// Uploads in progress. Each one is a file <sha256>-<size>.part in the
// repository's staging area, named by the content the client declared, so an
// interrupted upload (broken stream, client or server killed) resumes where it
// stopped: the next attempt asks how many bytes are kept and sends the rest.
// A part becomes a model only after its size and SHA-256 check out (Finish).
//
// Any client can start an upload and walk away, so the parts are bounded
// (UploadLimits): how many may be kept or in progress at once, and their
// declared sizes together (a part never grows past its declared size, so
// that also bounds the disk they use). A part nobody has written to for the
// TTL is abandoned: SweepExpired() removes it (kilnd sweeps at start-up,
// periodically, and before it counts the parts for a new upload).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

struct UploadLimits {
  // Parts kept or in progress at once (--max-partial-uploads).
  int max_partial_uploads = 16;
  // Their declared sizes together (--max-partial-upload-bytes).
  uint64_t max_partial_bytes = 4ull << 30;
  // A part not written to for this long is abandoned (--partial-upload-ttl-s).
  std::chrono::seconds ttl = std::chrono::hours(1);
};

class UploadStore {
 public:
  // `dir` must exist (ModelRepository::StagingDir()).
  explicit UploadStore(std::string dir, UploadLimits limits = {})
      : dir_(std::move(dir)), limits_(limits) {}

  const UploadLimits& limits() const { return limits_; }

  // Removes the parts that no running upload holds and that nobody has
  // written to for limits().ttl; returns how many it removed.
  int SweepExpired();

  // Bytes kept for an upload of this content; 0 when none.
  uint64_t Received(const std::string& sha256, uint64_t size) const;

  class Session {
   public:
    // Without a successful Finish(), the bytes received are made durable and
    // kept for a resume.
    ~Session();

    // Appends a chunk. InvalidArgument when it would pass the declared size.
    absl::Status Append(absl::string_view chunk);

    uint64_t received() const { return received_; }
    uint64_t size() const { return size_; }

    // Checks that all declared bytes arrived and that their SHA-256 is the
    // declared one; returns the path of the complete, fsynced file (still in
    // the staging area; the caller installs or removes it). FailedPrecondition
    // for missing bytes (kept), InvalidArgument for a checksum mismatch (the
    // bytes are removed: resuming them could never succeed).
    absl::StatusOr<std::string> Finish();

   private:
    friend class UploadStore;
    Session(UploadStore* store, std::string key, std::string path, int fd, uint64_t received,
            uint64_t size, std::string sha256);

    UploadStore* store_;
    std::string key_;
    std::string path_;
    int fd_;
    uint64_t received_;
    uint64_t size_;
    std::string sha256_;
    bool done_ = false;
  };

  // Starts an upload of `size` bytes with this SHA-256, or resumes one: the
  // chunks that follow start at `offset`, which may be at most the bytes kept
  // (bytes kept past `offset` are dropped). FailedPrecondition when `offset`
  // is past the bytes kept, Aborted when an upload of the same content is
  // already running, ResourceExhausted when a new part would pass a limit of
  // UploadLimits (a resumed part is already counted), Internal on I/O errors.
  absl::StatusOr<std::unique_ptr<Session>> Begin(const std::string& sha256, uint64_t size,
                                                 uint64_t offset);

  std::string PartPath(const std::string& sha256, uint64_t size) const;

 private:
  void Release(const std::string& key);
  // Both need mu_ held.
  int SweepExpiredLocked();
  absl::Status CheckRoomLocked(const std::string& key, uint64_t size);

  const std::string dir_;
  const UploadLimits limits_;
  std::mutex mu_;
  std::set<std::string> active_;
};

}  // namespace kiln::server
