// Executable::Compiler: stages 2 and 3 of Executable::Compile
// (executable.cc says what each stage does), one typed compile phase over a
// copy of the graph, split by concern:
//   typing.cc          walks the blocks in order, prepares each node with its
//                      operands' types (Kiln's shape and dtype inference and
//                      kernel choice), folds constants, decides static or
//                      dynamic steps
//   layouts.cc         values in a non-plain layout (NHWC): plain twins
//                      (Reorder nodes) where an op or a dynamic step needs them
//   fuse_post_ops.cc   a residual Add or a clamp into the convolution just
//                      compiled (needs the operands' types, so not a graph pass)
//   fuse_elementwise.cc  an elementwise op into the elementwise op (or chain)
//                      just compiled: one ElementwiseChain
//   memory_planner.cc  lifetimes of the arena's buffers and their offsets
// Internal to engine/runtime: only executable.cc creates one.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/ir/graph.h"
#include "engine/kernels/kernel.h"
#include "engine/runtime/compile/memory_planner.h"
#include "engine/runtime/executable.h"
#include "engine/runtime/executable_internal.h"

namespace kiln::runtime {

class Executable::Compiler {
 public:
  explicit Compiler(Executable* exe)
      : exe_(exe), g_(exe->graph_), slots_(exe->slots_), root_(g_.values().size()) {
    for (size_t v = 0; v < root_.size(); ++v) root_[v] = static_cast<ir::ValueId>(v);
  }

  // Compiles the main block for `inputs` (graph input order) into exe's
  // program, slots and arena size.
  absl::Status Run(const std::vector<kernels::TensorInfo>& inputs);

 private:
  // Where CompileBlock is: PlainTwin inserts its Reorder node at `index` of
  // `block`, before the node being compiled.
  struct Cursor {
    ir::BlockId block = ir::kMainBlock;
    size_t index = 0;
  };

  // ---- typing.cc ----
  bool IsStatic(ir::ValueId v) const;
  void SetType(ir::ValueId v);
  void MakeConstant(ir::ValueId v, Tensor value);
  void Alias(ir::ValueId to, ir::ValueId from, Program& program, ir::NodeId node);
  void MarkDynamic(const ir::Node& node);
  absl::Status CompileBlock(ir::BlockId b, Program& program, bool static_ok);
  absl::Status CompileBlockNodes(ir::BlockId b, Program& program, bool static_ok);
  absl::Status CompileKernelNode(ir::NodeId id, Program& program, bool static_ok);
  bool RunsThroughTwin(ir::NodeId id, const absl::Status& refused);
  absl::Status Fold(ir::NodeId id, const kernels::KernelDef& kernel,
                    kernels::PrepareContext& ctx);
  void CollectUses(ir::NodeId id, std::vector<ir::ValueId>& uses) const;

  // ---- layouts.cc ----
  absl::StatusOr<ir::ValueId> PlainTwin(ir::ValueId v, Program& program);
  absl::Status UsePlainOperands(ir::NodeId id, Program& program);
  void ReplaceUsesIn(ir::NodeId id, ir::ValueId from, ir::ValueId to);
  static bool PermuteElementwise(const ir::Node& node, std::vector<kernels::TensorInfo>& infos);

  // ---- fuse_post_ops.cc ----
  absl::StatusOr<bool> FuseIntoConv(ir::NodeId id, Program& program);

  // ---- fuse_elementwise.cc ----
  // After node `id` was compiled into the last step: joins it with the
  // elementwise step before it. Returns whether it did.
  absl::StatusOr<bool> FuseIntoChain(ir::NodeId id, Program& program);

  // ---- memory_planner.cc ----
  void ReuseInputBuffers(std::vector<int>& buffer_of, std::vector<compile::Buffer>& buffers) const;
  void Plan();

  Executable* exe_;
  ir::Graph& g_;
  std::vector<Slot>& slots_;
  std::vector<ir::ValueId> root_;  // per value: the value whose bytes it views (itself if none)
  size_t workspace_ = 0;
  Cursor cursor_;
  std::vector<int> uses_;  // per value: node inputs, block results, graph outputs (2)
  std::map<std::pair<ir::ValueId, ir::BlockId>, ir::ValueId> twins_;
  bool no_chain_ = false;  // FuseIntoChain is putting back what it could not fuse
};

}  // namespace kiln::runtime
