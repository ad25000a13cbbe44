// A natively translated node's libtorch twin: the Fallback node the importer
// would have emitted for the same source op, kept on the native node so that
// a compile whose kernel refuses the node for one signature ("not this way":
// an unusual weight rank, a dtype the kernel does not take) can run that node
// through libtorch instead, for that signature only.
//
// The twin is stored in the native node's attributes under "fallback.": the
// Fallback node's own attributes (op, overload, schema, args, arg<i>; see
// engine/importer/torchscript/fallback_convert.cc), "fallback.inputs" (the
// positions in the native node's inputs that the Fallback node takes, in
// order; -1 for an absent element of a list argument), and how the native
// node looked: "fallback.native_attrs" (how many attributes it had) and
// "fallback.native_node" (its kind and number of inputs), so that a node a
// pass has since changed (an epilogue or a bias fused into it) is never
// swapped for a twin that no longer computes the same thing.
#pragma once

#include <vector>

#include "engine/ir/graph.h"

namespace kiln::ir {

inline constexpr char kFallbackTwinPrefix[] = "fallback.";

// Stores `fallback_attrs` as `native`'s twin; `input_positions` index native.inputs.
void AddFallbackTwin(Node& native, const Attributes& fallback_attrs,
                     const std::vector<int64_t>& input_positions);

// Whether `name` is one of a twin's attributes (the printer leaves them out).
bool IsFallbackTwinAttr(const std::string& name);

// Turns `node` into its twin Fallback node (kind, attributes, inputs).
// False, leaving `node` as it is, when it has no twin or a pass has changed
// it since import.
bool SwapInFallbackTwin(Node& node);

// SwapInFallbackTwin on every node of `graph`; how many it swapped. The test
// runners (kiln-parity, kiln-sweep) run each case so too, checking every twin
// against libtorch's answer before a request needs it.
int SwapInEveryFallbackTwin(Graph& graph);

}  // namespace kiln::ir
