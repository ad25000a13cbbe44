// ir::Graph <-> kiln.v1.Graph (proto/kiln/v1/graph.proto), through the graph's
// public API only. Used for the imported graph (the import child's answer and
// the disk cache) and for compiled plans.
//
// The serializer refuses what it does not know rather than dropping it: an op
// or dtype name it cannot resolve, an attribute type it has no field for, a
// value numbering it cannot reproduce, or an IR struct whose layout changed
// since it was written all give Unimplemented, which callers treat as "not
// cacheable" (the graph is recompiled, never served half-read). Every graph it
// writes is read back and compared with StructurallyEqual before it is used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/ir/graph.h"

namespace kiln::v1 {
class Graph;
class Node;
}  // namespace kiln::v1

namespace kiln::cache {

// Fills `out` from `graph`, then reads it back and checks that the result is
// StructurallyEqual to `graph`. With `source`, a Constant tensor that shares
// its bytes with a Constant of `source` is stored as a reference to that node
// (compiled plans refer to the model's weights instead of copying them).
// Unimplemented for anything the serializer does not know.
absl::Status GraphToProto(const ir::Graph& graph, v1::Graph* out,
                          const ir::Graph* source = nullptr);

// Rebuilds the graph with the same value and node ids. References to `source`
// share its tensors. InvalidArgument for malformed input (including a graph
// that does not verify), Unimplemented for an op or dtype this build does not
// know.
absl::StatusOr<ir::Graph> GraphFromProto(const v1::Graph& proto, const ir::Graph* source = nullptr);

// One node alone: its op, source op, attributes (tensors inline) and the
// number of its inputs and outputs (ids 0, 1, ...), and back. The torch worker
// receives a Fallback node's op this way (proto/kiln/v1/torch_worker.proto).
// Unimplemented for an attribute type the serializer does not know.
absl::Status NodeToProto(const ir::Node& node, v1::Node* out);
absl::StatusOr<ir::Node> NodeFromProto(const v1::Node& proto);

// A graph serialized for a cache file or the import child's answer:
//   8 bytes    size P of the kiln.v1.Graph message, little-endian
//   P bytes    the message (structure, attributes, small tensors)
//   padding    to a multiple of 64 bytes
//   blobs      every tensor of 1 KiB or more, each at a 64-byte aligned
//              offset (TensorData.blob_offset), so a reader can point at them
//              where they lie instead of copying them out of the message
// It refers to the graph's tensors rather than copying them: the graph must
// outlive it.
class SerializedGraph {
 public:
  // The bytes, as pieces to write one after another.
  std::vector<absl::string_view> Pieces() const;
  uint64_t size() const { return size_; }

 private:
  friend absl::StatusOr<SerializedGraph> SerializeGraph(const ir::Graph&);
  std::string head_;  // size, message, padding
  std::vector<Tensor> blobs_;
  std::vector<uint64_t> offsets_;  // of each blob, from the start of the blob region
  std::string zeros_;
  uint64_t size_ = 0;
};

// Serializes `graph` (GraphToProto's checks included). Unimplemented also when
// the message would exceed protobuf's 2 GiB limit.
absl::StatusOr<SerializedGraph> SerializeGraph(const ir::Graph& graph);

// Reads bytes in SerializeGraph's format. Tensors in the blob region point
// into `bytes` and hold `owner` (which must keep `bytes` alive) when `bytes`
// is 64-byte aligned; otherwise they are copied. InvalidArgument for
// malformed bytes, Unimplemented as GraphFromProto.
absl::StatusOr<ir::Graph> ParseGraph(absl::string_view bytes,
                                     std::shared_ptr<const void> owner = nullptr);

// SerializeGraph's bytes in one string (tests, small graphs).
std::string ToString(const SerializedGraph& serialized);

}  // namespace kiln::cache
