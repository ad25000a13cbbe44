#include "engine/importer/torchscript/aten_op_table.h"

#include <algorithm>

namespace kiln::importer {

std::vector<std::string> SupportedTorchScriptOps() {
  std::vector<std::string> ops = SharedAtenOps();
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace kiln::importer
