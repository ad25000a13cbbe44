// The system shared-memory extension of the Open Inference Protocol (Triton's
// SystemSharedMemory{Register,Status,Unregister}): a client on the same host
// creates a POSIX shared-memory object (shm_open), registers a byte range of
// it under a region name, and then passes input tensors (and receives output
// tensors) through that range by the per-tensor parameters
// shared_memory_region, shared_memory_byte_size and shared_memory_offset
// instead of sending their bytes through the socket. For a batch-1 image model
// the 602 KB input then never crosses gRPC.
//
// Safety: a key is a shm_open name (one leading '/', no other '/', at most 255
// bytes), so kilnd only ever opens objects of the shared-memory file system;
// the object must be a regular file at least offset + byte_size long; every
// tensor's range is checked against its region before a byte is read or
// written. Inputs are copied out of the region before the run (the client may
// write the region at any time; a kernel must never see values change under
// it), outputs are written into it after the run. The client owns the object
// and may shrink it at any time: a copy that meets a page past the object's
// new end (SIGBUS) fails the request with a status instead of killing the
// daemon (shared_memory.cc). A region stays mapped while a request that
// looked it up still uses it, even if it is unregistered meanwhile. The
// number of regions is bounded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::server {

class SharedMemoryRegion {
 public:
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }

  // Copies the `bytes` bytes at `offset` within the region (offset relative
  // to the region's start, as the tensor parameter gives it) into `out`, or
  // `in` into them. InvalidArgument naming `what`: the range does not lie
  // inside the region (CheckRange), or the object no longer holds it (its
  // owner shrank it after registering).
  absl::Status Read(uint64_t offset, void* out, uint64_t bytes, const std::string& what) const;
  absl::Status Write(uint64_t offset, const void* in, uint64_t bytes,
                     const std::string& what) const;
  // InvalidArgument naming `what` when the range does not lie inside the region.
  absl::Status CheckRange(uint64_t offset, uint64_t bytes, const std::string& what) const;

 private:
  friend class SharedMemoryRegistry;
  SharedMemoryRegion() = default;
  // InvalidArgument: the object ends before `end` (a byte offset in it).
  absl::Status Shrunk(const std::string& what, uint64_t end) const;

  std::string name_, key_;
  uint64_t offset_ = 0, byte_size_ = 0;
  void* mapping_ = nullptr;  // from the page below offset_ to offset_ + byte_size_
  size_t mapping_bytes_ = 0;
  uint8_t* data_ = nullptr;  // the region's first byte
};

class SharedMemoryRegistry {
 public:
  static constexpr size_t kMaxRegions = 256;

  // Maps `byte_size` bytes at `offset` of the shared-memory object `key` as
  // region `name`. InvalidArgument: a bad name or key, a zero size, a range
  // past the object's end; NotFound: no such object; AlreadyExists: the name
  // is taken; ResourceExhausted: kMaxRegions are registered.
  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size);
  // Unregisters `name`, or every region when `name` is empty. NotFound for an
  // unknown name.
  absl::Status Unregister(const std::string& name);
  // `name`'s region (NotFound), or every region when `name` is empty.
  absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> Status(
      const std::string& name) const;
  // The region for a tensor parameter; NotFound names it.
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> Find(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_;
};

}  // namespace kiln::server
