// The FP16/BF16 conversions live in engine/common/half.h (the client uses
// them too); kernels in namespace kiln::kernels find them unqualified.
#pragma once

#include "engine/common/half.h"
