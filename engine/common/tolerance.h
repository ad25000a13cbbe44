// How closely two computations of one float dtype can agree, for the checks
// that compare Kiln with libtorch (the verified import, the parity suite).
#pragma once

#include "engine/common/dtype.h"

namespace kiln {

// FP16 and BF16 carry 11 and 8 significant bits: two computations that each
// round to the type once per op differ by a few units in the last place, far
// above a float32 tolerance. Returns four units of the type (relative), 0 for
// every other dtype.
inline double StorageRoundingTolerance(DType dtype) {
  switch (dtype) {
    case DType::kF16: return 4.0 / 2048;
    case DType::kBF16: return 4.0 / 256;
    default: return 0.0;
  }
}

}  // namespace kiln
