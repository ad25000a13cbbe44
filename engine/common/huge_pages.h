// Large buffers on transparent huge pages.
//
// A model's weights and activations are read end to end on every call: a
// resnet18 streams 45 MB of weights per image, over 11,000 4 KiB pages and as
// many TLB misses. Backed by 2 MiB pages instead they take 23 TLB entries, and
// Kiln in process ran 1.5-3% faster on every model of `make bench`'s set
// (docs/performance.md). Most distributions ship the kernel's transparent huge
// pages in "madvise" mode (only regions that ask get them), which is where
// this asks: MADV_HUGEPAGE on the 2 MiB-aligned extents inside a buffer, so a
// buffer's resident size never grows past what it covers. Where the kernel
// has no THP, or it is off, the advice does nothing.
#pragma once

#include <cstddef>

namespace kiln {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Asks for huge pages on the whole 2 MiB-aligned extents of [data, data +
// bytes). Best done before the first write: pages already faulted in stay as
// they are until the kernel collapses them. Returns the bytes advised (0 when
// no whole extent lies inside, or the kernel refused).
size_t AdviseHugePages(void* data, size_t bytes);

// The alignment for a buffer of `bytes`: 2 MiB from 2 MiB up, so that every
// extent but the tail's is whole (the allocator's padding costs address space,
// not memory: its pages are never touched), else `small`.
size_t BufferAlignment(size_t bytes, size_t small);

// std::aligned_alloc of `bytes` at BufferAlignment(bytes, small_alignment),
// advised AdviseHugePages before anything touches it; std::free releases it.
// Null when the memory is not there.
void* AllocateBuffer(size_t bytes, size_t small_alignment);

}  // namespace kiln
