#include "engine/common/heap_policy.h"

#include <malloc.h>

namespace kiln {

void ReturnLargeBuffersToTheSystem() {
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
}

}  // namespace kiln
