#include "engine/common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace kiln {

size_t AdviseHugePages(void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t last = (begin + bytes) / kHugePageBytes * kHugePageBytes;
  if (data == nullptr || last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) != 0) return 0;
  return last - first;
#else
  (void)data;
  (void)bytes;
  return 0;
#endif
}

size_t BufferAlignment(size_t bytes, size_t small) {
  return bytes >= kHugePageBytes ? kHugePageBytes : small;
}

void* AllocateBuffer(size_t bytes, size_t small_alignment) {
  const size_t align = BufferAlignment(bytes, small_alignment);
  // aligned_alloc wants a size that is a multiple of the alignment.
  void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
  if (p != nullptr) AdviseHugePages(p, bytes);
  return p;
}

}  // namespace kiln
