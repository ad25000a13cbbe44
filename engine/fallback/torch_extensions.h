// Operator libraries beside libtorch's own: torchvision's (torchvision::nms,
// roi_align, roi_pool, ps_roi_align, deform_conv2d, ...). libtorch knows those
// operators only once the library that registers them is loaded into the
// process; a TorchScript file calling one then imports (its nodes go to the
// fallback) and runs through the Fallback kernel like any aten op.
#pragma once

#include <string>

namespace kiln::fallback {

// Loads torchvision's operator library once per process, found at run time:
// the file $KILN_TORCHVISION_LIBRARY names, else torchvision/_C*.so in the
// Python package directories (Debian's python3-torchvision ships it there).
// Returns the file loaded, or empty when there is none (then models calling
// torchvision's operators fail to import, naming the operator). Called by
// InstallFallbackKernel and by the plugin's entry point (kilnd's import
// child), before any import or sandbox.
std::string LoadTorchVisionOps();

}  // namespace kiln::fallback
