// Reads the tensors of a torch.save archive of a dict of tensors (a state
// dict), without Python and without libtorch: the layout torch 2.1-2.7's
// torch.export.save stores parameters, buffers and constants in
// (serialized_state_dict.pt, serialized_constants.pt).
//
// Such an archive is a zip holding <prefix>/data.pkl, a protocol-2 pickle of
// the dict whose tensors are built by torch._utils._rebuild_tensor_v2 (and
// _rebuild_parameter or _rebuild_parameter_with_state) over persistent ids naming raw storages
// <prefix>/data/<key>. The pickle is read by a small, strict machine that
// executes nothing: it knows only the opcodes such pickles use and a short
// allow-list of globals; every other opcode or global is InvalidArgument
// naming it. Every read is bounds-checked and the stack, the memo, the marks
// and the object count are capped, so hostile bytes fail cleanly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/dtype.h"
#include "engine/common/tensor.h"

namespace kiln::importer {

// One tensor of a pickled state dict: a view of raw storage `storage_key`
// (`storage_numel` elements of `dtype`), strides and offset in elements.
struct PickledTensor {
  DType dtype = DType::kUnknown;
  Dims sizes;
  Dims strides;
  int64_t storage_offset = 0;
  std::string storage_key;
  int64_t storage_numel = 0;
};

struct PickleLimits {
  size_t max_stack = 1 << 16;    // values on the stack at once
  size_t max_marks = 64;         // open MARKs: how deep tuples and dicts nest
  size_t max_memo = 1 << 20;     // the largest memo index
  size_t max_objects = 1 << 22;  // values made in all
  size_t max_rank = 16;          // dims of one tensor
};

// Runs the pickle `bytes` and returns its dict of name -> tensor, in the
// order the dict was filled. InvalidArgument for an opcode or global outside
// the allow-list (named, with its byte offset), a truncated or malformed
// pickle, any limit exceeded, or a result that is not a dict of str to tensors.
absl::StatusOr<std::vector<std::pair<std::string, PickledTensor>>> ReadStateDictPickle(
    std::string_view bytes, const PickleLimits& limits = {});

// The alignment a constant's first byte needs for TensorFromStorage to view it
// in place: that of Tensor::Zeros and of the compiled-graph cache's blobs, so a
// viewed constant looks to every kernel exactly like a copied one. (Kernels
// themselves only need their element type's alignment; oneDNN takes any.)
inline constexpr size_t kConstantViewAlign = 64;

// A contiguous tensor from the view (dims, strides, offset in elements) over
// the bytes of `dtype` in `storage`, the file `storage_name`. A non-contiguous
// view is materialized. InvalidArgument naming `what` and the file when the
// view reaches past the storage, a size or stride is negative or huge, or
// stride-0 dims would make a small storage a huge tensor.
//
// With `owner` (which keeps `storage` alive), a contiguous view whose first
// byte is kConstantViewAlign-aligned is not copied: the tensor views those
// bytes and holds `owner`. Every other view is copied, as without one. The
// bytes must then never be written, through this tensor or another viewing
// them (tied weights share their storage): Kiln's compile passes and kernels
// only read constants (see ImportExportedProgram).
absl::StatusOr<Tensor> TensorFromStorage(const std::string& what, DType dtype, const Dims& dims,
                                         const Dims& strides, int64_t offset,
                                         std::string_view storage, const std::string& storage_name,
                                         const std::shared_ptr<const void>& owner = nullptr);

// Reads the torch.save zip archive `bytes` (an entry of the outer archive)
// into name -> tensor, in the dict's order; `what` names it in messages
// ("serialized_state_dict.pt"). InvalidArgument for a big-endian or malformed
// archive, a rejected pickle, or a tensor outside its storage.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadTorchSaveTensors(
    std::string_view bytes, const std::string& what);

// Reads torch.export's sample inputs, a torch.save zip archive of the pair
// (args, kwargs) (data/sample_inputs/<model>.pt of a PT2 archive,
// serialized_example_inputs.pt of the older layout): the args' tensors in
// order with empty names, then the kwargs' by name. InvalidArgument as
// ReadTorchSaveTensors, and for an arg or kwarg that is not a tensor.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadTorchSaveSampleInputs(
    std::string_view bytes, const std::string& what);

}  // namespace kiln::importer
