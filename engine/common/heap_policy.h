// How a Kiln process's heap hands memory back to the system.
//
// glibc serves a request above its mmap threshold with its own mapping, freed
// back to the system at once, and below it from the heap, where a freed block
// stays resident until the heap's top is free. The threshold is dynamic by
// default: freeing a 9 MB mapping raises it to 9 MB, so every later buffer up
// to that size (a convolution's weights being reordered, a 9 MB temporary of
// the batch-norm fold) comes from the heap and its pages stay resident after
// it is freed. Compiling resnet18 for batch 1 and 8 left kilnd ~120 MB of such
// freed heap. A fixed threshold keeps large buffers in mappings of their own.
#pragma once

namespace kiln {

// Buffers of 1 MiB and more get mappings of their own, returned to the system
// when freed (a fixed threshold, which also turns the dynamic one off), and
// the heap's free top is trimmed past 4 MiB. Call once, early in main().
void ReturnLargeBuffersToTheSystem();

}  // namespace kiln
