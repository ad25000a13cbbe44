// A POSIX shared-memory object this process creates and owns, for the system
// shared-memory extension (InferenceClient::RegisterSystemSharedMemory): write
// an input's bytes into it once, register it with the server, and name it in
// requests instead of sending the bytes. The object is unlinked and unmapped
// when the buffer goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::client {

class SharedMemoryBuffer {
 public:
  // Creates the object `key` ("/name", shm_open's rule; it must not exist)
  // of `bytes` bytes, mapped read-write.
  static absl::StatusOr<std::unique_ptr<SharedMemoryBuffer>> Create(const std::string& key,
                                                                     size_t bytes);
  ~SharedMemoryBuffer();
  SharedMemoryBuffer(const SharedMemoryBuffer&) = delete;
  SharedMemoryBuffer& operator=(const SharedMemoryBuffer&) = delete;

  const std::string& key() const { return key_; }
  size_t size() const { return bytes_; }
  uint8_t* data() { return static_cast<uint8_t*>(data_); }

 private:
  SharedMemoryBuffer(std::string key, void* data, size_t bytes)
      : key_(std::move(key)), data_(data), bytes_(bytes) {}
  std::string key_;
  void* data_;
  size_t bytes_;
};

}  // namespace kiln::client
