// Read-only file mappings whose resident pages the process may give back.
//
// The compiled-graph cache and the import child's answer hold a model's
// weights; mapping those files (MAP_PRIVATE, never written) instead of reading
// them into the heap lets the engine drop the pages it no longer needs: once a
// kernel has prepacked a weight into a layout of its own, the original's pages
// only cost memory, and ReleaseResidentPages hands them back (MADV_DONTNEED:
// they stay in the kernel's page cache and fault back in, from there, if they
// are read again). A server then holds each weight once, in the form it runs,
// instead of twice.
//
// Only memory inside a live MappedFile is ever released: on anonymous memory
// MADV_DONTNEED would zero the data, so every other pointer is left alone.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace kiln {

class MappedFile {
 public:
  // Maps the whole file read-only. NotFound when it does not exist, Internal
  // on other errors; an empty file maps to no memory (data() is null).
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  const char* data_;
  size_t size_;
};

// Gives back the resident pages wholly inside [data, data + bytes) when that
// range lies in a live MappedFile; does nothing otherwise. The bytes stay
// readable. Returns how many bytes were released.
size_t ReleaseResidentPages(const void* data, size_t bytes);

// Names what the live MappedFile holding `inside` contains, in words that
// stay the same across processes and restarts (a cache file's kind, key and
// checksum: cache_file.h), so that what a process derives from bytes in it
// can be found again by another: the packed-weight store keys packed weights
// by where their source lies. Does nothing when `inside` is in no live
// mapping.
void NameMappedContents(const void* inside, std::string name);

// Where bytes lie in a named mapping: its name and the offset of the first
// byte from the mapping's (the file's) start.
struct MappedLocation {
  std::string contents;
  size_t offset = 0;
};

// The location of [data, data + bytes) when it lies wholly inside a live
// mapping that NameMappedContents named; nullopt otherwise (heap memory, an
// unnamed mapping).
std::optional<MappedLocation> LocateMapped(const void* data, size_t bytes);

// The same for every live MappedFile (after a plan is compiled: what its
// kernels read once to prepack is not needed resident any more).
size_t ReleaseAllResidentPages();

}  // namespace kiln
