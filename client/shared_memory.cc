#include "client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::client {

absl::StatusOr<std::unique_ptr<SharedMemoryBuffer>> SharedMemoryBuffer::Create(
    const std::string& key, size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("a shared-memory buffer needs a size");
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create shared-memory object '", key, "': ", std::strerror(errno)));
  }
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(key.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("cannot size or map shared-memory object '",
                                                     key, "': ", std::strerror(err)));
  }
  return std::unique_ptr<SharedMemoryBuffer>(new SharedMemoryBuffer(key, p, bytes));
}

SharedMemoryBuffer::~SharedMemoryBuffer() {
  munmap(data_, bytes_);
  shm_unlink(key_.c_str());
}

}  // namespace kiln::client
