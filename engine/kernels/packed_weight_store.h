// Where a kernel's prepacked constant weights may outlive the process that
// packed them. A kernel that reorders a constant weight into a layout of its
// own (oneDNN's blocked formats: onednn/onednn.h PrepackedWeights) asks the
// store for the packed bytes under a key that names the source bytes, the
// transform and the packed format; the store hands back bytes a previous
// process packed, or has the kernel pack them and keeps them for the next.
// Kernels know keys and bytes, never files: the compiled-graph cache
// implements the store over its directory (engine/cache/packed_weight_files.h)
// and hands it to compiles through runtime::CompileOptions.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace kiln::kernels {

class PackedWeightStore {
 public:
  virtual ~PackedWeightStore() = default;

  // The `bytes` packed bytes stored under `key`, 64-byte aligned and read
  // only; when there are none (or what is stored is unusable), `pack` writes
  // them into a zeroed, 64-byte aligned buffer of `bytes`, and they are kept
  // under `key`. Never fails: a store that cannot keep them returns the
  // packed buffer itself. The result keeps the bytes alive.
  virtual std::shared_ptr<const void> GetOrPack(const std::string& key, size_t bytes,
                                                const std::function<void(void*)>& pack) = 0;
};

}  // namespace kiln::kernels
