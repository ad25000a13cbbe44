#include "engine/common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// A live mapping: its size, and what NameMappedContents called it.
struct Mapping {
  size_t size = 0;
  std::string name;
};

// The live mappings, by start address: ReleaseResidentPages only touches
// memory found here.
std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<uintptr_t, Mapping>& Registry() {
  static auto* mappings = new std::map<uintptr_t, Mapping>;
  return *mappings;
}

// The mapping holding [begin, end), or the registry's end. RegistryMutex held.
std::map<uintptr_t, Mapping>::iterator FindLocked(uintptr_t begin, uintptr_t end) {
  auto& mappings = Registry();
  auto it = mappings.upper_bound(begin);
  if (it == mappings.begin()) return mappings.end();
  --it;  // the last mapping starting at or before `begin`
  if (end > it->first + it->second.size) return mappings.end();
  return it;
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Releases the whole pages inside [begin, end). RegistryMutex held, so the
// mapping cannot go away meanwhile.
size_t ReleaseLocked(uintptr_t begin, uintptr_t end) {
  const size_t page = PageSize();
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = end / page * page;
  if (last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    return absl::InternalError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat '", path, "': ", std::strerror(err)));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot map '", path, "': ", std::strerror(err)));
    }
  }
  ::close(fd);  // the mapping keeps the file
  std::shared_ptr<const MappedFile> file(new MappedFile(static_cast<const char*>(data), size));
  if (size > 0) {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    Registry()[reinterpret_cast<uintptr_t>(data)] = Mapping{size, std::string()};
  }
  return file;
}

MappedFile::~MappedFile() {
  if (size_ == 0) return;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().erase(reinterpret_cast<uintptr_t>(data_));
  ::munmap(const_cast<char*>(data_), size_);
}

size_t ReleaseResidentPages(const void* data, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + bytes;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (FindLocked(begin, end) == Registry().end()) return 0;
  return ReleaseLocked(begin, end);
}

void NameMappedContents(const void* inside, std::string name) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(inside);
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = FindLocked(at, at + 1);
  if (it != Registry().end()) it->second.name = std::move(name);
}

std::optional<MappedLocation> LocateMapped(const void* data, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = FindLocked(begin, begin + bytes);
  if (it == Registry().end() || it->second.name.empty()) return std::nullopt;
  return MappedLocation{it->second.name, static_cast<size_t>(begin - it->first)};
}

size_t ReleaseAllResidentPages() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  size_t released = 0;
  for (const auto& [start, mapping] : Registry())
    released += ReleaseLocked(start, start + mapping.size);
  return released;
}

}  // namespace kiln
